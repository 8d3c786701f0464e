"""Engine contracts shared by every backend.

An engine is built with its stage's settings and a resolved device string ("cpu", "cuda",
"cuda:1", "mps", "mlx"). `load()` is heavy and runs in the stage's thread; `warmup()` runs
one tiny request so the first real press is not slow. Engines never import Qt.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BackendUnavailable

SAMPLE_RATE = 16000  # every engine receives 16 kHz mono float32 audio


def require(module: str, backend: str, package: str | None = None, extra: str | None = None):
    """Import an optional package, or raise BackendUnavailable naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailable(backend, package or module, extra) from exc


class Engine:
    name = "engine"

    def __init__(self, settings: Any, device: str = "cpu"):
        self.settings = settings
        self.device = device
        self.loaded = False

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
    def speech(self, audio: np.ndarray) -> list[SpeechSegment]:
        """Speech regions of 16 kHz mono float32 audio; empty list ⇒ no speech."""
        raise NotImplementedError


@dataclass
class STTResult:
    text: str
    language: str | None = None


class STTEngine(Engine):
    def transcribe(self, audio: np.ndarray, language: str | None = None) -> STTResult:
        raise NotImplementedError


class LLMEngine(Engine):
    def stream(self, messages: list[dict], stop: threading.Event) -> Iterator[str]:
        """Yield text deltas of the assistant's reply to chat `messages`
        ([{"role": "system"|"user"|"assistant", "content": str}, ...]).
        Must return at the next token once `stop` is set, and after max_new_tokens."""
        raise NotImplementedError


class TTSEngine(Engine):
    sample_rate: int = 22050

    def synthesize(self, text: str, stop: threading.Event | None = None) -> Iterator[np.ndarray]:
        """Yield mono float32 PCM chunks (range -1..1) at `self.sample_rate` as they are made."""
        raise NotImplementedError
