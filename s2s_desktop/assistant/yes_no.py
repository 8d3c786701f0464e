"""A spoken answer to the app's yes/no question before a writing tool ("Shall I save the note
'buy milk'?"): the transcript → YES, NO or UNCLEAR. Pure: no Qt, no audio.

The whole transcript must be made of the answer phrases in resources/intents/en.json
("permission": yes, no, fillers), so "don't do it" is a no although it holds "do it", and
a question or a sentence about something else is unclear, never a yes. Yes and no together
("yes, no, wait") are unclear too: the app asks once more, and a second unclear answer is a no.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache

from .intents import intent_data, normalize


class Answer(StrEnum):
    YES = "yes"
    NO = "no"
    UNCLEAR = "unclear"


@lru_cache(maxsize=4)
def _phrases(language: str = "en") -> tuple[re.Pattern, dict[str, str]]:
    data = intent_data(language)["permission"]
    kind = {normalize(p): "filler" for p in data["fillers"]}
    kind.update({normalize(p): "yes" for p in data["yes"]})
    kind.update({normalize(p): "no" for p in data["no"]})
    # longest first: "don't do it" is read before "don't" and "do it"
    words = "|".join(re.escape(p) for p in sorted(kind, key=len, reverse=True))
    return re.compile(rf"\s*({words})(?=\s|$)"), kind


def classify(text: str, language: str = "en") -> Answer:
    """YES or NO when the transcript is only answer phrases of one kind (fillers allowed)."""
    pattern, kind = _phrases(language)
    said, pos, seen = normalize(text), 0, set()
    while pos < len(said):
        found = pattern.match(said, pos)
        if found is None:
            return Answer.UNCLEAR  # a word that is no answer: never guessed as a yes
        seen.add(kind[found.group(1)])
        pos = found.end()
    seen.discard("filler")
    if seen == {"yes"}:
        return Answer.YES
    if seen == {"no"}:
        return Answer.NO
    return Answer.UNCLEAR
