"""Whisper on PyTorch through transformers (extra "torch"): any Whisper checkpoint saved as
safetensors, on cpu, cuda or mps. Pickle weights (`pytorch_model.bin`) are refused: they can run
code when loaded."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ...audio_format import SAMPLE_RATE
from ...errors import (
    DeviceUnavailable,
    ModelLoadError,
    ModelNotFound,
    SettingsError,
    UnsafeModelFormat,
)
from ...models.resolve import resolve_model
from ..base import STTEngine, STTOptions, STTResult
from .faster_whisper import VERIFY_HINT, split_device, split_windows, token_budget

log = logging.getLogger(__name__)

FLOAT_TYPES = ("float16", "bfloat16", "float32")
PROMPT_TOKENS = 4  # <|startoftranscript|> <|lang|> <|transcribe|> <|notimestamps|>


def checkpoint_folder(ref: str) -> Path:
    """The transformers checkpoint folder for `ref`, with safetensors weights in it."""
    path = resolve_model(ref, "stt")
    if path.is_file():
        path = path.parent
    if any(path.glob("*.safetensors")):
        return path
    pickles = [p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt")]
    if pickles:
        raise UnsafeModelFormat(
            f"the Whisper model at {path} has only pickle weights ({', '.join(sorted(pickles))}), "
            "which can run code when loaded: use a copy saved as safetensors (model.safetensors)"
        )
    raise ModelNotFound(
        f"no Whisper weights (model.safetensors) in {path}: point stt.model at a transformers "
        "Whisper folder, or use stt.backend=faster-whisper for a CTranslate2 model"
    )


class TransformersWhisperSTT(STTEngine):
    name = "transformers"
    devices = ("cuda", "mps", "cpu")
    extra = "torch"
    suggested_on = ("mps",)
    compute_types = ("auto", "float16", "bfloat16", "float32")
    recognise_order = 2  # after MLX Whisper's config.json + weights.safetensors

    @classmethod
    def recognises(cls, model) -> bool:
        return model.is_transformers_folder() and model.config_says("whisper")

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.model = None
        self.processor = None
        self._torch = None
        self._dtype = None
        self._id_to_lang: dict[int, str] = {}

    # ------------------------------------------------------------------ loading

    def _torch_device(self, torch) -> str:
        base, index = split_device(self.device)
        if base == "cpu":
            return "cpu"
        if base == "cuda":
            if not torch.cuda.is_available() or torch.cuda.device_count() <= index:
                raise DeviceUnavailable(
                    f"torch sees no CUDA device {index} (no NVIDIA GPU, or a CPU-only torch "
                    "build): set stt.device=cpu"
                )
            return f"cuda:{index}"
        if base == "mps":
            if not torch.backends.mps.is_available():
                raise DeviceUnavailable(
                    "torch cannot use the Apple GPU (mps) here: set stt.device=cpu"
                )
            return "mps"
        raise DeviceUnavailable(
            f"the transformers backend runs on cpu, cuda or mps, not {base}: "
            "set stt.device=cpu, or stt.backend=mlx-whisper for MLX"
        )

    def _pick_dtype(self, torch, device: str):
        wanted = self.settings.compute_type or "auto"
        if wanted in FLOAT_TYPES:
            return getattr(torch, wanted)
        if wanted != "auto":  # int8 etc. belong to CTranslate2; not an error worth stopping for
            log.info("stt.compute_type=%s has no meaning for transformers; using auto", wanted)
        return torch.float16 if device.startswith("cuda") else torch.float32

    def load(self) -> None:
        torch = self.require("torch", "torch")
        transformers = self.require("transformers", "transformers")
        path = checkpoint_folder(self.settings.model)
        device = self._torch_device(torch)
        dtype = self._pick_dtype(torch, device)
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
        dtype_key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
        t0 = time.perf_counter()
        try:
            processor = transformers.WhisperProcessor.from_pretrained(
                str(path), local_files_only=True
            )
            model = transformers.WhisperForConditionalGeneration.from_pretrained(
                str(path),
                use_safetensors=True,  # never fall back to unpickling a .bin
                local_files_only=True,
                **{dtype_key: dtype},
            )
            model.to(device).eval()
        except Exception as exc:  # OSError, ValueError, safetensors' SafetensorError, ...
            first = (str(exc).splitlines() or [""])[0]
            raise ModelLoadError(
                f"cannot load the Whisper model at {path} ({type(exc).__name__}: {first}): it may "
                f"be corrupt or incomplete; {VERIFY_HINT}"
            ) from exc
        gen = model.generation_config
        lang_to_id = getattr(gen, "lang_to_id", None) or {}
        self._id_to_lang = {i: tok.strip("<|>") for tok, i in lang_to_id.items()}
        self.model, self.processor, self._torch, self._dtype = model, processor, torch, dtype
        log.info(
            "transformers Whisper %s loaded in %.2f s on %s (%s)",
            path,
            time.perf_counter() - t0,
            device,
            dtype,
        )
        self.loaded = True

    def warmup(self) -> None:
        if self.model is None:
            self.load()
        noise = np.random.default_rng(0).standard_normal(SAMPLE_RATE // 2).astype(np.float32)
        self._generate(noise * 1e-3, None, max_new_tokens=4)

    def unload(self) -> None:
        self.model = self.processor = None
        super().unload()

    def describe(self) -> str:
        return f"{self.name} Whisper on {self.device}"

    # ------------------------------------------------------------------ transcription

    @property
    def multilingual(self) -> bool:
        # English-only (.en) checkpoints say is_multilingual=false; older configs only list
        # their language tokens.
        declared = getattr(self.model.generation_config, "is_multilingual", None)
        return bool(self._id_to_lang) and declared is not False

    def _language_for(self, features, language: str | None) -> str | None:
        """The language to decode in: the one asked for (checked), else detected."""
        if language:
            language = language.lower()
            if f"<|{language}|>" not in self.model.generation_config.lang_to_id:
                raise SettingsError(
                    f"stt.language: '{language}' is not a language this Whisper model knows: "
                    "use a code such as en, fr, de, or leave it empty to detect the language"
                )
            return language
        lang_id = int(self.model.detect_language(input_features=features)[0])
        return self._id_to_lang.get(lang_id)

    def _generate(self, audio: np.ndarray, language: str | None, max_new_tokens: int) -> STTResult:
        """Decode each window of `audio` (<= 30 s, short-form) and join the texts. Own windows
        rather than transformers' long-form mode: its seeking follows predicted timestamps and
        can crawl through a clip when the model is unsure."""
        torch = self._torch
        fe = self.processor.feature_extractor
        # Bound the decode through max_length (the prompt tokens + the budget): passing
        # max_new_tokens beside the checkpoint's own max_length logs a warning on every call.
        limit = min(self.model.config.max_target_positions, PROMPT_TOKENS + max_new_tokens)
        kwargs: dict = {
            "max_length": limit,
            "num_beams": max(1, int(self.settings.beam_size)),
            "do_sample": False,
        }
        found = None if self.multilingual else "en"  # English-only checkpoints (.en)
        texts = []
        with torch.inference_mode():
            for window in split_windows(audio):
                feats = fe(window, sampling_rate=SAMPLE_RATE, return_tensors="pt")
                feats = feats["input_features"].to(self.model.device, self._dtype)
                if self.multilingual:
                    if found is None:  # detect on the first window, keep it for the rest
                        found = self._language_for(feats, language)
                    kwargs.update(language=found, task="transcribe")
                out = self.model.generate(input_features=feats, **kwargs)
                ids = out if torch.is_tensor(out) else out["sequences"]
                texts.append(self.processor.batch_decode(ids, skip_special_tokens=True)[0].strip())
        return STTResult(" ".join(t for t in texts if t), found)

    def transcribe(self, audio: np.ndarray, language: str | None,
                   options: STTOptions) -> STTResult:
        if self.model is None:
            self.load()
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        if audio.size == 0:
            return STTResult("")
        lang = language or None
        if not self.multilingual:
            self.english_only(lang)
        return self._generate(audio, lang, token_budget(audio.size))
