"""Messages that flow between stages. Every one carries its turn id and creation time, so
latency is read from the data itself and stale turns are dropped on one field."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..audio_format import SAMPLE_RATE

if TYPE_CHECKING:
    from .turns import FinishedTurn


@dataclass
class Message:
    turn: int
    created: float = field(default_factory=time.monotonic, kw_only=True)


@dataclass
class Utterance(Message):
    """The recording of one press, 16 kHz mono float32. `created` is the key release.
    After the VAD stage: only the speech, and `regions` says where it was in the recording."""

    audio: np.ndarray
    source: str = ""
    regions: tuple[tuple[int, int], ...] = ()


@dataclass
class AudioChunk(Message):
    """Live: a piece of the recording while the key is still held."""

    pcm: np.ndarray


@dataclass
class KeyUp(Message):
    """Live: the key went up, but the release is only final after the release grace (X11
    auto-repeat sends up/down pairs). The speech so far is most likely the whole question."""


@dataclass
class ListenEnd(Message):
    """Live: the key was released (`created` is the release); the recording is complete."""


@dataclass
class Partial(Message):
    """Live: the speech heard so far, for a background transcription while the key is held."""

    audio: np.ndarray
    regions: tuple[tuple[int, int], ...]
    covered: int  # samples of the recording the VAD had seen


MATCH_TOLERANCE = int(0.15 * SAMPLE_RATE)  # region edges this close decode the same


def heard_already(heard: Partial, regions: tuple[tuple[int, int], ...]) -> bool:
    """True when speech in `regions` holds nothing the transcription of `heard` did not."""
    if not heard.regions or len(heard.regions) != len(regions):
        return False
    for (a0, a1), (b0, b1) in zip(heard.regions, regions, strict=True):
        if abs(a0 - b0) > MATCH_TOLERANCE or abs(a1 - b1) > MATCH_TOLERANCE:
            return False
    return regions[-1][1] <= heard.covered + MATCH_TOLERANCE


@dataclass
class Transcript(Message):
    text: str
    language: str | None = None


@dataclass
class Sentence(Message):
    """One speakable piece of the reply, cleaned for speech."""

    text: str
    index: int
    language: str | None = None  # the language it is written in (the voice follows)


@dataclass
class SpeechChunk(Message):
    pcm: np.ndarray  # float32 mono
    sample_rate: int
    sentence: int  # index of the Sentence it speaks
    first_of_sentence: bool = False
    text: str = ""


@dataclass
class ReplyDone(Message):
    """The LLM finished; no more Sentences follow for this turn."""

    text: str


@dataclass
class TurnEnded(Message):
    """The turn ends early: no speech, or a stage failed. Passed through to the player."""

    reason: str
    error: str = ""


@dataclass
class TurnClosed(Message):
    """Upstream, from the player: the turn is over, its reply kept as far as it was heard. The
    pipeline routes it (the conversation keeps the exchange; the LLM evaluates ahead)."""

    record: FinishedTurn


@dataclass
class Reload(Message):
    """Control: reload this stage's engine with new settings (never stale)."""

    settings: object = None


@dataclass
class Prime(Message):
    """Control: between turns, evaluate the next prompt's known part (system prompt and
    history) so the next question starts warm; while the key is held, the question's settled
    words too. Given up when any message comes; one with a question is dropped once stale."""

    question: str = ""


@dataclass
class Unload(Message):
    """Control: free this stage's model (idle); a Reload brings it back (never stale)."""


STOP = object()  # sentinel: the stage thread ends


@dataclass
class HeardAnswer(Message):
    """Control: a spoken yes or no to a tool's question, to transcribe while the turn that
    asked waits (no new turn); `reply` gets the text ("" when it cannot be heard)."""

    audio: np.ndarray
    reply: Callable[[str], None]
