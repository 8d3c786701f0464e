"""The worker base: a QThread that reads its inbox and writes the next worker's inbox.

A worker is `process(msg)`, a generator of messages for the outbox. Stale turns are dropped
on the one field every message has; a failure ends the turn with a clear message and the
worker lives on. Stages that own a model build on it (stage.py); the player is a plain one.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator

from PySide6.QtCore import QThread

from ..errors import S2SError
from ..states import TurnReason
from .events import PipelineEvents
from .messages import STOP, Message, TurnEnded
from .turns import TurnBook, TurnClock

log = logging.getLogger(__name__)


class Inbox(queue.Queue):
    """A Queue that can be peeked: a worker asks what waits behind the message it works on."""

    def waiting(self, matches: Callable[[object], bool]) -> bool:
        with self.mutex:
            return any(matches(m) for m in self.queue)


class Worker(QThread):
    name = "worker"

    def __init__(self, settings, clock: TurnClock, book: TurnBook, events: PipelineEvents,
                 outbox: Inbox | None):
        super().__init__()
        self.setObjectName(f"s2s-{self.name}")
        self.settings = settings  # the whole Settings tree; a stage reads its own section
        self.clock, self.book, self.events = clock, book, events
        self.inbox = Inbox()
        self.outbox = outbox
        self.load_error = ""  # why the worker cannot work ("" when it can)
        self.ready = threading.Event()  # set once the worker can take turns
        self.ready.set()

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> None:
        self.started_up()
        while True:
            msg = self.inbox.get()
            if msg is STOP:
                break
            try:
                self._take(msg)
            finally:
                self.inbox.task_done()
        self.stopped()

    def started_up(self) -> None:
        """First thing in the worker's thread (an engine stage loads its model here)."""

    def stopped(self) -> None:
        """Last thing in the worker's thread."""

    def wait_idle(self) -> None:
        """Block until every message put so far is handled (idle-time priming included)."""
        self.inbox.join()

    def _take(self, msg: Message) -> None:
        if self.control(msg) or self.clock.is_stale(msg.turn):
            return
        if isinstance(msg, TurnEnded):
            self.pass_on(msg)
        else:
            self.handle(msg)

    def control(self, msg: Message) -> bool:
        """Handle a message that is not part of a turn; True when it was one."""
        return False

    def handle(self, msg: Message) -> None:
        try:
            for out in self.process(msg):
                if self.clock.is_stale(msg.turn):
                    return
                self.pass_on(out)
        except S2SError as exc:
            self.fail(msg.turn, str(exc))
        except Exception as exc:
            log.exception("%s failed on turn %s", self.name, msg.turn)
            self.fail(msg.turn, f"{self.name} failed: {type(exc).__name__}: {exc}")

    def process(self, msg: Message) -> Iterator[Message]:
        raise NotImplementedError

    def pass_on(self, msg: Message) -> None:
        if self.outbox is not None:
            self.outbox.put(msg)

    def fail(self, turn: int, message: str) -> None:
        self.events.error.emit(self.name, message)
        self.pass_on(TurnEnded(turn, reason=TurnReason.ERROR, error=message))
