"""Loop stop for every LLM backend: a reply that starts saying a phrase again ends there.

Small models under greedy decoding fall into loops ("the first place of the town, the first
place of the town, …") or answer every new question with an earlier reply. Both are caught on
word n-grams of the reply as it streams, so the loop is cut before it is spoken.
"""

from __future__ import annotations

import re

PHRASE_WORDS = 6  # a phrase this long said twice is a loop, not style
# a shorter earlier reply said again whole, from the first word, is a copy too ("The answer
# is: Echoflighthouse" for five different questions); "Yes." or "Thank you." may recur
WHOLE_COPY_WORDS = 3
_WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)


def words(text: str) -> list[re.Match]:
    return list(_WORD.finditer(text))


def lowered(found: list[re.Match]) -> list[str]:
    return [m.group(0).lower() for m in found]


def phrases(found: list[re.Match], n: int) -> list[tuple[str, ...]]:
    tokens = lowered(found)
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def repeated_phrase(text: str, n: int = PHRASE_WORDS) -> tuple[str, ...] | None:
    """The first n-word phrase `text` says twice, or None."""
    seen: set[tuple[str, ...]] = set()
    for gram in phrases(words(text), n):
        if gram in seen:
            return gram
        seen.add(gram)
    return None


def share_of_earlier(text: str, earlier: str, n: int = PHRASE_WORDS) -> float:
    """How much of `earlier` (0..1 of its words) `text` says again, in runs of n words (the
    whole of it, for a reply shorter than n words)."""
    old = lowered(words(earlier))
    if not old:
        return 0.0
    n = min(n, len(old))
    new = set(phrases(words(text), n))
    covered: set[int] = set()
    for i in range(len(old) - n + 1):
        if tuple(old[i : i + n]) in new:
            covered.update(range(i, i + n))
    return len(covered) / len(old)


class LoopGuard:
    """Watches a reply as it grows; `cut(text)` says where it should end once it loops.

    Inside the reply: the second time an n-word phrase starts, the reply ends before it.
    Against earlier replies of at least n words: once half of one is said again, the reply
    ends where that repetition began (0 when the reply is a copy from its first word).
    A shorter earlier reply (WHOLE_COPY_WORDS or more) counts once the reply opens with all of
    it: 0.
    """

    def __init__(self, earlier_replies: list[str], n: int = PHRASE_WORDS):
        self.n = n
        self.earlier = [r for r in earlier_replies if len(words(r)) >= n]
        self.short = [lowered(words(r)) for r in earlier_replies
                      if WHOLE_COPY_WORDS <= len(words(r)) < n]
        self._checked = 0  # complete words already looked at

    def cut(self, text: str, final: bool = False) -> int | None:
        """A character offset to end the reply at, or None while it does not loop. Only
        complete words count (the last one may still be growing), unless `final`: the reply
        has ended."""
        found = words(text)
        if not final and found and found[-1].end() == len(text):
            found = found[:-1]
        if len(found) <= self._checked:
            return None
        self._checked = len(found)
        tokens = lowered(found)
        if any(tokens[: len(old)] == old for old in self.short):
            return 0
        n = self.n
        if len(tokens) >= n:
            first: dict[tuple[str, ...], int] = {}
            for i in range(len(tokens) - n + 1):
                gram = tuple(tokens[i : i + n])
                if gram in first:
                    return found[i].start()
                first[gram] = i
        done = text[: found[-1].end()] if found else ""
        for old in self.earlier:
            if share_of_earlier(done, old, n) >= 0.5:
                return self._start_of_copy(found, old)
        return None

    def _start_of_copy(self, found: list[re.Match], old: str) -> int:
        """Where the reply began to say `old` again (its first shared n-word phrase)."""
        n = self.n
        grams = set(phrases(words(old), n))
        tokens = lowered(found)
        for i in range(len(tokens) - n + 1):
            if tuple(tokens[i : i + n]) in grams:
                return found[i].start()
        return 0
