"""Qwen3-TTS on PyTorch through the `qwen-tts` package: CUDA first, the CPU as the fallback.

`tts.model` is a Qwen3-TTS folder as the Hub ships it (config.json, model.safetensors, the
text tokenizer files, generation_config.json and speech_tokenizer/ with its own config and
safetensors) or the Hub id of one in the local cache. CustomVoice models speak as one of their
named speakers (`tts.voice`, e.g. "ryan"); VoiceDesign models take `tts.voice` as a spoken
description of the voice. Base (voice-clone) models need a reference recording: refused.

qwen-tts 0.1.1 returns a whole waveform per call (its `non_streaming_mode=False` only simulates
streaming text input), so a text is said sentence by sentence; within a sentence a hook on the
talker ends generation at the next 80 ms codec frame once `stop` is set. Output is 24 kHz.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ...errors import (
    BackendUnavailable,
    DeviceUnavailable,
    ModelLoadError,
    S2SError,
    SettingsError,
    is_gpu_failure,
)
from ...models.resolve import resolve_model
from ..base import TTSEngine
from ..torch_device import torch_dtype_name
from .text_for_speech import speech_pieces
from .vits import check_safetensors, torch_device

log = logging.getLogger(__name__)

BACKEND = "qwen3-tts"
PACKAGE = "qwen-tts"
# pip names of what `import qwen_tts` pulls in, for the message when one is missing
PIP_NAMES = {"qwen_tts": PACKAGE, "sox": "sox", "einops": "einops", "librosa": "librosa"}
LANGUAGES = {
    "en": "english",
    "zh": "chinese",
    "ja": "japanese",
    "ko": "korean",
    "de": "german",
    "fr": "french",
    "ru": "russian",
    "pt": "portuguese",
    "es": "spanish",
    "it": "italian",
}
ENGLISH_SPEAKERS = ("ryan", "aiden")  # CustomVoice's native English voices, tried first
DEFAULT_DESIGN = "A calm, clear adult voice, speaking at a natural pace."
# codec frames are 80 ms: ~0.24 s of speech per character plus 2 s is a generous ceiling
# that still stops a model that never says its end token
FRAMES_BASE, FRAMES_PER_CHAR = 25, 3


class _Stopped(Exception):
    """Raised by the talker hook to end a generation once the stop event is set."""


class QwenTTSIncompatible(BackendUnavailable):
    """qwen-tts is installed but fails to import against the installed packages."""

    def __init__(self, exc: BaseException):
        versions = []
        for module in ("transformers", "torch"):
            try:
                versions.append(f"{module} {importlib.import_module(module).__version__}")
            except Exception:  # noqa: BLE001 - only for the message
                pass
        message = (
            f"backend '{BACKEND}': the {PACKAGE} package failed to import "
            f"({type(exc).__name__}: {str(exc).strip()[:160]}); qwen-tts 0.1.1 needs "
            f"transformers 4.57.x and a torchaudio built for the installed torch "
            f"(found {', '.join(versions) or 'neither'}): "
            'pip install "transformers==4.57.3" torchaudio'
        )
        S2SError.__init__(self, message)  # BackendUnavailable's own text would say "install"
        self.backend, self.package, self.extra = BACKEND, PACKAGE, None


def import_qwen_tts():
    """The qwen_tts module, or BackendUnavailable naming what to install."""
    try:
        return importlib.import_module("qwen_tts")
    except ImportError as exc:
        missing = (exc.name or "qwen_tts").split(".")[0]
        raise BackendUnavailable(BACKEND, PIP_NAMES.get(missing, missing)) from exc
    except Exception as exc:  # noqa: BLE001 - a version clash surfaces as TypeError/OSError
        raise QwenTTSIncompatible(exc) from exc


def check_folder(folder: Path) -> dict:
    """The model's config.json, after checking the folder holds a Qwen3-TTS model whose
    weights (its own and its speech tokenizer's) are safetensors."""
    config_file = folder / "config.json"
    if not folder.is_dir() or not config_file.is_file():
        raise ModelLoadError(
            f"{folder} is not a Qwen3-TTS model folder (no config.json): point tts.model at a "
            "folder such as Qwen3-TTS-12Hz-0.6B-CustomVoice"
        )
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"{config_file} is unreadable ({exc}): download the model again"
        ) from exc
    if not isinstance(config, dict) or config.get("model_type") != "qwen3_tts":
        kind = config.get("model_type") if isinstance(config, dict) else None
        raise ModelLoadError(
            f"{folder} holds a '{kind}' model, not Qwen3-TTS: choose another tts.backend "
            "or a Qwen3-TTS folder"
        )
    check_safetensors(folder, "Qwen3-TTS model")
    speech = folder / "speech_tokenizer"
    if not (speech / "config.json").is_file():
        raise ModelLoadError(
            f"{folder} has no speech_tokenizer/ folder (the codec that turns codes into "
            "sound): download the whole model folder again"
        )
    check_safetensors(speech, "Qwen3-TTS speech tokenizer")
    if config.get("tts_model_type") == "base":
        raise ModelLoadError(
            f"{folder.name} is a voice-clone Base model, which needs a reference recording: "
            "choose a CustomVoice or VoiceDesign model"
        )
    return config


def language_name(language: str, supported: list[str]) -> str:
    """The model's name for `tts.language` ("" = auto): ISO codes or names."""
    wanted = (language or "auto").strip().lower()
    wanted = LANGUAGES.get(wanted.partition("-")[0], wanted)
    if wanted not in supported:
        raise SettingsError(
            f"tts.language: this Qwen3-TTS model has no language '{language}'; use one of "
            f"{', '.join(sorted(supported))}"
        )
    return wanted


