"""VAD stage: trims silence from the recording; no speech ⇒ the turn ends, no LLM call."""

from __future__ import annotations

from ..engines.base import SAMPLE_RATE
from ..engines.vad.trim import trim
from .messages import TurnEnded, Utterance
from .stage import Stage


class VADStage(Stage):
    name = "vad"

    def process(self, msg: Utterance):
        self.book.mark(msg.turn, "vad_start")
        segments = self.engine.speech(msg.audio)
        pad = int(self.section().pad_ms * SAMPLE_RATE / 1000)
        self.book.mark(msg.turn, "vad_end")
        if not segments:
            yield TurnEnded(msg.turn, reason="no speech")
            return
        yield Utterance(msg.turn, audio=trim(msg.audio, segments, pad), source=msg.source,
                        created=msg.created)
