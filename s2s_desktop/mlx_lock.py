"""One process-wide lock around every MLX call.

Metal work encoded from two threads at once can crash the process, and the LLM, STT and TTS
stages each run in their own thread. Backends take the lock per step (one generated token,
one transcription, one synthesis call), never for a whole stream. The lock is reentrant (a
backend may call a helper that takes it again) and first-come first-served: a thread that
releases it and asks again at once queues behind the waiting ones, so a long LLM reply cannot
starve TTS (Python's own locks make no such promise).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from .errors import S2SError

T = TypeVar("T")


class MLXLockTimeout(S2SError, TimeoutError):
    """Waited too long for the MLX lock; the message names the stage holding it."""


@dataclass(frozen=True)
class Holder:
    stage: str
    thread: str
    held_s: float


class FairRLock:
    """A reentrant FIFO lock that remembers which stage holds it and since when."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None  # thread ident
        self._depth = 0
        self._queue: deque[object] = deque()  # tickets of waiting threads, in arrival order
        self._stage = ""
        self._thread_name = ""
        self._since = 0.0

    def _take(self, stage: str) -> None:
        self._owner, self._depth = threading.get_ident(), 1
        self._stage, self._thread_name = stage, threading.current_thread().name
        self._since = time.monotonic()

    def acquire(self, stage: str, timeout: float | None = None) -> bool:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            if self._owner is None and not self._queue:
                self._take(stage)
                return True
            ticket = object()
            self._queue.append(ticket)
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._owner is not None or self._queue[0] is not ticket:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self._queue.remove(ticket)
                    self._cond.notify_all()  # the next in line may now be first
                    return False
                self._cond.wait(remaining)
            self._queue.popleft()
            self._take(stage)
            return True

    def release(self) -> None:
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("the MLX lock is released by a thread that does not hold it")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()

    def holder(self) -> Holder | None:
        with self._cond:
            if self._owner is None:
                return None
            return Holder(self._stage, self._thread_name, time.monotonic() - self._since)

    def waiting(self) -> int:
        with self._cond:
            return len(self._queue)


_LOCK = FairRLock()


def holder() -> Holder | None:
    """Who holds the MLX lock now (the stage that took it first), or None."""
    return _LOCK.holder()


@contextmanager
def mlx_lock(stage: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the process-wide MLX lock for one step of `stage`'s work.

    `timeout` in seconds (None waits forever); on timeout raises MLXLockTimeout naming the
    stage that holds the lock and for how long."""
    if not _LOCK.acquire(stage, timeout):
        h = _LOCK.holder()
        who = f"'{h.stage}' (thread {h.thread}) for {h.held_s:.1f} s" if h else "another stage"
        raise MLXLockTimeout(
            f"{stage} waited {timeout:.1f} s for the MLX lock, held by {who}; "
            "that stage may be stuck: stop the turn or restart the app"
        )
    try:
        yield
    finally:
        _LOCK.release()


def locked_steps(
    stage: str,
    steps: Iterator[T],
    timeout: float | None = None,
    sync: Callable[[], None] | None = None,
) -> Iterator[T]:
    """Yield from `steps`, taking the lock around each `next()` only (one token), so other
    stages can run MLX work between steps. `sync` runs before each release: it must finish MLX
    work the step queued asynchronously (mlx-lm evaluates the next token ahead), or that work
    would still be running when another thread takes the lock. Closing this closes `steps`
    under the lock too."""
    try:
        while True:
            with mlx_lock(stage, timeout):
                try:
                    item = next(steps)
                except StopIteration:
                    return
                finally:
                    if sync is not None:
                        sync()
            yield item
    finally:
        close = getattr(steps, "close", None)
        if close is not None:
            with mlx_lock(stage, timeout):
                close()  # generator clean-up (mlx-lm's wired-memory limit) is MLX work too
