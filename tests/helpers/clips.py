"""Audio clips for tests, as the engines take them: float32, 16 kHz, mono.
(Spoken questions come from the `speech` fixture in conftest.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from s2s_desktop.audio_format import SAMPLE_RATE


def read_wav(path: Path) -> np.ndarray:
    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    assert rate == SAMPLE_RATE, f"{path} is {rate} Hz"
    return audio.mean(axis=1)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32)


def white_noise(seconds: float, rms: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(int(seconds * SAMPLE_RATE)) * rms).astype(np.float32)
