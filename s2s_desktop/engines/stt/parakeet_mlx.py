"""NVIDIA Parakeet (TDT/RNNT/CTC) on MLX via parakeet-mlx: fast English STT on Apple Silicon.

Models are parakeet-mlx folders (`config.json` in NeMo's layout, with the vocabulary inside it,
and `model.safetensors`), as in `mlx-community/parakeet-tdt-0.6b-v2`. The folder is read here
directly: parakeet-mlx's own `from_pretrained` asks the Hub first, and we never download behind
the user's back. Loading, warm-up and each transcription run under the MLX lock.

Language: Parakeet takes no language hint. v2 (and the other English Parakeets) only know
English; v3 detects one of 25 European languages itself. A `stt.language` the model cannot
transcribe is refused with a SettingsError naming what it can do, since ignoring it would turn
speech in that language into confident English-sounding nonsense; a language it can do is
accepted and only reported back.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from ... import host
from ...audio_format import SAMPLE_RATE
from ...errors import ModelLoadError, SettingsError
from ...mlx_lock import mlx_lock
from ...models.resolve import resolve_model
from ..base import STTEngine, STTOptions, STTResult, language_code

log = logging.getLogger(__name__)

BACKEND = "parakeet-mlx"
WEIGHTS = "model.safetensors"
ENGLISH = ("en",)
# parakeet-tdt-0.6b-v3's languages (NVIDIA's model card)
EUROPEAN = (
    "bg", "cs", "da", "de", "el", "en", "es", "et", "fi", "fr", "hr", "hu", "it",
    "lt", "lv", "mt", "nl", "pl", "pt", "ro", "ru", "sk", "sl", "sv", "uk",
)  # fmt: skip


def read_config(path: Path) -> dict:
    """The model's config.json, or ModelLoadError saying what is wrong with the folder."""
    if path.is_file() or not (path / "config.json").exists():
        raise ModelLoadError(
            f"parakeet-mlx needs a Parakeet MLX folder (config.json + {WEIGHTS}) at {path}: "
            "choose e.g. mlx-community/parakeet-tdt-0.6b-v2"
        )
    if not (path / WEIGHTS).exists():
        raise ModelLoadError(f"{path} has no {WEIGHTS}: download the model again")
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"{path / 'config.json'} is unreadable ({exc}): download the model again"
        ) from exc
    if not isinstance(config, dict) or "nemo" not in str(config.get("target", "")):
        raise ModelLoadError(
            f"{path} is not a Parakeet model (its config.json has no NeMo 'target'): "
            "choose e.g. mlx-community/parakeet-tdt-0.6b-v2"
        )
    return config


def model_languages(vocabulary: list[str]) -> tuple[str, ...]:
    """English-only models have a plain ASCII vocabulary (v2: 1024 pieces); v3's 8192 pieces
    carry accented and Cyrillic letters. The config names no languages, so the vocabulary tells."""
    letters = "".join(vocabulary).replace("▁", "")
    return EUROPEAN if any(ch.isalpha() and not ch.isascii() for ch in letters) else ENGLISH


def _on_apple_gpu() -> bool:
    return host.apple_silicon()


class ParakeetMLXSTT(STTEngine):
    name = BACKEND
    devices = ("mlx",)
    extra = "mlx"
    recognise_order = 2

    @classmethod
    def recognises(cls, model) -> bool:  # a NeMo model such as Parakeet
        target = str(model.config.get("target", "")).lower()
        return model.is_transformers_folder() and "nemo" in target

    def __init__(self, settings, device: str = "mlx"):
        super().__init__(settings, device)
        self._model = None
        self._languages: tuple[str, ...] = ENGLISH
        self._decoding = None
        # bfloat16 on the Apple GPU (parakeet-mlx's own default); MLX's CPU build is exact
        # and no slower in float32
        self._bf16 = _on_apple_gpu()

    def load(self) -> None:
        mx = self.require("mlx.core", "mlx")
        parakeet = self.require("parakeet_mlx", "parakeet-mlx")
        from dacite import DaciteError
        from mlx.utils import tree_flatten, tree_unflatten
        from parakeet_mlx.utils import from_config

        path = resolve_model(self.settings.model, "stt")
        config = read_config(path)
        dtype = mx.bfloat16 if self._bf16 else mx.float32
        with mlx_lock("stt"):
            try:
                model = from_config(config)
                model.load_weights(str(path / WEIGHTS))  # strict: every tensor, right shapes
                params = tree_flatten(model.parameters())
                model.update(tree_unflatten([(k, v.astype(dtype)) for k, v in params]))
                mx.eval(model.parameters())
            except (DaciteError, ValueError, TypeError, KeyError, OSError, RuntimeError) as exc:
                raise ModelLoadError(
                    f"parakeet-mlx could not load {path} ({exc}): the download may be "
                    "incomplete or not a Parakeet MLX model"
                ) from exc
        self._languages = model_languages(list(model.vocabulary))
        # refuse the language it loads with now, if the model cannot do it (each turn's own
        # language comes with the call)
        lang = self._language(self.settings.language)
        if lang and self._languages != ENGLISH:
            log.info("parakeet-mlx detects the language itself: stt.language is only checked")
        self._model = model
        beams = max(1, int(self.settings.beam_size or 1))
        # CTC models decode greedily only; TDT/RNNT take a beam
        use_beam = beams > 1 and not isinstance(model, parakeet.ParakeetCTC)
        self._decoding = parakeet.DecodingConfig(
            decoding=parakeet.Beam(beam_size=beams) if use_beam else parakeet.Greedy()
        )
        self.loaded = True
        log.info("parakeet-mlx loaded %s (%s)", path, ", ".join(self._languages))

    def _language(self, language: str | None) -> str | None:
        """The language to report for a transcript, or SettingsError for one the model lacks."""
        lang = language_code(language)
        if not lang:
            return "en" if self._languages == ENGLISH else None  # v3 does not say what it heard
        if lang not in self._languages:
            can = (
                "English only: set stt.language to en or leave it empty"
                if self._languages == ENGLISH
                else f"{', '.join(EUROPEAN)}: set stt.language to one of those or leave it empty"
            )
            raise SettingsError(
                f"stt.language: this Parakeet model cannot transcribe '{lang}'; it knows "
                f"{can}, or choose mlx-whisper for other languages"
            )
        return lang

    def warmup(self) -> None:
        """One second of silence through the encoder and decoder so kernels are compiled."""
        self._run(np.zeros(SAMPLE_RATE, np.float32))

    def unload(self) -> None:
        if self._model is not None:
            import mlx.core as mx

            with mlx_lock("stt"):
                self._model = None
                mx.clear_cache()
        super().unload()

    def _run(self, audio: np.ndarray) -> str:
        import mlx.core as mx
        from parakeet_mlx.audio import get_logmel

        cfg = self._model.preprocessor_config
        if audio.size < cfg.hop_length:
            return ""  # shorter than one mel frame: nothing to hear
        dtype = mx.bfloat16 if self._bf16 else mx.float32
        with mlx_lock("stt"):
            mel = get_logmel(mx.array(audio), cfg).astype(dtype)
            result = self._model.generate(mel, decoding_config=self._decoding)[0]
        return result.text

    def transcribe(self, audio: np.ndarray, language: str | None,
                   options: STTOptions) -> STTResult:
        if not self.loaded:
            raise ModelLoadError("the parakeet-mlx model is not loaded yet: load() it first")
        lang = self._language(language)
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        return STTResult(text=self._run(audio).strip(), language=lang)
