"""VITS TTS through transformers (`VitsModel`): Meta's MMS-TTS voices (1,100+ languages).

`tts.model` is a folder in the MMS-TTS layout (config.json, model.safetensors, vocab.json,
tokenizer_config.json) or the Hub id of one in the local cache. Weights load from safetensors
only. A long text is said piece by piece (sentences, then clauses) so audio starts early.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ...errors import DeviceUnavailable, ModelLoadError, SettingsError, UnsafeModelFormat
from ...models.resolve import resolve_model
from ..base import TTSEngine
from .text_for_speech import speech_pieces


def torch_device(device: str) -> str:
    """The torch device for an engine device string; DeviceUnavailable if it is not there."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                f"{device} was requested but torch sees no CUDA GPU "
                "(CPU-only torch build or no driver); set tts.device=cpu"
            )
        return device
    if device in ("mps", "mlx"):  # "mlx" reaches torch backends on Apple Silicon as mps
        if not torch.backends.mps.is_available():
            raise DeviceUnavailable(
                f"{device} was requested but torch has no MPS support here; set tts.device=cpu"
            )
        return "mps"
    return "cpu"


def check_safetensors(folder: Path, what: str) -> None:
    """Refuse a folder whose weights exist only as pickle (it could run code on load)."""
    if any(folder.glob("*.safetensors")):
        return
    if any(folder.glob("*.bin")) or any(folder.glob("*.pt*")):
        raise UnsafeModelFormat(
            f"{what} in {folder} has only pickle weights (.bin/.pt): "
            "use a copy converted to safetensors"
        )
    raise ModelLoadError(f"no model.safetensors in {folder}: is this a {what} folder?")


class VitsTTS(TTSEngine):
    name = "vits"
    devices = ("cuda", "mps", "cpu")
    extra = "torch"
    recognise_order = 2

    @classmethod
    def recognises(cls, model) -> bool:
        return model.is_transformers_folder() and model.config_says("vits")

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self._model = None
        self._tokenizer = None
        self._torch_device = "cpu"
        self._speaker_id: int | None = None
        self.compiled: bool | None = None  # None: tts.compile is off

    def load(self) -> None:
        torch = self.require("torch", "torch")
        transformers = self.require("transformers", "transformers")
        folder = resolve_model(self.settings.model, "tts")
        if not folder.is_dir() or not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"{folder} is not a VITS model folder (no config.json): "
                "point tts.model at an MMS-TTS folder"
            )
        check_safetensors(folder, "VITS model")
        self._torch_device = torch_device(self.device)
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model = transformers.VitsModel.from_pretrained(
                folder, use_safetensors=True, local_files_only=True
            )
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise ModelLoadError(
                f"VITS model in {folder} could not be loaded "
                f"({str(exc).splitlines()[0][:200]}): download it again"
            ) from exc
        self._model = model.to(self._torch_device).eval()
        self._tokenizer = tokenizer
        self._speaker_id = self._choose_speaker(model.config)
        self.sample_rate = int(model.config.sampling_rate)
        self._torch = torch
        self.loaded = True

    def _choose_speaker(self, config) -> int | None:
        voice = self.settings.voice.strip()
        if config.num_speakers <= 1 or not voice:
            return None
        if voice.isdigit() and int(voice) < config.num_speakers:
            return int(voice)
        raise SettingsError(
            f"tts.voice: this VITS model has speakers 0–{config.num_speakers - 1}; "
            f"'{voice}' is not one of them"
        )

    def warmup(self) -> None:
        if getattr(self.settings, "compile", False) and self._model is not None:
            from ..torch_compile import compile_with_fallback

            self.compiled = compile_with_fallback(
                [self._model], self._torch_device, "VITS", self._warm_once, self.name
            )
            if self.compiled:
                return
        self._warm_once()

    def _warm_once(self) -> None:
        for _ in self.synthesize("Hello.", None, 1.0):
            pass

    def describe(self) -> str:
        text = super().describe()
        if self.compiled is not None:
            text += " (compiled)" if self.compiled else " (torch.compile failed: eager)"
        return text

    def unload(self) -> None:
        self._model = self._tokenizer = None
        super().unload()

    def synthesize(
        self, text: str, stop: threading.Event | None, speed: float
    ) -> Iterator[np.ndarray]:
        if self._model is None:
            self.load()
        torch = self._torch
        speed = float(speed or 1.0)
        for piece in speech_pieces(text):
            if stop is not None and stop.is_set():
                return
            inputs = self._tokenizer(piece, return_tensors="pt")
            ids, pad = inputs["input_ids"], self._tokenizer.pad_token_id
            if ids.shape[-1] == 0 or (pad is not None and not bool((ids != pad).any())):
                continue  # nothing this voice's alphabet can say (e.g. only digits/symbols)
            inputs = {k: v.to(self._torch_device) for k, v in inputs.items()}
            if self._speaker_id is not None:
                inputs["speaker_id"] = self._speaker_id
            with torch.inference_mode():
                wave = self._model(**inputs, speaking_rate=speed).waveform[0]
            audio = wave.float().cpu().numpy()
            yield np.clip(audio, -1.0, 1.0).astype(np.float32, copy=False)
