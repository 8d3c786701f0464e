"""No VAD: the whole clip is speech unless it is digital silence (a muted or dead microphone),
so an empty press still ends with "no speech" instead of a Whisper hallucination."""

from __future__ import annotations

import numpy as np

from ..base import SpeechSegment, VADEngine, VADOptions

# Below one 16-bit step (1/32768) twice over: nothing a microphone could have recorded.
DIGITAL_SILENCE = 2.0 / 32768


class PassthroughVAD(VADEngine):
    name = "none"

    def load(self) -> None:
        self.loaded = True

    def describe(self) -> str:
        return "no VAD (whole clip)"

    def speech(self, audio: np.ndarray, options: VADOptions) -> list[SpeechSegment]:
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        if len(audio) == 0 or float(np.max(np.abs(audio))) <= DIGITAL_SILENCE:
            return []
        return [SpeechSegment(0, len(audio))]
