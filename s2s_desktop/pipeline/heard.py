"""What of a reply the user heard: the sentences whose audio reached the speaker.

The player notes, per sentence, the seconds of speech it handed to the sink; the sink says how
many of them its device took (`AudioSink.take_played`). A reply stopped mid-way is kept up to
there: whole sentences that were played out, then the words of the sentence that was cut, in
proportion to its audio that was played (speech runs at a roughly even pace of characters).
"""

from __future__ import annotations

from dataclasses import dataclass

PLAYED_OUT = 0.98  # this much of a sentence's audio played counts as all of it (the tail is breath)


@dataclass
class HandedSentence:
    """One sentence of a reply as the player handed it to the sink."""

    text: str
    seconds: float = 0.0  # its audio handed over so far


def words_within(text: str, fraction: float) -> str:
    """The words of `text` that lie wholly within its first `fraction` of characters."""
    n = int(len(text) * fraction)
    if n >= len(text):
        return text.strip()
    if text[n].isspace():  # the cut falls between two words
        return text[:n].strip()
    return text[: max(0, text.rfind(" ", 0, n))].strip()


def heard_pieces(handed: dict[int, HandedSentence], played: dict[int, float] | None) -> list[str]:
    """The pieces of text whose audio was played, in order. `played`: seconds the device took
    per sentence; None when the sink cannot tell (a file, a capture): everything handed over
    counts as heard."""
    out: list[str] = []
    for index in sorted(handed):
        said = handed[index]
        if played is None:
            out.append(said.text)
            continue
        seconds = played.get(index, 0.0)
        if said.seconds <= 0 or seconds <= 0:
            break
        fraction = seconds / said.seconds
        if fraction >= PLAYED_OUT:
            out.append(said.text)
            continue
        part = words_within(said.text, fraction)
        if part:
            out.append(part)
        break  # the reply stopped in this sentence: nothing after it was heard
    return out
