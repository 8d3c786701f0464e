"""Player stage: hands SpeechChunks to the audio sink and closes each turn.

A plain worker: it owns no engine. Playback and flush share one lock, so once `flush()`
returns no audio of a stale turn can reach the output. A closed turn keeps, as spoken, the
text whose audio the sink played (heard.py), and goes upstream as a TurnClosed message that
the pipeline routes."""

from __future__ import annotations

import threading

from ..audio.sink import AudioSink
from ..errors import AudioDeviceError
from ..states import TurnReason
from .heard import HandedSentence, heard_pieces
from .messages import ReplyDone, SpeechChunk, TurnClosed, TurnEnded
from .worker import Worker


class PlayerStage(Worker):
    name = "player"

    def __init__(self, *args, sink: AudioSink, **kwargs):
        super().__init__(*args, **kwargs)
        self.sink = sink
        self._lock = threading.Lock()
        self._output_lost: dict[int, str] = {}  # turn -> why its audio could not be played
        self._handed: dict[int, dict[int, HandedSentence]] = {}  # turn -> sentence -> audio
        self._hushed: set[int] = set()  # turns whose audio is dropped for now (hush)

    def process(self, msg):
        if isinstance(msg, SpeechChunk):
            with self._lock:
                if (self.clock.is_stale(msg.turn) or msg.turn in self._output_lost
                        or msg.turn in self._hushed):
                    return
                try:
                    self.sink.play(msg.pcm, msg.sample_rate, msg.turn, msg.sentence)
                except AudioDeviceError as exc:
                    # the reply goes on as text; the next turn tries the output again
                    self._output_lost[msg.turn] = str(exc)
                    self.events.error.emit(self.name, str(exc))
                    return
                if msg.sentence >= 0 and msg.text:  # a piece of the reply (not a chime)
                    said = self._handed.setdefault(msg.turn, {}).setdefault(
                        msg.sentence, HandedSentence(msg.text))
                    said.seconds += len(msg.pcm) / msg.sample_rate
            rec = self.book.get(msg.turn)
            if rec is not None and "first_audio" not in rec.marks:
                self.book.mark(msg.turn, "first_audio")
                self.events.first_audio.emit(msg.turn)
        elif isinstance(msg, ReplyDone):
            lost = self._output_lost.pop(msg.turn, "")
            if not lost:
                self.sink.drain(msg.turn, self.clock.context(msg.turn).stop)
            if not self.clock.is_stale(msg.turn):
                self.close_turn(msg.turn, TurnReason.OK, lost)
        return
        yield  # a generator that yields nothing downstream

    def pass_on(self, msg) -> None:
        if isinstance(msg, TurnEnded):  # the last stage: a TurnEnded closes the turn here
            self.close_turn(msg.turn, msg.reason, msg.error)
        else:
            super().pass_on(msg)

    def flush(self) -> None:
        with self._lock:
            self.sink.flush()

    def hush(self, turn: int, on: bool) -> None:
        """While on, `turn`'s audio is dropped (what plays stops now), the turn going on."""
        with self._lock:
            if on:
                self._hushed.add(turn)
                self.sink.flush()
            else:
                self._hushed.discard(turn)

    def close_turn(self, turn: int, reason: str, error: str = "") -> None:
        rec = self.book.finish(turn, reason, error)
        with self._lock:
            self._output_lost.pop(turn, None)
            self._hushed.discard(turn)
            handed = self._handed.pop(turn, {})
        played = self.sink.take_played(turn)
        if rec is None:
            return
        self.book.update(turn, spoken=heard_pieces(handed, played))
        self.clock.forget(turn)
        finished = rec.finished_view()
        self.pass_on(TurnClosed(turn, record=finished))  # before the news: the next turn sees it
        self.events.turn_finished.emit(finished)
