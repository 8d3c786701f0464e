"""Piper TTS (ONNX VITS voices, espeak-ng phonemes): fast on CPU, one chunk per sentence.

A voice is an `.onnx` file with its `.onnx.json` config beside it. `tts.model` is that file,
or a folder of voices (a local one or the cached `rhasspy/piper-voices` repo) with `tts.voice`
naming the file inside it. piper-tts is GPL-3.0+, so it is the optional extra "piper".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ...errors import DeviceUnavailable, ModelLoadError, ModelNotFound, SettingsError
from ...models.resolve import resolve_model
from ..base import TTSEngine
from .piper_parts import VoiceGain, VoiceParts, decode_in_parts, soft_limit, split_graph

CUDA_PROVIDER = "CUDAExecutionProvider"


class PiperTTS(TTSEngine):
    name = "piper"
    devices = ("cuda", "cpu")
    extra = "piper"
    suggested_on = ("cpu",)

    @classmethod
    def recognises(cls, model) -> bool:  # a voice: .onnx with its .onnx.json
        return any(model.has_sidecar(n) for n in model.onnx_files())

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self._voice = None  # piper.PiperVoice once loaded
        self._parts: VoiceParts | None = None  # the voice cut at its decoder, where it can be
        self._gain = VoiceGain()
        self._speaker_id: int | None = None
        self.model_path: Path | None = None

    # ------------------------------------------------------------------ loading

    def voice_file(self) -> Path:
        """The `.onnx` file the settings point at (a file, or a voice inside a folder)."""
        path = resolve_model(self.settings.model, "tts")
        if path.is_file():
            return path
        voice = self.settings.voice.strip()
        if voice:
            name = voice if voice.endswith(".onnx") else f"{voice}.onnx"
            return resolve_model(self.settings.model, "tts", name)
        found = sorted(path.rglob("*.onnx"))
        if len(found) == 1:
            return found[0]
        if not found:
            raise ModelNotFound(
                f"no piper voice (.onnx) in {path}: point tts.model at a voice file"
            )
        names = ", ".join(str(p.relative_to(path)) for p in found[:5])
        raise SettingsError(
            f"{path} holds {len(found)} piper voices: set tts.voice to one of them (e.g. {names})"
        )

    def load(self) -> None:
        self.require("piper", "piper-tts")
        import onnxruntime
        from piper import PiperVoice

        onnx_path = self.voice_file()
        config = self._read_config(onnx_path)
        split = split_graph(onnx_path) if onnx_path.is_file() else None
        if split is None:  # run whole: one chunk per sentence
            session = self._open_session(onnxruntime, onnx_path)
            self._parts = None
        else:
            front, decoder, latent = split
            session = self._open_session(onnxruntime, onnx_path, front)
            self._parts = VoiceParts(session, self._open_session(onnxruntime, onnx_path, decoder),
                                     latent, int(config.hop_length))
        self._gain = VoiceGain()
        self._voice = PiperVoice(session=session, config=config)
        self._speaker_id = self._choose_speaker(config)
        self.sample_rate = int(config.sample_rate)
        self.model_path = onnx_path
        self.loaded = True

    @staticmethod
    def _read_config(onnx_path: Path):
        from piper.config import PiperConfig

        config_path = onnx_path.with_name(onnx_path.name + ".json")
        if not config_path.is_file():
            raise ModelLoadError(
                f"piper voice config {config_path.name} is missing: put the "
                f"voice's .onnx.json file next to {onnx_path}"
            )
        try:
            return PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelLoadError(
                f"piper voice config {config_path} is not a valid piper voice "
                f"config ({exc!r}): download the voice again"
            ) from exc

    def _providers(self, onnxruntime) -> list:
        if not self.device.startswith("cuda"):
            return ["CPUExecutionProvider"]
        if CUDA_PROVIDER not in onnxruntime.get_available_providers():
            # DeviceUnavailable lets the caller fall back to the CPU and tell the user
            raise DeviceUnavailable(
                "piper: this onnxruntime has no CUDA support: "
                "pip install onnxruntime-gpu, or set tts.device=cpu"
            )
        device_id = int(self.device.partition(":")[2] or 0)
        options = {"device_id": device_id, "cudnn_conv_algo_search": "HEURISTIC"}
        return [(CUDA_PROVIDER, options), "CPUExecutionProvider"]

    def _open_session(self, onnxruntime, onnx_path: Path, graph: bytes | None = None):
        """A session for the voice, or for one part of it (`graph`, cut from onnx_path)."""
        providers = self._providers(onnxruntime)
        options = onnxruntime.SessionOptions()
        # idle threads sleep instead of spinning: the LLM writes on the same cores meanwhile
        # (2 cores: TTS 0.10 → 0.09 s per s of audio with the LLM running; alone ~the same)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = onnxruntime.InferenceSession(
                graph if graph is not None else str(onnx_path),
                sess_options=options, providers=providers
            )
        except Exception as exc:  # onnxruntime raises its own, unexported exception types
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else repr(exc)
            if self.device.startswith("cuda") and any(
                k in str(exc) for k in ("CUDA", "cuda", "cuDNN", "out of memory")
            ):  # a GPU failure, not a bad file: let the stage fall back to the CPU
                raise DeviceUnavailable(f"piper could not use {self.device} ({reason})") from exc
            raise ModelLoadError(
                f"piper voice {onnx_path.name} could not be loaded ({reason}): "
                "the file may be truncated or corrupt; download it again"
            ) from exc
        if self.device.startswith("cuda") and CUDA_PROVIDER not in session.get_providers():
            # onnxruntime falls back to the CPU silently when the CUDA libraries are missing
            raise DeviceUnavailable(
                "piper: onnxruntime could not load the CUDA libraries "
                "(CUDA/cuDNN missing or mismatched); set tts.device=cpu"
            )
        return session

    def _choose_speaker(self, config) -> int | None:
        """For a multi-speaker voice given as a file, tts.voice may name the speaker."""
        if config.num_speakers <= 1:
            return None
        voice = self.settings.voice.strip()
        if (
            not voice
            or voice.endswith(".onnx")
            or resolve_model(self.settings.model, "tts").is_dir()
        ):
            return config.default_speaker_id
        if voice in config.speaker_id_map:
            return config.speaker_id_map[voice]
        if voice.isdigit() and int(voice) < config.num_speakers:
            return int(voice)
        names = ", ".join(list(config.speaker_id_map)[:8])
        raise SettingsError(
            f"tts.voice: this piper voice has no speaker '{voice}'; choose one of {names}"
        )

    def warmup(self) -> None:
        # two sentences: compiled kernels for short and long inputs, and the voice's loudness
        for _ in self.synthesize("Hello! The capital of Japan is Tokyo.", None, 1.0):
            pass

    def unload(self) -> None:
        self._voice = self._parts = None
        super().unload()

    # ------------------------------------------------------------------ synthesis

    def synthesize(
        self, text: str, stop: threading.Event | None, speed: float
    ) -> Iterator[np.ndarray]:
        if self._voice is None:
            self.load()
        if not text.strip() or (stop is not None and stop.is_set()):
            return
        config = self._voice.config
        length_scale = config.length_scale / float(speed or 1.0)  # < 1 speaks faster
        if self._parts is None:
            yield from self._whole_sentences(text, stop, length_scale)
            return
        scales = np.array([config.noise_scale, length_scale, config.noise_w_scale], np.float32)
        # piper phonemizes the whole text at once (cheap), then the model runs per sentence
        for phonemes in self._voice.phonemize(text):
            if stop is not None and stop.is_set():
                return
            if not phonemes:
                continue
            ids = np.array([self._voice.phonemes_to_ids(phonemes)], dtype=np.int64)
            feed = {"input": ids, "input_lengths": np.array([ids.shape[1]], np.int64),
                    "scales": scales}
            gain, loudest = None, 0.0
            for audio in decode_in_parts(self._parts, feed, stop):
                if stop is not None and stop.is_set():
                    return
                gain = gain or self._gain.start_sentence(audio)
                loudest = max(loudest, float(np.abs(audio).max(initial=0.0)))
                yield soft_limit(audio * np.float32(gain))  # the decoder writes float32
            self._gain.sentence_done(loudest)

    def _whole_sentences(self, text: str, stop, length_scale: float) -> Iterator[np.ndarray]:
        """piper's own synthesis, one chunk per sentence, each scaled to its own peak."""
        from piper.config import SynthesisConfig

        syn = SynthesisConfig(speaker_id=self._speaker_id, length_scale=length_scale)
        chunks = self._voice.synthesize(text, syn_config=syn)
        try:
            for chunk in chunks:
                if stop is not None and stop.is_set():
                    return
                audio = np.asarray(chunk.audio_float_array, dtype=np.float32).reshape(-1)
                if audio.size:
                    yield audio
                if stop is not None and stop.is_set():
                    return
        finally:
            chunks.close()
