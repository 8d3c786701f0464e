"""Whisper on MLX (Apple Silicon GPU; MLX's CPU build elsewhere) via mlx-whisper.

Models are MLX Whisper folders (`config.json` + `weights.safetensors` or `weights.npz`, as in
`mlx-community/whisper-*-mlx`). Loading and each transcription run under the MLX lock.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import numpy as np

from ... import host
from ...audio_format import SAMPLE_RATE
from ...errors import ModelLoadError
from ...mlx_lock import mlx_lock
from ...models.resolve import resolve_model
from ..base import STTEngine, STTOptions, STTResult

log = logging.getLogger(__name__)

BACKEND = "mlx-whisper"
# Greedy first for latency; retry warmer only when a decode looks broken (repetition loops).
TEMPERATURES = (0.0, 0.4, 0.8)


def _weights_file(path: Path) -> Path:
    if path.is_file() or not (path / "config.json").exists():
        hint = (
            " (a CTranslate2 model.bin belongs to faster-whisper)"
            if (path.name == "model.bin" or (path / "model.bin").exists())
            else ""
        )
        raise ModelLoadError(
            f"mlx-whisper needs an MLX Whisper folder (config.json + weights.safetensors or "
            f"weights.npz) at {path}{hint}: choose e.g. mlx-community/whisper-small-mlx"
        )
    for name in ("weights.safetensors", "weights.npz"):
        if (path / name).exists():
            return path / name
    raise ModelLoadError(f"{path} has no weights.safetensors or weights.npz: download it again")


def _half_precision() -> bool:
    """float16 on the Apple GPU; MLX's CPU build is faster and exact in float32."""
    return host.apple_silicon()


class MLXWhisperSTT(STTEngine):
    name = BACKEND
    devices = ("mlx",)
    extra = "mlx"
    suggested_on = ("mlx",)
    recognise_order = 1

    @classmethod
    def recognises(cls, model) -> bool:
        weights = {"weights.npz", "weights.safetensors"} & model.names
        return "config.json" in model.names and bool(weights)

    def __init__(self, settings, device: str = "mlx"):
        super().__init__(settings, device)
        self._mw = None  # the mlx_whisper.transcribe module (the package name is shadowed)
        self._model = None
        self._key = ""
        self._fp16 = _half_precision()

    def load(self) -> None:
        mx = self.require("mlx.core", "mlx")
        self.require("mlx_whisper", "mlx-whisper")
        self._mw = importlib.import_module("mlx_whisper.transcribe")
        from mlx_whisper.load_models import load_model

        path = resolve_model(self.settings.model, "stt")
        _weights_file(path)
        dtype = mx.float16 if self._fp16 else mx.float32
        with mlx_lock("stt"):
            try:
                self._model = load_model(str(path), dtype=dtype)
            except (ValueError, TypeError, KeyError, OSError, RuntimeError) as exc:
                raise ModelLoadError(
                    f"mlx-whisper could not load {path} ({exc}): the download may be "
                    "incomplete or not an MLX Whisper model"
                ) from exc
        self._key = str(path)
        self.loaded = True

    def warmup(self) -> None:
        """Run the encoder once so the first press does not pay for kernel set-up."""
        import mlx.core as mx
        from mlx_whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram

        with mlx_lock("stt"):
            mel = log_mel_spectrogram(
                np.zeros(SAMPLE_RATE, np.float32), self._model.dims.n_mels, padding=N_SAMPLES
            )[:N_FRAMES]
            dtype = mx.float16 if self._fp16 else mx.float32
            mx.eval(self._model.embed_audio(mel[None].astype(dtype)))

    def unload(self) -> None:
        if self._model is not None:
            with mlx_lock("stt"):
                holder = self._mw.ModelHolder
                if holder.model is self._model:
                    holder.model = holder.model_path = None
                self._model = None
                import mlx.core as mx

                mx.clear_cache()
        super().unload()

    def transcribe(self, audio: np.ndarray, language: str | None,
                   options: STTOptions) -> STTResult:
        if not self.loaded:
            raise ModelLoadError("the mlx-whisper model is not loaded yet: load() it first")
        audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        lang = language or None
        if not self._model.is_multilingual:
            lang = self.english_only(lang)
        with mlx_lock("stt"):
            # mlx-whisper keeps one model per process in ModelHolder: hand it ours
            holder = self._mw.ModelHolder
            holder.model, holder.model_path = self._model, self._key
            result = self._mw.transcribe(
                audio,
                path_or_hf_repo=self._key,
                language=lang,
                temperature=TEMPERATURES,
                condition_on_previous_text=False,
                without_timestamps=True,  # one decode per 30 s window: faster, no segments
                fp16=self._fp16,
                verbose=None,
            )
        return STTResult(text=str(result.get("text", "")).strip(), language=result.get("language"))
