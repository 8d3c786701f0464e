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


CONVERSATION = Path(__file__).resolve().parents[1] / "data" / "pyannote"


def speaker_turns() -> tuple[list[tuple[str, np.ndarray]], tuple[str, np.ndarray]]:
    """pyannote's sample conversation (tests/data/pyannote, credited there), as push-to-talk
    would hear it: ([(what one speaker said in a row, its audio)], (the whole transcript, the
    whole 30 s)), cut at the reference transcript's times."""
    audio = read_wav(CONVERSATION / "sample.wav")
    turns: list[list] = []  # [speaker, start s, end s, words]
    for line in (CONVERSATION / "sample.stm").read_text().splitlines():
        _, _, speaker, start, end, text = line.split(None, 5)
        if turns and turns[-1][0] == speaker:
            turns[-1][2], turns[-1][3] = float(end), f"{turns[-1][3]} {text}"
        else:
            turns.append([speaker, float(start), float(end), text])
    clips = [(text, audio[int(start * SAMPLE_RATE):int(end * SAMPLE_RATE)])
             for _, start, end, text in turns]
    return clips, (" ".join(text for text, _ in clips), audio)
