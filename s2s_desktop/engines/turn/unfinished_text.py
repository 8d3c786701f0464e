"""A second opinion on the end of a turn, from its words: a transcript whose last word cannot
end an English sentence ("What is the capital of") is unfinished, whatever the voice sounds
like. Smart Turn judges prosody; on synthetic voices it called most mid-sentence cuts finished
(docs/hands-free.md), and a speaker may drop their pitch before a pause too."""

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
