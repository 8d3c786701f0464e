"""Cut a text an engine was given into pieces its model can say one at a time.

The pipeline's chunker already sends one sentence at a time; this is for engines whose model
takes one input per call (VITS, Kokoro on MLX) when they get a long text anyway (the CLI, a
long sentence): synthesising piece by piece bounds the model's input and lets audio start
after the first piece instead of after the whole text.
"""

from __future__ import annotations

import re

MAX_PIECE_CHARS = 200  # ~15 s of speech; longer inputs get slow and VITS drifts

_SENTENCE = re.compile(r".+?(?:[.!?…]+[\"')\]»”’]*(?=\s|$)|$)", re.S)
_CLAUSE = re.compile(r".+?(?:[,;:—–](?=\s)|$)", re.S)


def _fit(parts: list[str], max_chars: int) -> list[str]:
    """Join neighbouring parts while they fit in max_chars."""
    out: list[str] = []
    for part in parts:
        if out and len(out[-1]) + 1 + len(part) <= max_chars:
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def _split_words(text: str, max_chars: int) -> list[str]:
    return _fit(text.split(), max_chars)


def speech_pieces(text: str, max_chars: int = MAX_PIECE_CHARS) -> list[str]:
    """Sentences of `text`; a sentence over max_chars is cut at clauses, then at words.

    Every piece keeps its punctuation (it shapes the prosody) and none is empty."""
    pieces: list[str] = []
    for m in _SENTENCE.finditer(text.strip()):
        sentence = " ".join(m.group(0).split())
        if not sentence:
            continue
        if len(sentence) <= max_chars:
            pieces.append(sentence)
            continue
        clauses = [c.group(0).strip() for c in _CLAUSE.finditer(sentence)]
        for clause in _fit([c for c in clauses if c], max_chars):
            pieces.extend([clause] if len(clause) <= max_chars else _split_words(clause, max_chars))
    return pieces
