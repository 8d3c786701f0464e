"""Engine contracts shared by every backend.

An engine is built with its stage's settings and a resolved device string ("cpu", "cuda",
"cuda:1", "mps", "mlx"), and keeps only what it loads with. The settings marked
`applies_live` reach it with each call instead (`LLMOptions`, `VADOptions`, `STTOptions`,
the TTS speed), built by the stage from its current section, so a live setting is live by
construction. `load()` is heavy and runs in the stage's thread; `warmup()` runs one tiny
request so the first real press is not slow. Engines never import Qt.
"""

from __future__ import annotations

import functools
import importlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..audio_format import TTS_DEFAULT_RATE
from ..errors import BackendUnavailable, DeviceUnavailable, SettingsError


def require(module: str, backend: str, package: str | None = None, extra: str | None = None):
    """Import an optional package, or raise BackendUnavailable naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailable(backend, package or module, extra) from exc


class ModelOnDisk:
    """A model file or folder as `Engine.recognises` sees it: the file names in it and its
    config.json (read once)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.is_file = self.path.is_file()
        folder = self.path.is_dir()
        self.names = {p.name for p in self.path.iterdir() if p.is_file()} if folder else set()

    def has_suffix(self, suffix: str) -> bool:
        """The file has this suffix, or the folder holds a file with it."""
        if self.is_file:
            return self.path.suffix == suffix
        return any(n.endswith(suffix) for n in self.names)

    def onnx_files(self) -> list[str]:
        """The .onnx file itself, or the .onnx files in the folder."""
        if self.is_file:
            return [self.path.name] if self.path.suffix == ".onnx" else []
        return [n for n in self.names if n.endswith(".onnx")]

    def has_sidecar(self, name: str) -> bool:
        """`name` has its `name.json` beside it (a Piper voice's config)."""
        folder = self.path.parent if self.is_file else self.path
        return (folder / f"{name}.json").is_file()

    def is_transformers_folder(self) -> bool:
        """A folder with config.json and .safetensors weights (transformers' layout)."""
        return "config.json" in self.names and any(n.endswith(".safetensors") for n in self.names)

    @functools.cached_property
    def config(self) -> dict:
        if "config.json" not in self.names:
            return {}
        try:
            data = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def config_says(self, word: str) -> bool:
        """config.json names `word` as its model_type or among its architectures."""
        archs = " ".join(str(a) for a in self.config.get("architectures") or []).lower()
        return str(self.config.get("model_type", "")).lower() == word or word in archs


