"""Make the app's own short sounds (earcons) into resources/earcons/: listening starts,
listening stops, a turn failed, a tool turn is checking (each at most 150 ms), and the timer
chime.

Sine tones with a smooth (Hann) fade in and out, so no click; 22.05 kHz mono 16-bit WAV.
Run again after changing a tone: `python scripts/make_earcons.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import soundfile as sf

RATE = 22050
OUT = Path(__file__).resolve().parent.parent / "resources" / "earcons"


def tone(freqs: tuple[float, ...], seconds: float, level: float = 0.5) -> np.ndarray:
    """A chord of sines with a Hann envelope (no click at either end)."""
    t = np.arange(int(seconds * RATE)) / RATE
    wave = sum(np.sin(2 * np.pi * f * t) for f in freqs) / len(freqs)
    return (level * wave * np.hanning(len(t))).astype(np.float32)


def glide(f0: float, f1: float, seconds: float, level: float = 0.5) -> np.ndarray:
    """A sine sliding from f0 to f1 Hz."""
    n = int(seconds * RATE)
    freq = np.linspace(f0, f1, n)
    phase = 2 * np.pi * np.cumsum(freq) / RATE
    return (level * np.sin(phase) * np.hanning(n)).astype(np.float32)


def gap(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.float32)


SOUNDS = {
    # rising: "I'm listening"
    "listen-start": lambda: np.concatenate([tone((660,), 0.05), tone((990,), 0.07)]),
    # falling: "got it"
    "listen-stop": lambda: np.concatenate([tone((880,), 0.05), tone((587,), 0.07)]),
    # low, rough: "that failed"
    "error": lambda: glide(330, 220, 0.14, level=0.45),
    # a tool turn begins a call: two soft even taps, "one moment"
    "checking": lambda: np.concatenate([tone((784,), 0.05, 0.35), gap(0.04),
                                        tone((784,), 0.05, 0.35)]),
    # the timer: three bright chimes
    "timer": lambda: np.concatenate(
        [np.concatenate([tone((1047, 1568), 0.18), gap(0.07)]) for _ in range(3)]
    ),
}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in SOUNDS.items():
        pcm = make()
        path = OUT / f"{name}.wav"
        sf.write(str(path), pcm, RATE, subtype="PCM_16")
        print(f"{path.relative_to(OUT.parent.parent)}: {len(pcm) / RATE * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
