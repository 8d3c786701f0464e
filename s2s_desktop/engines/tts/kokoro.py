"""Kokoro-82M TTS through the PyTorch `kokoro` package (optional extra "kokoro"), 24 kHz.

`tts.model` is a folder laid out like the `hexgrad/Kokoro-82M` repo: config.json, one .pth
state dict, voices/NAME.pt. `tts.voice` names a voice (or "a,b" to blend them), `tts.language`
a Kokoro language code ("a" American English, "b" British, "e" Spanish, "f" French, "h",
"i", "p", "j", "z"). Weights and voices load with torch.load(weights_only=True) only.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ...errors import ModelLoadError, ModelNotFound, SettingsError, UnsafeModelFormat
from ...models.resolve import resolve_model
from ..base import TTSEngine, require
from .text_for_speech import speech_pieces
from .vits import torch_device

SAMPLE_RATE = 24000
REPO_ID = "hexgrad/Kokoro-82M"  # only names the model family for kokoro; nothing downloads
LANG_ALIASES = {
    "en": "a",
    "en-us": "a",
    "en-gb": "b",
    "es": "e",
    "fr": "f",
    "fr-fr": "f",
    "hi": "h",
    "it": "i",
    "pt": "p",
    "pt-br": "p",
    "ja": "j",
    "zh": "z",
}
LANG_CODES = "abefhipjz"
DEFAULT_VOICES = {
    "a": "af_heart",
    "b": "bf_emma",
    "e": "ef_dora",
    "f": "ff_siwis",
    "h": "hf_alpha",
    "i": "if_sara",
    "p": "pf_dora",
    "j": "jf_alpha",
    "z": "zf_xiaobei",
}
ENGLISH_SPACY_MODEL = "en_core_web_sm"  # misaki's English G2P; it would download it if absent


def lang_code(language: str) -> str:
    code = (language or "a").strip().lower()
    code = LANG_ALIASES.get(code, code)
    if code not in LANG_CODES:
        raise SettingsError(
            f"tts.language: Kokoro has no language '{language}'; use one of "
            f"{', '.join(LANG_CODES)} (a = American English)"
        )
    return code


def require_english_g2p(backend: str, code: str, extra: str = "kokoro") -> None:
    """misaki's English G2P downloads its spaCy model when missing: refuse instead (offline)."""
    if code not in "ab":
        return
    spacy = require("spacy", backend, "spacy", extra)
    if not spacy.util.is_package(ENGLISH_SPACY_MODEL):
        raise ModelNotFound(
            f"Kokoro's English pronunciation needs the spaCy model "
            f"{ENGLISH_SPACY_MODEL}: python -m spacy download {ENGLISH_SPACY_MODEL}"
        )


