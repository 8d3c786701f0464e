"""Which European language a short reply is in, from its function words (enough to tell an
English answer from the French or German a small model drifts into)."""

from __future__ import annotations

import re

FUNCTION_WORDS = {
    "en": {"the", "is", "a", "an", "of", "and", "in", "to", "it", "you", "are", "on", "for",
           "with", "that", "this", "can", "be", "as", "at", "by", "from", "or", "your", "has",
           "have", "what", "which", "their", "they", "its", "was", "not", "do", "some"},
    "de": {"der", "die", "das", "ist", "ein", "eine", "und", "nicht", "ich", "wir", "sie", "zu",
           "mit", "den", "dem", "von", "auf", "für", "es", "sind", "wird", "können"},
    "fr": {"le", "la", "les", "est", "un", "une", "et", "de", "du", "des", "pas", "je", "nous",
           "vous", "il", "elle", "pour", "que", "qui", "sur", "au", "sont"},
    "es": {"el", "los", "las", "es", "y", "en", "un", "una", "que", "por", "con", "para", "del",
           "se", "no", "son"},
}


def guess_language(text: str) -> str | None:
    """The language whose function words `text` uses most; None when it uses none."""
    words = re.findall(r"\w+", text.lower())
    counts = {lang: sum(w in vocab for w in words) for lang, vocab in FUNCTION_WORDS.items()}
    best = max(counts, key=counts.get)
    return best if counts[best] else None
