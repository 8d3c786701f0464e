"""The stage base: a QThread that owns one engine, reads its inbox, writes the next inbox.

A stage is small: `make_engine` + a generator `process(msg)`. Stale turns are dropped on the
one field every message has; errors end the turn with a clear message, the stage lives on.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import queue
import sys
import threading
import time
from collections.abc import Iterator

from PySide6.QtCore import QThread

from .. import devices
from ..engines import registry
from ..errors import S2SError
from ..states import StageState
from .events import PipelineEvents
from .messages import STOP, Message, Prime, Reload, TurnEnded, Unload
from .turns import TurnBook, TurnClock

log = logging.getLogger(__name__)


def _trim_heap() -> None:
    """glibc keeps freed memory for reuse; hand it back to the OS (Linux only)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


class Stage(QThread):
    name = "stage"

    def __init__(self, settings, clock: TurnClock, book: TurnBook, events: PipelineEvents,
                 outbox: queue.Queue | None):
        super().__init__()
        self.setObjectName(f"s2s-{self.name}")
        self.settings = settings  # the whole Settings tree; a stage reads its own section
        self.clock, self.book, self.events = clock, book, events
        self.inbox: queue.Queue = queue.Queue()
        self.outbox = outbox
        self.engine = None
        self.load_error = ""
        self.ready = threading.Event()
        self.load_s: float | None = None  # seconds the last load + warmup took

    # -- engine lifecycle ---------------------------------------------------------------
    def section(self):
        return getattr(self.settings, self.name)

    def make_engine(self, device: str):
        return registry.create(self.name, self.section(), device)

    def load_engine(self) -> None:
        self.ready.clear()
        self.events.stage_state.emit(self.name, "loading", self.section().backend)
        if self.engine is not None:
            self.engine.unload()
            self.engine = None
        started = time.monotonic()
        try:
            device = devices.resolve_device(self.name, self.settings)
            # loads and warms up; a GPU failure falls back to CPU with a notice
            self.engine = devices.load_with_fallback(
                self.make_engine, device, lambda text: self.events.notice.emit(text),
                label=f"{self.name} ({self.section().backend})",
            )
            self.load_s = time.monotonic() - started
            self.load_error = ""
            self.events.stage_state.emit(self.name, "ready", self.engine.describe())
        except Exception as exc:  # any failure: the stage stays up and reports it per turn
            self.engine = None
            self.load_error = str(exc) if isinstance(exc, S2SError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, S2SError):
                log.exception("%s failed to load", self.name)
            self.events.stage_state.emit(self.name, "failed", self.load_error)
            self.events.error.emit(self.name, self.load_error)
        finally:
            self.ready.set()

    def unload_engine(self) -> None:
        """Free the model (idle); the next Reload loads it again."""
        if self.engine is None:
            return
        self.engine.unload()
        self.engine = None
        gc.collect()  # the model's memory goes back now, not at some later collection
        _trim_heap()
        self.events.stage_state.emit(self.name, StageState.UNLOADED, "")

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> None:
        self.load_engine()
        while True:
            msg = self.inbox.get()
            if msg is STOP:
                break
            try:
                self._take(msg)
            finally:
                self.inbox.task_done()
        if self.engine is not None:
            self.engine.unload()

    def wait_idle(self) -> None:
        """Block until every message put so far is handled (idle-time priming included)."""
        self.inbox.join()

    def _take(self, msg: Message) -> None:
        if isinstance(msg, Reload):
            self.settings = msg.settings
            self.load_engine()
        elif isinstance(msg, Prime):
            self.prime()
        elif isinstance(msg, Unload):
            self.unload_engine()
        elif self.clock.is_stale(msg.turn):
            return
        elif isinstance(msg, TurnEnded):
            self.pass_on(msg)
        else:
            self.handle(msg)

    def handle(self, msg: Message) -> None:
        if self.engine is None and self.needs_engine(msg):
            self.fail(msg.turn, f"{self.name} model is not loaded: {self.load_error or 'loading'}")
            return
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

    def prime(self) -> None:
        """Idle-time work before the next turn (the LLM evaluates its prompt prefix)."""

    def needs_engine(self, msg: Message) -> bool:
        return True

    def process(self, msg: Message) -> Iterator[Message]:
        raise NotImplementedError

    def pass_on(self, msg: Message) -> None:
        if self.outbox is not None:
            self.outbox.put(msg)

    def fail(self, turn: int, message: str) -> None:
        self.events.error.emit(self.name, message)
        self.pass_on(TurnEnded(turn, reason="error", error=message))

    def stop(self, timeout_s: float = 1.0) -> bool:
        self.inbox.put(STOP)
        return self.wait(int(timeout_s * 1000))