def load_tensors(path: Path, what: str):
    """torch.load restricted to tensors and plain containers; pickled code is refused."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnsafeModelFormat(
            f"{what} {path.name} holds more than tensors (pickled objects "
            "that could run code); refusing to load it"
        ) from exc
    except (OSError, RuntimeError, EOFError, ValueError) as exc:
        raise ModelLoadError(
            f"{what} {path} could not be read ({exc}): the file may be truncated; download it again"
        ) from exc


class KokoroTTS(TTSEngine):
    name = "kokoro"
    devices = ("cuda", "mps", "cpu")
    extra = "kokoro"
    suggested_on = ("cuda", "mps")
    sample_rate = SAMPLE_RATE

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self._pipeline = None
        self._voice_pack = None
        self._torch_device = "cpu"

    # ------------------------------------------------------------------ loading

    def _weights_file(self, folder: Path) -> Path:
        weights = sorted(folder.glob("*.pth"))
        if not weights:
            if any(folder.glob("*.onnx")):
                raise ModelLoadError(
                    f"{folder} holds an ONNX Kokoro; this backend needs the "
                    "PyTorch checkpoint (hexgrad/Kokoro-82M)"
                )
            raise ModelNotFound(
                f"no Kokoro weights (.pth) in {folder}: point tts.model at a "
                "downloaded hexgrad/Kokoro-82M folder"
            )
        if len(weights) > 1:
            raise ModelLoadError(
                f"{folder} holds several .pth files "
                f"({', '.join(p.name for p in weights)}): keep one"
            )
        return weights[0]

    def _voice_files(self, folder: Path, code: str) -> list[Path]:
        available = sorted((folder / "voices").glob("*.pt"))
        if not available:
            raise ModelNotFound(
                f"no Kokoro voices in {folder / 'voices'}: download the voices with the model"
            )
        wanted = self.settings.voice.strip() or DEFAULT_VOICES[code]
        by_name = {p.stem: p for p in available}
        if not self.settings.voice.strip() and wanted not in by_name:
            # no voice chosen: the first one of this language, else any
            same_lang = [p for p in available if p.stem.startswith(code)]
            return [(same_lang or available)[0]]
        files = []
        for name in (n.strip().removesuffix(".pt") for n in wanted.split(",")):
            if name not in by_name:
                names = ", ".join(list(by_name)[:10])
                raise SettingsError(
                    f"tts.voice: Kokoro has no voice '{name}' in {folder}; choose one of {names}"
                )
            files.append(by_name[name])
        return files

    def load(self) -> None:
        torch = self.require("torch", "torch")
        kokoro = self.require("kokoro", "kokoro")
        folder = resolve_model(self.settings.model, "tts")
        config = folder / "config.json"
        if not folder.is_dir() or not config.is_file():
            raise ModelLoadError(
                f"{folder} is not a Kokoro model folder (no config.json): "
                "point tts.model at a downloaded hexgrad/Kokoro-82M folder"
            )
        code = lang_code(self.settings.language)
        weights = self._weights_file(folder)
        voice_files = self._voice_files(folder, code)
        require_english_g2p(self.name, code)
        self._torch_device = torch_device(self.device)
        if self._torch_device == "mps":
            os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1")  # a few ops lack MPS kernels

        packs = [load_tensors(p, "Kokoro voice") for p in voice_files]
        if not all(isinstance(p, torch.Tensor) and p.shape[-1] == 256 for p in packs):
            raise ModelLoadError(
                f"{voice_files[0].parent} holds a voice that is not a Kokoro "
                "voice pack (a [510, 1, 256] tensor)"
            )
        self._voice_pack = packs[0] if len(packs) == 1 else torch.mean(torch.stack(packs), dim=0)
        # kokoro 0.9.x reads the .pth with torch.load(weights_only=True) itself; an unsafe
        # checkpoint surfaces as UnpicklingError, which is refused below
        try:
            model = kokoro.KModel(repo_id=REPO_ID, config=str(config), model=str(weights))
        except pickle.UnpicklingError as exc:
            raise UnsafeModelFormat(
                f"Kokoro weights {weights.name} hold more than tensors "
                "(pickled objects that could run code); refusing to load "
                "them"
            ) from exc
        except (OSError, RuntimeError, EOFError, KeyError, ValueError, AssertionError) as exc:
            raise ModelLoadError(
                f"Kokoro model in {folder} could not be loaded "
                f"({str(exc).splitlines()[0][:200] if str(exc) else repr(exc)}):"
                " the files may be corrupt or mismatched; download them again"
            ) from exc
        model = model.to(self._torch_device).eval()
        self._pipeline = kokoro.KPipeline(lang_code=code, repo_id=REPO_ID, model=model)
        self._torch = torch
        self.loaded = True

    def warmup(self) -> None:
        for _ in self.synthesize("Hello.", None, 1.0):
            pass

    def unload(self) -> None:
        self._pipeline = self._voice_pack = None
        super().unload()

    # ------------------------------------------------------------------ synthesis

    def synthesize(
        self, text: str, stop: threading.Event | None, speed: float
    ) -> Iterator[np.ndarray]:
        if self._pipeline is None:
            self.load()
        speed = float(speed or 1.0)
        for piece in speech_pieces(text):
            if stop is not None and stop.is_set():
                return
            # one piece per call: kokoro splits only at newlines and 510 phonemes itself
            results = self._pipeline(piece, voice=self._voice_pack, speed=speed, split_pattern=None)
            for result in results:
                if result.audio is None:
                    continue
                audio = result.audio.detach().float().cpu().numpy().reshape(-1)
                if audio.size:
                    yield np.clip(audio, -1.0, 1.0).astype(np.float32, copy=False)
                if stop is not None and stop.is_set():
                    return
