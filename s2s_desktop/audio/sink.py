"""Where the assistant's voice goes. The player hands chunks to a sink; `flush()` silences it
at once (barge-in); `drain()` waits until a turn's audio has been played."""

from __future__ import annotations

import threading
import time

import numpy as np


class AudioSink:
    def play(self, pcm: np.ndarray, sample_rate: int, turn: int) -> None:
        raise NotImplementedError

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

    def play(self, pcm, sample_rate, turn):
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
