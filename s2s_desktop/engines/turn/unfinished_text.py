"""A second opinion on the end of a turn, from its words: a transcript whose last word cannot
end an English sentence ("What is the capital of") is unfinished, whatever the voice sounds
like. Smart Turn judges prosody; on synthetic voices it called most mid-sentence cuts finished
(docs/hands-free.md), and a speaker may drop their pitch before a pause too. And a
"yeah" or "mm-hm" said over the app's reply is a backchannel, not a barge-in."""

from __future__ import annotations

import re

# words after which an English sentence goes on: articles, prepositions, conjunctions,
# possessives, hesitations
CONTINUES = frozenset(
    """a an the of to in on at for with from by about into onto over under between through
    during before after than as and or but nor if because so although though while whereas
    unless until whether my your his her our their its this these those some any every each
    no which whose whom um uh er erm like""".split()
)
_WORD = re.compile(r"[a-z']+")


def ends_unfinished(text: str) -> bool:
    """The transcript stops where an English sentence cannot (or trails off with '...')."""
    text = text.strip().lower()
    if not text:
        return False
    if text.endswith(("...", "…", ",", "-")):
        return True
    words = _WORD.findall(text)
    return bool(words) and words[-1] in CONTINUES


# what a listener says to show they follow, not to take the turn ("yeah", "mm-hm", "okay");
# Whisper writes a hum as "Mm-hmm", "Mhm", "Hmm" or "Uh-huh"
BACKCHANNEL = frozenset(
    """yeah yes yep yup ya ok okay right sure alright all good cool nice great wow oh ah aha
    uh um huh hm i see got it true exactly indeed""".split()
)
_HUM = re.compile(r"^(m+h*m+|h+m+|mhm+|mm+hm+|uh+huh+|uhuh|uhhuh)$")


def is_backchannel(text: str) -> bool:
    """Only backchannel words (or nothing a recognizer could read): not a turn of its own."""
    words = [w for w in _WORD.findall(text.lower().replace("-", "")) if w not in ("'",)]
    return all(w in BACKCHANNEL or _HUM.match(w) for w in words)
