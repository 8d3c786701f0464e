"""Silence at the edges of a recording or of synthesized speech."""

from __future__ import annotations

import numpy as np

LEAD_FLOOR = 0.01  # of the chunk's peak (-40 dB): quieter than this before the first sound
LEAD_KEEP_S = 0.01  # kept before the first sound, so a soft onset ("th", "f") is not clipped
FADE_S = 0.005  # a fade-in where the cut lands on a non-zero sample, so it never clicks


def trim_trailing_silence(audio: np.ndarray, rate: int, floor: float = 0.01) -> np.ndarray:
    """The recording up to the end of its last word: 10 ms frames quieter than `floor` RMS at
    the end are cut (a person lets go of the key with the last word)."""
    frame = rate // 100
    n = len(audio) // frame
    if n == 0:
        return audio
    rms = np.sqrt((audio[: n * frame].reshape(n, frame) ** 2).mean(axis=1))
    loud = np.flatnonzero(rms > floor)
    return audio[: (int(loud[-1]) + 1) * frame] if loud.size else audio[:0]


def trim_leading_silence(pcm: np.ndarray, rate: int) -> np.ndarray:
    """Synthesized speech from just before its first sound. Voices start with their own
    silence (piper: 30-260 ms), which a user hears as latency before the first reply."""
    pcm = np.asarray(pcm, dtype=np.float32).reshape(-1)
    peak = float(np.abs(pcm).max()) if pcm.size else 0.0
    if peak == 0.0:
        return pcm
    first = int(np.argmax(np.abs(pcm) > LEAD_FLOOR * peak))
    start = max(0, first - int(LEAD_KEEP_S * rate))
    if start == 0:
        return pcm
    out = pcm[start:].copy()
    fade = min(len(out), int(FADE_S * rate))
    out[:fade] *= np.linspace(0.0, 1.0, fade, endpoint=False, dtype=np.float32)
    return out
