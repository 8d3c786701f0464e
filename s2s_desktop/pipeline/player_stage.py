"""Player stage: hands SpeechChunks to the audio sink and closes each turn.

A plain worker: it owns no engine. Playback and flush share one lock, so once `flush()`
returns no audio of a stale turn can reach the output."""

from __future__ import annotations

import threading

from ..audio.sink import AudioSink
from ..errors import AudioDeviceError
from ..states import TurnReason
from .messages import ReplyDone, SpeechChunk, TurnEnded
from .worker import Worker


class PlayerStage(Worker):
    name = "player"

    def __init__(self, *args, sink: AudioSink, on_turn_closed=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sink = sink
        self.on_turn_closed = on_turn_closed  # callback(FinishedTurn) before turn_finished
        self._lock = threading.Lock()
        self._output_lost: dict[int, str] = {}  # turn -> why its audio could not be played

    def process(self, msg):
        if isinstance(msg, SpeechChunk):
            with self._lock:
                if self.clock.is_stale(msg.turn) or msg.turn in self._output_lost:
                    return
                try:
                    self.sink.play(msg.pcm, msg.sample_rate, msg.turn)
                except AudioDeviceError as exc:
                    # the reply goes on as text; the next turn tries the output again
                    self._output_lost[msg.turn] = str(exc)
                    self.events.error.emit(self.name, str(exc))
                    return
            if msg.first_of_sentence:
                self.book.add_spoken(msg.turn, msg.text)
            rec = self.book.get(msg.turn)
            if rec is not None and "first_audio" not in rec.marks:
                self.book.mark(msg.turn, "first_audio")
                self.events.first_audio.emit(msg.turn)
        elif isinstance(msg, ReplyDone):
            lost = self._output_lost.pop(msg.turn, "")
            if not lost:
                self.sink.drain(msg.turn, self.clock.stop_event(msg.turn))
            if not self.clock.is_stale(msg.turn):
                self.close_turn(msg.turn, TurnReason.OK, lost)
        return
        yield  # a generator that yields nothing downstream

    def pass_on(self, msg) -> None:
        if isinstance(msg, TurnEnded):  # the last stage: a TurnEnded closes the turn here
            self.close_turn(msg.turn, msg.reason, msg.error)

    def flush(self) -> None:
        with self._lock:
            self.sink.flush()

    def close_turn(self, turn: int, reason: str, error: str = "") -> None:
        rec = self.book.finish(turn, reason, error)
        self._output_lost.pop(turn, None)
        if rec is None:
            return
        self.clock.forget(turn)
        finished = rec.finished_view()
        if self.on_turn_closed is not None:
            self.on_turn_closed(finished)
        self.events.turn_finished.emit(finished)
