"""Where the assistant's voice goes. The player hands chunks to a sink; `flush()` silences it
at once (barge-in); `drain()` waits until a turn's audio has been played; `take_played()`
says how much of each sentence reached the output (a reply stopped mid-way is kept as far as
it was heard)."""

from __future__ import annotations

import threading
import time

import numpy as np


class AudioSink:
    def play(self, pcm: np.ndarray, sample_rate: int, turn: int, sentence: int = -1) -> None:
        """Queue `pcm` of `turn`; `sentence` is the index of the reply's sentence it speaks
        (-1: not part of the reply, e.g. a chime)."""
        raise NotImplementedError

    def take_played(self, turn: int) -> dict[int, float] | None:
        """Seconds of each of the turn's sentences the output has played so far, forgotten
        once taken; None when this sink cannot tell (everything handed over counts)."""
        return None

    def drain(self, turn: int, stop: threading.Event) -> None:
        """Block until the turn's audio has been played, or `stop` is set."""

    def flush(self) -> None:
        """Drop everything queued or playing, now."""

    def close(self) -> None:
        pass


class CaptureSink(AudioSink):
    """Keeps what would be played, per turn, with the time each chunk was handed over."""

    def __init__(self):
        self._lock = threading.Lock()
        self.chunks: dict[int, list[tuple[float, np.ndarray]]] = {}
        self.sample_rates: dict[int, int] = {}
        self.flushes: list[float] = []

    def play(self, pcm, sample_rate, turn, sentence=-1):
        with self._lock:
            self.chunks.setdefault(turn, []).append((time.monotonic(), np.asarray(pcm)))
            self.sample_rates[turn] = sample_rate

    def flush(self):
        with self._lock:
            self.flushes.append(time.monotonic())

    def audio(self, turn: int) -> np.ndarray:
        with self._lock:
            parts = [pcm for _, pcm in self.chunks.get(turn, [])]
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)

    def chunk_times(self, turn: int) -> list[float]:
        with self._lock:
            return [t for t, _ in self.chunks.get(turn, [])]

    def forget(self, turn: int) -> None:
        with self._lock:
            self.chunks.pop(turn, None)
            self.sample_rates.pop(turn, None)
