"""TTS on Apple Silicon through mlx-audio (optional extra "mlx"): Kokoro and Qwen3-TTS.

`tts.model` is a local folder or a Hub id. Hub ids of the PyTorch checkpoints map to their
`mlx-community` conversions (`mlx_repo_for`), with `tts.bits` (when the settings have it)
choosing 4/6/8-bit quantization or bf16. Nothing downloads here: the converted repo must be
in the local Hugging Face cache (the model manager fetches it). Every MLX call runs under the
process-wide MLX lock, taken per generated segment so other stages get their turn.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ...config import check_tts_bits
from ...errors import ModelLoadError, ModelNotFound
from ...mlx_lock import mlx_lock
from ...models.resolve import looks_like_repo_id, resolve_model
from ..base import TTSEngine
from .kokoro import DEFAULT_VOICES as KOKORO_DEFAULT_VOICES
from .kokoro import lang_code as kokoro_lang_code
from .kokoro import require_english_g2p
from .text_for_speech import speech_pieces

MLX_ORG = "mlx-community"
# PyTorch checkpoints (by repo name prefix) that mlx-community publishes as NAME-<bits>
CONVERTED_FAMILIES = ("Kokoro-82M", "Qwen3-TTS-")
_PRECISION_SUFFIX = re.compile(r"-(bf16|fp16|float16|\d+bit)$")
# Qwen3-TTS takes language names; settings hold ISO codes
QWEN_LANGUAGES = {
    "": "auto",
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


def _precision(bits: int) -> str:
    check_tts_bits(bits)
    return "bf16" if bits in (0, 16) else f"{bits}bit"


def mlx_repo_for(repo_id: str, bits: int = 0) -> str:
    """The mlx-community conversion of a Hub repo at the given precision.

    "hexgrad/Kokoro-82M", 4 → "mlx-community/Kokoro-82M-4bit"; 0 or 16 → "...-bf16".
    An mlx-community id keeps its name unless `bits` asks for another precision. Other
    repos (already MLX, or unknown) are returned unchanged."""
    org, _, name = repo_id.partition("/")
    if org == MLX_ORG:
        if bits == 0 or not _PRECISION_SUFFIX.search(name):
            _precision(bits)  # still refuse a bad value
            return repo_id
        return f"{MLX_ORG}/{_PRECISION_SUFFIX.sub('', name)}-{_precision(bits)}"
    if name and any(name.startswith(family) for family in CONVERTED_FAMILIES):
        return f"{MLX_ORG}/{_PRECISION_SUFFIX.sub('', name)}-{_precision(bits)}"
    return repo_id


def _to_numpy(mx, audio) -> np.ndarray:
    """mx.array → float32 numpy; evaluating it is MLX work, so call this under the lock."""
    return np.array(audio.astype(mx.float32), dtype=np.float32).reshape(-1)


class MLXAudioTTS(TTSEngine):
    name = "mlx-audio"
    devices = ("mlx",)
    extra = "mlx"
    suggested_on = ("mlx",)

    def __init__(self, settings, device: str = "mlx"):
        super().__init__(settings, device)
        self._model = None
        self._mx = None
        self.model_type = ""
        self.model_path: Path | None = None
        self._voice: str | None = None
        self._lang = ""

    # ------------------------------------------------------------------ loading

    def model_folder(self) -> Path:
        ref = self.settings.model
        if ref and looks_like_repo_id(ref):
            return resolve_model(mlx_repo_for(ref, int(getattr(self.settings, "bits", 0))), "tts")
        return resolve_model(ref, "tts")

    def load(self) -> None:
        mx = self.require("mlx.core", "mlx")
        tts_utils = self.require("mlx_audio.tts.utils", "mlx-audio")
        folder = self.model_folder()
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelLoadError(
                f"{folder} has no readable config.json ({exc}): is it an mlx-audio model folder?"
            ) from exc
        self.model_type = str(config.get("model_type", "")).lower()
        self._choose_voice(folder)
        try:
            with mlx_lock("tts"):
                model = tts_utils.load_model(folder)
        except (OSError, ValueError, KeyError, TypeError, ImportError) as exc:
            raise ModelLoadError(
                f"mlx-audio could not load {folder.name} "
                f"({str(exc).splitlines()[0][:200] if str(exc) else repr(exc)}):"
                " the download may be incomplete; verify it in Models…"
            ) from exc
        self._model, self._mx, self.model_path = model, mx, folder
        self.sample_rate = int(getattr(model, "sample_rate", 24000))
        self.loaded = True

    def _choose_voice(self, folder: Path) -> None:
        voice = self.settings.voice.strip()
        if self.model_type == "kokoro":
            self._lang = kokoro_lang_code(self.settings.language)
            require_english_g2p(self.name, self._lang, "mlx")
            # a voice as a local file path: mlx-audio would download a voice given by name
            name = (voice or KOKORO_DEFAULT_VOICES[self._lang]).removesuffix(".safetensors")
            path = folder / "voices" / f"{name}.safetensors"
            if not path.is_file():
                names = ", ".join(p.stem for p in sorted((folder / "voices").glob("*.safetensors")))
                raise ModelNotFound(
                    f"Kokoro voice '{name}' is not in {folder / 'voices'}: set "
                    f"tts.voice to one of: {names or 'none (download voices)'}"
                )
            self._voice = str(path)
        elif self.model_type == "qwen3_tts":
            lang = self.settings.language.strip().lower()
            self._lang = QWEN_LANGUAGES.get(lang, lang)
            self._voice = voice or None
        else:
            self._lang = self.settings.language.strip() or "a"
            self._voice = voice or None

    def warmup(self) -> None:
        for _ in self.synthesize("Hello.", None, 1.0):
            pass

    def unload(self) -> None:
        with mlx_lock("tts"):
            self._model = None
        super().unload()

    # ------------------------------------------------------------------ synthesis

    def _segments(self, piece: str, speed: float):
        kwargs = {"voice": self._voice, "speed": speed, "lang_code": self._lang}
        if self.model_type == "qwen3_tts":
            kwargs["stream"] = True  # audio every couple of seconds instead of at the end
        return self._model.generate(piece, **kwargs)

    def synthesize(
        self, text: str, stop: threading.Event | None, speed: float
    ) -> Iterator[np.ndarray]:
        if self._model is None:
            self.load()
        speed = float(speed or 1.0)
        for piece in speech_pieces(text):
            if stop is not None and stop.is_set():
                return
            with mlx_lock("tts"):
                segments = self._segments(piece, speed)
            try:
                while True:
                    with mlx_lock("tts"):  # one segment at a time: the LLM runs in between
                        result = next(segments, None)
                        audio = None if result is None else _to_numpy(self._mx, result.audio)
                    if result is None:
                        break
                    if audio.size:
                        yield np.clip(audio, -1.0, 1.0, out=audio)
                    if stop is not None and stop.is_set():
                        return
            finally:
                with mlx_lock("tts"):
                    segments.close()