class TurnOptions:
    """Per-call options: the `applies_live` fields of a stage's settings section that its
    engine reads. Built per call from the current section, never kept by the engine."""

    @classmethod
    def of(cls, section: Any) -> Self:
        """The options as the settings `section` (e.g. `settings.llm`) has them now."""
        return cls(**{f.name: getattr(section, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class VADOptions(TurnOptions):
    threshold: float  # speech probability at which speech starts
    min_speech_ms: int  # shorter speech regions are dropped
    min_silence_ms: int  # a pause this long ends a speech region


@dataclass(frozen=True)
class STTOptions(TurnOptions):
    short_window: bool  # encode a short clip in a window its own size, not Whisper's 30 s
    languages: str = ""  # "languages I speak": detection picks among them, the first usual
    language_threshold: float = 0.5  # a detection less sure keeps the usual language


@dataclass(frozen=True)
class LLMOptions(TurnOptions):
    max_new_tokens: int
    temperature: float  # 0: greedy
    repeat_penalty: float  # > 1: tokens already in the prompt or reply are less likely


# What an engine's warmup asks: one token, greedy (the turn's own options come per call)
WARMUP_LLM = LLMOptions(max_new_tokens=1, temperature=0.0, repeat_penalty=1.0)


class Engine:
    """A backend. Its class declares what the rest of the app knows about it; the registry
    (`registry.py`) names the class, and devices, importer and settings read it from there."""

    name = "engine"
    stage = ""  # "vad", "stt", "llm" or "tts" (set by the stage's base class below)
    # Device kinds it runs on, preferred first; () = it runs no local model (a remote API or
    # the pass-through VAD): any device request is fine and it reports "cpu".
    devices: tuple[str, ...] = ()
    extra: str | None = None  # the pip extra that installs its packages (None: always there)
    # Device kinds on which the stage suggests this backend when the chosen one cannot run there
    suggested_on: tuple[str, ...] = ()
    # Precisions offered in Settings (stt.compute_type, llm.dtype); () = only "auto"
    compute_types: tuple[str, ...] = ()
    quant_note = ""  # how it picks its quantization, shown in Settings
    # Lower first: a layout that would also match a more specific one is tried after it
    recognise_order = 0

    @classmethod
    def recognises(cls, model: ModelOnDisk) -> bool:
        """The file or folder holds a model in a format this backend runs."""
        return False

    def __init__(self, settings: Any, device: str = "cpu"):
        if self.devices == ("mlx",) and device != "mlx":
            from .registry import alternative  # the registry imports every engine module

            alt = alternative(self.stage, device.partition(":")[0]) or "another backend"
            raise DeviceUnavailable(
                f"backend '{self.name}' runs only on mlx, not {device}: choose {alt} for this "
                "device"
            )
        self.settings = settings
        self.device = device
        self.loaded = False

    def require(self, module: str, package: str | None = None):
        """Import one of this backend's optional packages, or raise BackendUnavailable naming
        its pip extra."""
        return require(module, self.name, package, self.extra)

    def load(self) -> None:
        raise NotImplementedError

    def warmup(self) -> None:
        """Optional: run a tiny request so caches and kernels are ready."""

    def unload(self) -> None:
        self.loaded = False

    def describe(self) -> str:
        return f"{self.name} on {self.device}"


@dataclass
class SpeechSegment:
    start: int  # sample index, inclusive
    end: int  # sample index, exclusive


class VADEngine(Engine):
    stage = "vad"

    def speech(self, audio: np.ndarray, options: VADOptions) -> list[SpeechSegment]:
        """Speech regions of 16 kHz mono float32 audio; empty list ⇒ no speech."""
        raise NotImplementedError


@dataclass
class STTResult:
    text: str
    language: str | None = None
    # how sure the recognizer was of `language`; None: fixed by the settings, not detected
    language_probability: float | None = None


def language_code(language: str | None) -> str:
    """A `stt.language` as a bare lower-case code: "en-US" / "en_us" → "en", None → ""."""
    return (language or "").strip().lower().replace("_", "-").partition("-")[0]


class STTEngine(Engine):
    stage = "stt"

    def transcribe(self, audio: np.ndarray, language: str | None,
                   options: STTOptions) -> STTResult:
        """The text of 16 kHz mono float32 speech; `language` None or "" ⇒ detect it."""
        raise NotImplementedError

    def english_only(self, language: str | None) -> str:
        """"en" for a model that knows English only, or SettingsError when another language is
        asked of it: it would turn that speech into confident English-sounding nonsense."""
        lang = language_code(language)
        if lang and lang != "en":
            raise SettingsError(
                f"stt.language: this {self.name} model knows English only, not '{lang}': set "
                "stt.language to en or leave it empty, or choose a multilingual model (Models…)"
            )
        return "en"


class LLMEngine(Engine):
    stage = "llm"
    # OpenAI function-tool schemas the next prompts list (empty: none). The LLM stage sets
    # it; the same list turn after turn keeps the cached prompt prefix valid.
    offered_tools: list[dict] = []  # assigned whole, never changed in place
    # True: tool calls come as text in the model's own format (<tool_call>…), which
    # engines/llm/tool_calls.py reads; False: `stream` yields ToolCall records itself
    tool_calls_in_text = True

    def can_call_tools(self) -> bool:
        """The loaded model writes tool calls (its chat template lists tools). Where it does
        not, no tools are offered and turns run as plain chat."""
        return False

    def stream(self, messages: list[dict], stop: threading.Event,
               options: LLMOptions) -> Iterator[str]:
        """Yield text deltas of the assistant's reply to chat `messages`
        ([{"role": "system"|"user"|"assistant", "content": str}, ...]).
        Must return at the next token once `stop` is set, and after `options.max_new_tokens`.
        `last_stats["prompt_tokens_evaluated"]`: prompt tokens it had to evaluate (not cached)."""
        raise NotImplementedError

    def prime(self, messages: list[dict], should_stop: Callable[[], bool],
              question: str = "") -> int:
        """Between turns: evaluate the next prompt's known start (`messages`: the system prompt
        and history; `question`: the next question's first words, while it is still spoken)
        into the prompt cache, giving up soon after `should_stop()` turns true. Returns the
        tokens evaluated; 0 where there is no cache."""
        return 0

    def set_threads(self, threads: int) -> None:
        """Use `threads` CPU threads from the next token on (0: as many as it was loaded with).
        Engines that cannot change it ignore this."""


class TTSEngine(Engine):
    stage = "tts"
    sample_rate: int = TTS_DEFAULT_RATE

    def synthesize(self, text: str, stop: threading.Event | None,
                   speed: float) -> Iterator[np.ndarray]:
        """Yield mono float32 PCM chunks (range -1..1) at `self.sample_rate` as they are made,
        spoken at `speed` (1.0: the voice's own pace; 2.0: twice as fast)."""
        raise NotImplementedError
