"""Figures the benchmark derives from a finished turn: word error against what was said, the
ideal from the turn's own stage marks, the longest silence inside a reply, summaries."""

from __future__ import annotations

import statistics

# Spans of one turn that run one after the other between key release and first audio (the
# VAD pass, the STT left, the LLM up to its first speakable piece, TTS of that piece): their
# sum is what the turn could not have avoided, so it is never more than the streamed figure.
IDEAL_SPANS = (
    ("vad_start", "vad_end"),
    ("vad_end", "stt_end"),
    ("llm_start", "first_sentence"),
    ("tts_first_start", "tts_first_chunk"),
)
TURN_GROUPS = (("1", 1, 1), ("2-8", 2, 8), ("9+", 9, 10**6))


def stats(values, digits: int = 1) -> dict[str, float | None]:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def words(text: str) -> list[str]:
    """Lower-case words without punctuation ("France?" and "france" are the same word)."""
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edits, reference words): the word-level Levenshtein distance."""
    r, h = words(reference), words(hypothesis)
    row = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, row[0] = row[0], i
        for j in range(1, len(h) + 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
    return row[len(h)], len(r)


def wer(pairs) -> float | None:
    """Word error rate over (spoken text, transcript) pairs: all edits / all spoken words."""
    edits = total = 0
    for ref, hyp in pairs:
        e, n = word_errors(ref, hyp)
        edits, total = edits + e, total + n
    return round(edits / total, 3) if total else None


def ideal_ms(marks: dict[str, float]) -> float | None:
    """The turn's unavoidable compute after release, from its own marks (None if a mark is
    missing, e.g. a turn that ended before speaking)."""
    if not all(a in marks and b in marks for a, b in IDEAL_SPANS):
        return None
    return round(sum(max(0.0, marks[b] - marks[a]) for a, b in IDEAL_SPANS) * 1000.0, 1)


def longest_gap_ms(chunks: list[tuple[float, int]], rate: int) -> float:
    """Longest silence inside a reply played back to back: `chunks` are (time handed to the
    output, samples) in order; a chunk plays when it arrives or when the one before ends."""
    gap, end = 0.0, None
    for handed, n in chunks:
        start = handed if end is None else max(handed, end)
        if end is not None:
            gap = max(gap, start - end)
        end = start + n / rate
    return round(gap * 1000.0, 1)


def by_group(rows: list[dict], key: str) -> dict[str, dict]:
    """Per turn-number group (1, 2-8, 9+): the summary of `key` over the rows' raw values."""
    out = {}
    for name, lo, hi in TURN_GROUPS:
        values = [v for r in rows if lo <= r["turn"] <= hi for v in r[key]]
        if values or name != "9+":
            out[name] = stats(values)
    return out
