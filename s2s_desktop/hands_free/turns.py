"""The adapter between hands-free listening and the pipeline: a turn the listener opens
becomes a live pipeline turn (begin_turn, which barges in on a running reply; its audio
fed as it is heard, so speech-to-text runs while the user speaks), its end is the turn's
release (end_turn). The app's controller decides each turn itself (transitions.py) and uses
`begin` / `finish` to route the heard audio; `on_event` does it all for tests and the echo
rig. Qt-free; `on_event` is called on the listener's thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from .listener import HandsFreeEvent, HandsFreeEventKind

log = logging.getLogger(__name__)

SOURCE = "hands-free"
OPENS = (HandsFreeEventKind.SPEECH_STARTED, HandsFreeEventKind.BARGE_IN)
ENDS_MODE = (HandsFreeEventKind.TIMED_OUT, HandsFreeEventKind.STOPPED)


class HandsFreeTurns:
    def __init__(self, pipeline, listener, on_mode_ended: Callable[[HandsFreeEvent], None],
                 on_notice: Callable[[str], None] | None = None):
        self.pipeline = pipeline  # begin_turn / feed / end_turn, as Pipeline has them
        self.on_mode_ended = on_mode_ended
        self.on_notice = on_notice
        self.turn: int | None = None
        self.turns: list[int] = []  # every turn it started, in order
        self._early: list[np.ndarray] = []  # audio heard before its turn's id existed
        self._lock = threading.Lock()
        listener.on_speech_audio = self._heard
        listener.on_pause = self._paused

    def _heard(self, pcm: np.ndarray) -> None:
        with self._lock:
            if self.turn is None:
                self._early.append(pcm)
                return
            turn = self.turn
        self.pipeline.feed(turn, pcm)

    def _paused(self) -> None:
        """The user paused and the end-of-turn model is asked: STT starts on the speech so
        far (the pipeline's key_up), so the turn, if it ends here, reuses that transcript."""
        with self._lock:
            turn = self.turn
        if turn is not None:
            self.pipeline.key_up(turn)

    def begin(self, turn: int) -> None:
        """`turn` (begun in the pipeline) gets the speech heard so far, and all that follows."""
        with self._lock:
            self.turn, early, self._early = turn, self._early, []
        self.turns.append(turn)
        for pcm in early:
            self.pipeline.feed(turn, pcm)

    def finish(self) -> int | None:
        """The turn being fed, no longer fed (None: there was none)."""
        with self._lock:
            turn, self.turn, self._early = self.turn, None, []
        return turn

    def on_event(self, event: HandsFreeEvent) -> None:
        """Without the app's state machine (tests, the rig): each event to the pipeline."""
        kind = event.kind
        if kind in OPENS:
            self.begin(self.pipeline.begin_turn(source=SOURCE))  # stops a running reply
        elif kind is HandsFreeEventKind.TURN_ENDED or kind in ENDS_MODE:
            turn = self.finish()
            if turn is not None:
                self.pipeline.end_turn(turn, released_at=event.decided_at)
            if kind in ENDS_MODE:
                self.on_mode_ended(event)
        elif kind is HandsFreeEventKind.NOTICE and self.on_notice is not None:
            self.on_notice(event.message)
