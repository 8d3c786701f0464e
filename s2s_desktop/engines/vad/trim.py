"""Keep only the speech of a clip: each VAD region widened by a pad, overlaps merged, joined."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..base import SpeechSegment


def padded_regions(
    segments: Sequence[SpeechSegment], n_samples: int, pad_samples: int
) -> list[SpeechSegment]:
    """Segments widened by `pad_samples` each side, clipped to the clip, overlaps merged."""
    pad = max(0, int(pad_samples))
    out: list[SpeechSegment] = []
    for seg in sorted(segments, key=lambda s: s.start):
        start, end = max(0, seg.start - pad), min(n_samples, seg.end + pad)
        if end <= start:
            continue
        if out and start <= out[-1].end:
            out[-1] = SpeechSegment(out[-1].start, max(out[-1].end, end))
        else:
            out.append(SpeechSegment(start, end))
    return out


def trim(audio: np.ndarray, segments: Sequence[SpeechSegment], pad_samples: int) -> np.ndarray:
    """The speech regions of `audio` with `pad_samples` kept around each, joined in order.
    No segments ⇒ an empty array."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    regions = padded_regions(segments, len(audio), pad_samples)
    if not regions:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate([audio[r.start : r.end] for r in regions])
