"""Whisper on CTranslate2 through faster-whisper: the default STT on CPU and NVIDIA GPUs.

The model is a folder converted for CTranslate2 (`model.bin`, `config.json`, `tokenizer.json`,
optionally `preprocessor_config.json`). Audio arrives already trimmed by our VAD, so
faster-whisper's own VAD stays off.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import numpy as np

from ... import host
from ...audio_format import SAMPLE_RATE
from ...errors import DeviceUnavailable, ModelLoadError, SettingsError
from ...languages import (
    LanguageChoice,
    choose_language,
    spoken_languages,
    voiced_languages,
)
from ...models.resolve import resolve_model
from ..base import STTEngine, STTOptions, STTResult, require

log = logging.getLogger(__name__)

VERIFY_HINT = "run `s2s-desktop models verify` or download the model again"
# Whisper decodes at most 448 tokens per 30 s window; a few are the prompt.
MAX_NEW_TOKENS = 400


def token_budget(n_samples: int) -> int:
    """New tokens allowed per window for a clip this long. Real speech stays far below
    (~3-6 tokens/s in English, ~10 in CJK); the cap stops a hallucination loop from decoding
    the full 448 tokens on a short clip, which costs seconds on a CPU."""
    seconds = min(30.0, n_samples / SAMPLE_RATE)
    return min(MAX_NEW_TOKENS, 24 + 16 * math.ceil(seconds))


SHORT_CLIP_S = 25.0  # longer recordings are cut at quiet spots into pieces this long at most
MIN_WINDOW_FRAMES = 1000  # 10 s: measured best (docs/performance.md); far less risks loops
FULL_FRAMES = 3000  # Whisper's own 30 s window
WINDOW_SAMPLES = 30 * SAMPLE_RATE
# Whisper's log-mel floor (the padding's value) is the clip's loudest bin - 8, scaled; the
# padding's encoder states are kept per level rounded to this step
PAD_LEVEL_STEP = 0.25


def encoder_frames(n_samples: int) -> int:
    """Mel frames to encode for a short clip: the clip plus ~2 s of padding, at least 10 s,
    at most Whisper's 30 s. The encoder's cost grows with the window, so a 2 s question costs
    a third of a full 30 s window."""
    frames = n_samples // 160 + 200
    return int(min(FULL_FRAMES, max(MIN_WINDOW_FRAMES, math.ceil(frames / 100) * 100)))


def split_windows(audio: np.ndarray, quiet_search_s: float = 5.0,
                  window: int = WINDOW_SAMPLES) -> list[np.ndarray]:
    """Cut `audio` into pieces of at most `window` samples, each cut at the quietest 100 ms in
    the last `quiet_search_s` seconds before the limit, so a word is rarely split in two."""
    pieces, start, n = [], 0, audio.size
    frame, search = SAMPLE_RATE // 10, int(quiet_search_s * SAMPLE_RATE)
    while n - start > window:
        lo, hi = start + window - search, start + window
        frames = audio[lo:hi][: (hi - lo) // frame * frame].reshape(-1, frame)
        cut = lo + int(np.argmin(np.square(frames).mean(axis=1))) * frame + frame // 2
        pieces.append(audio[start:cut])
        start = cut
    pieces.append(audio[start:])
    return pieces


def split_device(device: str) -> tuple[str, int]:
    """Split "cuda:1" into ("cuda", 1); "cpu" gives ("cpu", 0)."""
    base, _, index = (device or "cpu").partition(":")
    try:
        return base, int(index) if index else 0
    except ValueError:
        raise SettingsError(
            f"stt.device: '{device}' is not a device (use cpu, cuda or cuda:N)"
        ) from None


def model_folder(ref: str) -> Path:
    """The CTranslate2 model folder for `ref`, checked for the files faster-whisper needs."""
    path = resolve_model(ref, "stt")
    if path.is_file():  # the user pointed at model.bin itself
        path = path.parent
    if not (path / "model.bin").is_file():
        raise ModelLoadError(
            f"no model.bin in {path}: the model is incomplete ({VERIFY_HINT}), or it is not a "
            "CTranslate2 model (a transformers checkpoint needs stt.backend=transformers)"
        )
    if not (path / "tokenizer.json").is_file():
        # faster-whisper would quietly try to download one from the Hub instead.
        raise ModelLoadError(f"the Whisper model at {path} has no tokenizer.json: {VERIFY_HINT}")
    return path


def use_downloaded_cuda() -> None:
    """Load the CUDA libraries `s2s-desktop cuda install` downloaded, before CTranslate2
    looks for cuBLAS/cuDNN (it does so on first use, by name)."""
    from ...cuda import activate, store

    if store.is_installed():
        activate.activate()  # a reason is logged; CTranslate2 then reports what is missing


def cuda_hint(error: str) -> str:
    """Advice for a missing cuBLAS/cuDNN when the downloadable copy is not installed."""
    from ...cuda import store

    missing = any(k in error.lower() for k in ("cublas", "cudnn"))
    if missing and not store.is_installed():
        return "run `s2s-desktop cuda install` to download NVIDIA's CUDA libraries, or "
    return ""


class FasterWhisperSTT(STTEngine):
    name = "faster-whisper"
    devices = ("cuda", "cpu")
    suggested_on = ("cpu", "cuda")
    compute_types = (
        "auto",
        "int8",
        "int8_float16",
        "int8_float32",
        "float16",
        "float32",
        "bfloat16",
    )

    @classmethod
    def recognises(cls, model) -> bool:
        return {"model.bin", "config.json"} <= model.names  # CTranslate2 Whisper

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.model = None
        self.compute_type = ""
        self._padding: dict[float, np.ndarray] = {}  # see _padding_states

    def load(self) -> None:
        fw = require("faster_whisper", self.name, "faster-whisper")
        ctranslate2 = require("ctranslate2", self.name, "ctranslate2")
        path = model_folder(self.settings.model)
        base, index = split_device(self.device)
        if base not in ("cpu", "cuda"):
            raise DeviceUnavailable(
                f"faster-whisper runs on cpu or cuda, not {base}: set stt.device=cpu, or "
                "stt.backend=mlx-whisper on Apple Silicon"
            )
        if base == "cuda":
            use_downloaded_cuda()
        if base == "cuda" and ctranslate2.get_cuda_device_count() <= index:
            raise DeviceUnavailable(
                f"CTranslate2 sees no CUDA device {index} (driver or CUDA libraries missing?): "
                "set stt.device=cpu"
            )
        compute = self.settings.compute_type or "auto"
        if compute == "auto":
            compute = "float16" if base == "cuda" else "int8"
        t0 = time.perf_counter()
        try:
            # CTranslate2 rejects PathLike: pass a str.
            self.model = fw.WhisperModel(
                str(path),
                cpu_threads=host.cpu_count() if base == "cpu" else 0,  # 0: CTranslate2's 4
                device=base,
                device_index=index,
                compute_type=compute,
                local_files_only=True,
            )
        except ValueError as exc:
            if "compute type" in str(exc).lower() or "compute_type" in str(exc).lower():
                raise SettingsError(
                    f"stt.compute_type '{compute}' does not work on {self.device} ({exc}): "
                    "use auto, int8, int8_float16, float16 or float32"
                ) from exc
            raise ModelLoadError(self._load_message(path, exc)) from exc
        except (RuntimeError, OSError) as exc:
            unavailable = self._cuda_unavailable(exc)
            if unavailable:
                raise unavailable from exc
            raise ModelLoadError(self._load_message(path, exc)) from exc
        self.compute_type = compute
        # refuse the language it loads with now, if the model cannot do it (each turn's own
        # language comes with the call), and "languages I speak" it does not know
        self._language(self.settings.language)
        self._spoken(self.settings.languages)
        log.info(
            "faster-whisper %s loaded in %.2f s on %s (%s)",
            path,
            time.perf_counter() - t0,
            self.device,
            compute,
        )
        self.loaded = True

    def _cuda_unavailable(self, exc: Exception) -> DeviceUnavailable | None:
        """A CUDA library problem as DeviceUnavailable saying what to install, else None.
        CTranslate2 opens cuBLAS only at the first encode, so this fits load and warm-up."""
        text = str(exc)
        if split_device(self.device)[0] != "cuda" or not any(
            k in text.lower() for k in ("cuda", "cublas", "cudnn")
        ):
            return None
        return DeviceUnavailable(
            f"faster-whisper could not use {self.device} ({(text.splitlines() or [''])[0]}): "
            f"{cuda_hint(text)}set stt.device=cpu"
        )

    @staticmethod
    def _load_message(path: Path, exc: Exception) -> str:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return (
            f"cannot load the Whisper model at {path} ({first}): it may be corrupt or "
            f"incomplete; {VERIFY_HINT}"
        )

    def warmup(self) -> None:
        # One encoder pass and a few decoder steps, on the path `transcribe` takes, ready the
        # kernels; a full decode with temperature fallback would only waste start-up time.
        if self.model is None:
            self.load()
        # as loud as speech, so its padding is at the usual level (-0.75): the one level whose
        # encoder states are encoded here, once, before the first question
        noise = 0.5 * np.random.default_rng(0).standard_normal(SAMPLE_RATE // 2).astype(np.float32)
        lang = self._language(None)
        options = STTOptions.of(self.settings)  # warm the path the settings choose at load
        try:
            if options.short_window:
                self._generate(noise, lang, MIN_WINDOW_FRAMES, 4, options)
            else:
                self._decode(noise, lang, 4, options, temperature=0.0)
        except RuntimeError as exc:  # seen on CUDA 13: "Library libcublas.so.12 is not found"
            unavailable = self._cuda_unavailable(exc)
            if unavailable:
                raise unavailable from exc
            raise

    def unload(self) -> None:
        self.model, self._padding = None, {}
        super().unload()

    def describe(self) -> str:
        return f"{self.name} on {self.device} ({self.compute_type or self.settings.compute_type})"

    def _language(self, language: str | None) -> str | None:
        lang = language or None
        if lang and not self.model.model.is_multilingual:
            return self.english_only(lang)
        if lang:
            lang = lang.lower()
            if lang not in self.model.supported_languages:
                raise SettingsError(
                    f"stt.language: '{lang}' is not a language this Whisper model knows: use a "
                    "code such as en, fr, de, or leave it empty to detect the language"
                )
        return lang

    def _spoken(self, languages: str) -> tuple[str, ...]:
        """`stt.languages`, checked against what the model knows."""
        spoken = spoken_languages(languages)
        unknown = [x for x in spoken if x not in self.model.supported_languages]
        if unknown and self.model.model.is_multilingual:
            raise SettingsError(
                f"stt.languages: {', '.join(unknown)} is not a language this Whisper model "
                "knows: use codes such as en, fr, de"
            )
        return spoken

    def _choose(self, ranked: list[tuple[str, float]], options: STTOptions) -> LanguageChoice:
        """The turn's language among the detected ones (languages.choose_language)."""
        return choose_language(ranked, self._spoken(options.languages),
                               options.language_threshold, voiced_languages())

    def transcribe(self, audio: np.ndarray, language: str | None,
                   options: STTOptions) -> STTResult:
        audio = self._prepare(audio)
        if audio.size == 0:
            return STTResult("")
        lang = self._language(language)
        if options.short_window:
            try:
                return self._transcribe_windows(audio, lang, options)
            except (RuntimeError, ValueError) as exc:  # a model with a fixed 30 s window
                log.info("short-window decode not possible (%s); using the full window", exc)
        return self._decode(audio, lang, token_budget(audio.size), options)

    def _prepare(self, audio: np.ndarray) -> np.ndarray:
        if self.model is None:
            self.load()
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def _transcribe_windows(self, audio: np.ndarray, language: str | None,
                            options: STTOptions) -> STTResult:
        """Pieces of at most SHORT_CLIP_S (cut at quiet spots), each in its own short window
        with the text before it as context, so a long recording keeps every word."""
        pieces = split_windows(audio, window=int(SHORT_CLIP_S * SAMPLE_RATE))
        texts, lang, sure = [], language, None
        for piece in pieces:
            decoded = self._generate(piece, lang, encoder_frames(piece.size),
                                     token_budget(piece.size), options,
                                     prompt=" ".join(texts)[-400:])
            if not lang:  # the first piece's language holds for the recording
                lang, sure = decoded.language, decoded.language_probability
            texts.append(decoded.text)
        return STTResult(" ".join(t for t in texts if t), lang or "en", sure)

    def _padding_states(self, level: float, frames: int) -> np.ndarray:
        """The encoder's states for Whisper's padding (log-mel `level`) after the first
        `frames` mel frames, encoded once per level. The decoder was trained to attend over a
        whole 30 s window; cut to the short window it mishears some voices ("capital and
        friends" for "capital of France")."""
        import ctranslate2

        level = round(level / PAD_LEVEL_STEP) * PAD_LEVEL_STEP
        if level not in self._padding:
            mels = self.model.feature_extractor.mel_filters.shape[0]
            quiet = np.full((1, mels, FULL_FRAMES), level, dtype=np.float32)
            self._padding[level] = np.array(self.model.model.encode(
                ctranslate2.StorageView.from_array(quiet), to_cpu=True))
        return self._padding[level][:, frames // 2:]

    def _encode(self, audio: np.ndarray, frames: int):
        """Whisper's encoder states for a whole 30 s window. On the CPU only the first
        `frames` mel frames are encoded (the encoder's cost grows with the window) and the
        padding's states complete them; elsewhere the full window is cheap."""
        import ctranslate2

        on_cpu = split_device(self.device)[0] == "cpu"
        frames = frames if on_cpu else FULL_FRAMES
        features = self.model.feature_extractor(audio, padding=max(0, frames * 160 - audio.size))
        features = np.ascontiguousarray(features[None, :, :frames], dtype=np.float32)
        encoded = self.model.model.encode(ctranslate2.StorageView.from_array(features),
                                          to_cpu=False)
        if frames >= FULL_FRAMES:
            return encoded
        padding = self._padding_states(float(features[0, 0, -1]), frames)  # the last frame pads
        whole = np.concatenate([np.asarray(encoded), padding], axis=1)
        return ctranslate2.StorageView.from_array(np.ascontiguousarray(whole))

    def _generate(self, audio: np.ndarray, language: str | None, frames: int,
                  max_new_tokens: int, options: STTOptions, prompt: str = "") -> STTResult:
        """Encode the window (`_encode`; faster-whisper itself always encodes 30 s) and
        decode after the previous-text `prompt`."""
        from faster_whisper.tokenizer import Tokenizer

        encoded = self._encode(audio, frames)
        multilingual = self.model.model.is_multilingual
        sure = None
        if multilingual and not language:
            ranked = self.model.model.detect_language(encoded)[0]  # [("<|en|>", p), ...]
            choice = self._choose(ranked, options)
            language, sure = choice.language, choice.probability
        tokenizer = Tokenizer(self.model.hf_tokenizer, multilingual, task="transcribe",
                              language=language if multilingual else "en")
        before = []
        if prompt.strip():  # the last 223 tokens, as faster-whisper does
            before = [tokenizer.sot_prev] + tokenizer.encode(" " + prompt.strip())[-223:]
        start = before + list(tokenizer.sot_sequence) + [tokenizer.no_timestamps]
        result = self.model.model.generate(
            encoded, [start], beam_size=max(1, int(self.settings.beam_size)),
            max_length=min(448, len(start) + max_new_tokens), suppress_blank=True,
            suppress_tokens=[-1],
        )[0]
        ids = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
        return STTResult(tokenizer.decode(ids).strip(), language or "en", sure)

    def _decode(self, audio: np.ndarray, language: str | None, max_new_tokens: int,
                options: STTOptions, temperature: float | None = None,
                prompt: str = "") -> STTResult:
        """faster-whisper's own decode: 30 s windows, temperature fallback."""
        extra = {} if temperature is None else {"temperature": temperature}
        sure = None
        if not language and self.model.model.is_multilingual:
            # detected here, so stt.languages and the threshold apply (faster-whisper's own
            # detection would take any language, however unsure)
            _, _, ranked = self.model.detect_language(audio)
            choice = self._choose(ranked, options)
            language, sure = choice.language, choice.probability
        segments, info = self.model.transcribe(
            audio,
            language=language,
            task="transcribe",
            beam_size=max(1, int(self.settings.beam_size)),
            condition_on_previous_text=False,  # one utterance: nothing earlier to lean on
            initial_prompt=prompt.strip() or None,
            vad_filter=False,  # our VAD already trimmed the silence
            without_timestamps=True,
            max_new_tokens=max_new_tokens,
            **extra,
        )
        return STTResult("".join(seg.text for seg in segments).strip(), info.language, sure)
