"""Silero VAD over a live stream: one speech probability per 32 ms window as audio arrives,
the LSTM state and the 64-sample context carried from window to window (the batch call in
`silero_onnx.py` starts afresh on every clip). Hands-free listening runs it on the echo-cancelled
microphone: ~31 calls a second, each a fraction of a millisecond on one thread."""

from __future__ import annotations

import numpy as np

from .silero_onnx import CONTEXT, WINDOW, SileroOnnxVAD


class SileroStream:
    def __init__(self, vad: SileroOnnxVAD):
        if vad.session is None:
            vad.load()
        self.session = vad.session
        self.reset()

    def reset(self) -> None:
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    def push(self, audio: np.ndarray) -> np.ndarray:
        """Speech probabilities of the whole windows completed by `audio` (16 kHz mono)."""
        self._pending = np.concatenate([self._pending, np.asarray(audio, np.float32).reshape(-1)])
        n = len(self._pending) // WINDOW
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        windows = self._pending[: n * WINDOW].reshape(n, WINDOW)
        context = np.concatenate([self._context[None], windows[:-1, -CONTEXT:]])
        # one run for all the windows this block completed: the export carries the LSTM state
        # from window to window within a run, and (h, c) between runs
        out, self._h, self._c = self.session.run(
            None, {"input": np.concatenate([context, windows], axis=1), "h": self._h, "c": self._c}
        )
        probs = np.asarray(out, dtype=np.float32).reshape(-1)
        self._context = windows[-1, -CONTEXT:].copy()
        self._pending = self._pending[n * WINDOW :]
        return probs
