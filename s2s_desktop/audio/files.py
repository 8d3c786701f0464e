"""Reading recordings from files (any rate/channels → 16 kHz mono float32) and writing WAVs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..audio_format import SAMPLE_DTYPE, SAMPLE_RATE, WAV_SUBTYPE
from ..errors import AudioInputError


def to_mono_16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    if sample_rate != SAMPLE_RATE and audio.size:
        import soxr

        audio = soxr.resample(audio, sample_rate, SAMPLE_RATE, quality="HQ")
    return np.ascontiguousarray(audio, dtype=np.float32)


def read_audio(path: str | Path) -> np.ndarray:
    """A WAV/FLAC/OGG (or anything libsndfile reads) as 16 kHz mono float32."""
    import soundfile as sf

    path = Path(path)
    if not path.exists():
        raise AudioInputError(f"input file not found: {path}")
    if path.is_dir():
        raise AudioInputError(f"input is a folder, not an audio file: {path}")
    try:
        audio, rate = sf.read(str(path), dtype=SAMPLE_DTYPE, always_2d=False)
    except (sf.LibsndfileError, RuntimeError, TypeError) as exc:
        raise AudioInputError(
            f"cannot read {path} as audio ({exc}): use a WAV, FLAC or OGG file"
        ) from None
    return to_mono_16k(audio, rate)


def write_wav(path: str | Path, pcm: np.ndarray, sample_rate: int) -> Path:
    import soundfile as sf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    sf.write(str(tmp), np.clip(pcm, -1.0, 1.0), sample_rate, subtype=WAV_SUBTYPE, format="WAV")
    tmp.replace(path)
    return path
