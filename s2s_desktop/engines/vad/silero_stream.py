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
        probs = np.empty(n, dtype=np.float32)
        for i in range(n):
            window = self._pending[i * WINDOW : (i + 1) * WINDOW]
            x = np.concatenate([self._context, window])[None]
            out, self._h, self._c = self.session.run(None, {"input": x, "h": self._h, "c": self._c})
            probs[i] = float(np.asarray(out).reshape(-1)[0])
            self._context = window[-CONTEXT:]
        self._pending = self._pending[n * WINDOW :]
        return probs
