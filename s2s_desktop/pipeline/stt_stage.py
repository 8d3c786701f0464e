"""STT stage: the trimmed recording → a Transcript (empty text ⇒ the turn ends)."""

from __future__ import annotations

from .messages import Transcript, TurnEnded, Utterance
from .stage import Stage


class STTStage(Stage):
    name = "stt"

    def process(self, msg: Utterance):
        self.book.mark(msg.turn, "stt_start")
        result = self.engine.transcribe(msg.audio, self.section().language or None)
        self.book.mark(msg.turn, "stt_end")
        text = result.text.strip()
        self.book.update(msg.turn, transcript=text, language=result.language)
        self.events.transcript.emit(msg.turn, text)
        if not any(ch.isalnum() for ch in text):
            yield TurnEnded(msg.turn, reason="no speech")
            return
        yield Transcript(msg.turn, text=text, language=result.language)
