"""STT stage: the trimmed recording → a Transcript (empty text ⇒ the turn ends).

Live turns: Partials are transcribed in the background while the key is held (only the
newest waiting one; older ones are skipped), and their settled words (all but the last, which
may still be cut mid-word) go to the LLM to evaluate ahead. At release, when the final speech
regions are the ones the last partial already covered, its text is the transcript (the same
decode of the same speech) and no STT work is left.
"""

from __future__ import annotations

import logging

from ..engines.base import STTOptions, STTResult
from ..states import TurnReason
from .messages import (
    HeardAnswer,
    Partial,
    Prime,
    Transcript,
    TurnEnded,
    Utterance,
    heard_already,
)
from .stage import EngineStage

log = logging.getLogger(__name__)


def same_speech(partial: Partial, final: Utterance) -> bool:
    """True when the final recording holds no speech the partial did not already hear."""
    return heard_already(partial, final.regions)


def settled_words(text: str) -> str:
    """The words of a live transcript the final one most likely starts with: all but the
    last, which the speaker may not have finished."""
    words = text.split()
    return " ".join(words[:-1])


class STTStage(EngineStage):
    name = "stt"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._partial: tuple[Partial, STTResult] | None = None
        # the newest live transcript (turn, samples of its recording it heard, text), read by
        # hands-free listening from its own thread: one tuple, replaced whole
        self.live: tuple[int, int, str] | None = None

    def control(self, msg) -> bool:
        if not isinstance(msg, HeardAnswer):
            return super().control(msg)
        text = ""
        try:  # the turn that asked must not fail with it: an answer not heard is unclear
            if self.engine is not None:
                section = self.section()
                result = self.engine.transcribe(msg.audio, section.language or None,
                                                STTOptions.of(section))
                text = result.text.strip()
        except Exception:
            log.exception("stt: the spoken answer could not be transcribed")
        msg.reply(text)
        return True

    def _newer_waiting(self, turn: int) -> bool:
        return self.inbox.waiting(lambda m: getattr(m, "turn", None) == turn)

    def _final_waiting(self, turn: int) -> bool:
        return self.inbox.waiting(lambda m: isinstance(m, Utterance) and m.turn == turn)

    def process(self, msg):
        section = self.section()
        language, options = section.language or None, STTOptions.of(section)
        if isinstance(msg, Partial):
            if self._newer_waiting(msg.turn):
                return  # the recording grew meanwhile: transcribe the newer one
            result = self.engine.transcribe(msg.audio, language, options)
            self._partial = (msg, result)
            self.live = (msg.turn, msg.covered, result.text.strip())
            self.events.partial_transcript.emit(msg.turn, result.text.strip())
            question = settled_words(result.text)
            if question and not self._final_waiting(msg.turn):  # the key is still down
                yield Prime(msg.turn, question=question)
            return
        assert isinstance(msg, Utterance)
        self.book.mark(msg.turn, "stt_start")
        partial, self._partial = self._partial, None
        self.live = None  # the turn is no longer heard: its words are no one's "so far"
        if (partial is not None and partial[0].turn == msg.turn
                and same_speech(partial[0], msg)):
            text, lang = partial[1].text.strip(), partial[1].language
            self.book.update(msg.turn, stt_reused_partial=True)
        else:
            result = self.engine.transcribe(msg.audio, language, options)
            text, lang = result.text.strip(), result.language
        self.book.mark(msg.turn, "stt_end")
        self.book.update(msg.turn, transcript=text, language=lang)
        self.events.transcript.emit(msg.turn, text)
        if not any(ch.isalnum() for ch in text):
            yield TurnEnded(msg.turn, reason=TurnReason.NO_SPEECH)
            return
        yield Transcript(msg.turn, text=text, language=lang)
