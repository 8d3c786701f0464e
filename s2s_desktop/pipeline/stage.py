"""The engine stage: a worker (worker.py) that owns one model engine. It loads the engine in
its own thread, reloads or frees it on a control message, and evaluates idle-time work
(`prime`) between turns.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import sys
import threading
import time

from .. import devices
from ..engines import registry
from ..errors import S2SError
from ..states import StageState
from .messages import Message, Prime, Reload, Unload
from .worker import Worker

log = logging.getLogger(__name__)


def _trim_heap() -> None:
    """glibc keeps freed memory for reuse; hand it back to the OS (Linux only)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


_collecting = threading.Lock()
_last_collection_began = -1.0


def _free_memory(dropped_at: float) -> None:
    """Collect and trim once for every model dropped before a collection began: the stages
    unload together when idle, and four full collections of one heap were the same work."""
    global _last_collection_began
    with _collecting:
        if _last_collection_began >= dropped_at:
            return  # a collection that began after this model was dropped has freed it
        _last_collection_began = time.monotonic()
        gc.collect()  # the model's memory goes back now, not at some later collection
        _trim_heap()


class EngineStage(Worker):
    name = "stage"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ready.clear()  # set when the first load ends, loaded or failed
        self.engine = None
        self.load_s: float | None = None  # seconds the last load + warmup took

    # -- engine lifecycle ---------------------------------------------------------------
    def section(self):
        return getattr(self.settings, self.name)

    def make_engine(self, device: str):
        return registry.create(self.name, self.section(), device)

    def load_engine(self) -> None:
        self.ready.clear()
        self.events.stage_state.emit(self.name, StageState.LOADING, self.section().backend)
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
            self.events.stage_state.emit(self.name, StageState.READY, self.engine.describe())
        except Exception as exc:  # any failure: the stage stays up and reports it per turn
            self.engine = None
            self.load_error = str(exc) if isinstance(exc, S2SError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, S2SError):
                log.exception("%s failed to load", self.name)
            self.events.stage_state.emit(self.name, StageState.FAILED, self.load_error)
            self.events.error.emit(self.name, self.load_error)
        finally:
            self.ready.set()

    def unload_engine(self) -> None:
        """Free the model (idle); the next Reload loads it again."""
        if self.engine is None:
            return
        self.engine.unload()
        self.engine = None
        _free_memory(time.monotonic())
        self.events.stage_state.emit(self.name, StageState.UNLOADED, "")

    # -- the worker's hooks -------------------------------------------------------------
    def started_up(self) -> None:
        self.load_engine()

    def stopped(self) -> None:
        if self.engine is not None:
            self.engine.unload()

    def control(self, msg: Message) -> bool:
        if isinstance(msg, Reload):
            self.settings = msg.settings
            self.load_engine()
        elif isinstance(msg, Prime):
            if not (msg.question and self.clock.is_stale(msg.turn)):
                self.prime(question=msg.question)
        elif isinstance(msg, Unload):
            self.unload_engine()
        else:
            return False
        return True

    def handle(self, msg: Message) -> None:
        if self.engine is None and self.needs_engine(msg):
            self.fail(msg.turn, f"{self.name} model is not loaded: {self.load_error or 'loading'}")
            return
        super().handle(msg)

    def prime(self, question: str = "") -> None:
        """Idle-time work before the next turn (the LLM evaluates its prompt prefix, and the
        `question` so far while the key is held)."""

    def needs_engine(self, msg: Message) -> bool:
        return True