class Qwen3TTS(TTSEngine):
    name = BACKEND
    devices = ("cuda", "cpu")
    extra = "torch"
    sample_rate = 24000

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.tts = None  # qwen_tts.Qwen3TTSModel
        self.torch_device = "cpu"
        self.dtype_name = "float32"
        self.compiled: bool | None = None  # None: compile not asked for
        self._kind = ""
        self._speaker = ""
        self._design = ""
        self._language = "auto"
        self._stop: threading.Event | None = None
        self._hook = None

    def load(self) -> None:
        folder = resolve_model(self.settings.model, "tts")
        config = check_folder(folder)
        torch = self.require("torch", "torch")
        qwen_tts = import_qwen_tts()
        dev = torch_device(self.device)
        self.dtype_name = torch_dtype_name(dev)
        try:
            tts = qwen_tts.Qwen3TTSModel.from_pretrained(
                str(folder),
                device_map=dev,
                dtype=getattr(torch, self.dtype_name),
                local_files_only=True,
                use_safetensors=True,
                trust_remote_code=bool(getattr(self.settings, "trust_remote_code", False)),
            )
        except Exception as exc:  # noqa: BLE001 - sorted into device or model trouble
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            if dev != "cpu" and is_gpu_failure(exc):
                raise DeviceUnavailable(
                    f"Qwen3-TTS could not be put on {dev} ({reason}): "
                    "set tts.device=cpu or choose a smaller model"
                ) from exc
            raise ModelLoadError(
                f"Qwen3-TTS model in {folder} could not be loaded ({reason}): download it again"
            ) from exc
        self._kind = config.get("tts_model_type") or tts.model.tts_model_type
        self._language = language_name(self.settings.language, tts.get_supported_languages())
        self._choose_voice(tts)
        self.sample_rate = int(tts.model.speech_tokenizer.model.get_output_sample_rate())
        self._hook = tts.model.talker.register_forward_pre_hook(self._check_stop)
        self.tts, self.torch_device, self._torch = tts, dev, torch
        self.loaded = True
        log.info(
            "Qwen3-TTS (%s) loaded from %s on %s (%s)", self._kind, folder, dev, self.dtype_name
        )

    def _choose_voice(self, tts) -> None:
        voice = self.settings.voice.strip()
        if self._kind == "voice_design":
            self._design = voice or DEFAULT_DESIGN
            return
        speakers = tts.get_supported_speakers() or []
        if voice:
            if voice.lower() not in speakers:
                raise SettingsError(
                    f"tts.voice: this Qwen3-TTS model has no speaker '{voice}'; choose one of "
                    f"{', '.join(speakers)}"
                )
            self._speaker = voice.lower()
            return
        preferred = [s for s in ENGLISH_SPEAKERS if s in speakers]
        if not (preferred or speakers):
            raise ModelLoadError("this Qwen3-TTS CustomVoice model lists no speakers")
        self._speaker = (preferred or speakers)[0]

    def _check_stop(self, module, args) -> None:
        if self._stop is not None and self._stop.is_set():
            raise _Stopped

    def describe(self) -> str:
        voice = self._speaker or "designed voice"
        text = f"{self.name} on {self.device} ({self.dtype_name}, {voice})"
        if self.compiled is not None:
            text += ", compiled" if self.compiled else ", torch.compile failed: eager"
        return text

    def warmup(self) -> None:
        if getattr(self.settings, "compile", False) and self.tts is not None:
            from ..torch_compile import compile_with_fallback

            talker = self.tts.model.talker
            self.compiled = compile_with_fallback(
                [talker.model, talker.code_predictor.model],
                self.torch_device,
                "Qwen3-TTS",
                self._warm_once,
                BACKEND,
            )
            if self.compiled:
                return
        self._warm_once()

    def _warm_once(self) -> None:
        for _ in self.synthesize("Hello.", None, 1.0):
            pass

    def unload(self) -> None:
        if self._hook is not None:
            self._hook.remove()
        self.tts = self._hook = None
        if self.torch_device.startswith("cuda"):
            self._torch.cuda.empty_cache()
        super().unload()

    def _say(self, piece: str, stop: threading.Event | None) -> np.ndarray | None:
        """One piece as float32 PCM; None when `stop` ended it."""
        frames = FRAMES_BASE + FRAMES_PER_CHAR * len(piece)
        frames = min(frames, int(self.tts.generate_defaults.get("max_new_tokens", frames)))
        self._stop = stop
        try:
            if self._kind == "voice_design":
                wavs, _ = self.tts.generate_voice_design(
                    text=piece,
                    instruct=self._design,
                    language=self._language,
                    max_new_tokens=frames,
                )
            else:
                wavs, _ = self.tts.generate_custom_voice(
                    text=piece,
                    speaker=self._speaker,
                    language=self._language,
                    max_new_tokens=frames,
                )
        except _Stopped:
            return None
        finally:
            self._stop = None
        audio = np.asarray(wavs[0], dtype=np.float32).reshape(-1)
        return np.clip(audio, -1.0, 1.0)

    def synthesize(
        self, text: str, stop: threading.Event | None, speed: float
    ) -> Iterator[np.ndarray]:
        # `speed` is not used: Qwen3-TTS has no speaking-rate input
        if self.tts is None:
            self.load()
        for piece in speech_pieces(text):
            if stop is not None and stop.is_set():
                return
            audio = self._say(piece, stop)
            if audio is None or (stop is not None and stop.is_set()):
                return
            if audio.size:
                yield audio
