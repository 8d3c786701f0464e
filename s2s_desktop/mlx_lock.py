"""One process-wide lock around every MLX call.

Metal work encoded from two threads at once can crash the process, and the LLM, STT and TTS
stages each run in their own thread. Backends take the lock per step (one generated token,
one transcription, one synthesis call), never for a whole stream, so a long reply cannot
starve TTS. The lock is reentrant: a backend may call a helper that takes it again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
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


_lock = threading.RLock()
_state = threading.Lock()  # guards the holder fields below
_owner: str | None = None
_owner_thread: str | None = None
_since = 0.0
_depth = 0


def holder() -> Holder | None:
    """Who holds the MLX lock now (the outermost stage that took it), or None."""
    with _state:
        if _owner is None:
            return None
        return Holder(_owner, _owner_thread or "?", time.monotonic() - _since)


@contextmanager
def mlx_lock(stage: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the process-wide MLX lock for one step of `stage`'s work.

    `timeout` in seconds (None waits forever); on timeout raises MLXLockTimeout naming the
    stage that holds the lock and for how long."""
    global _owner, _owner_thread, _since, _depth
    if not _lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
        h = holder()
        who = f"'{h.stage}' (thread {h.thread}) for {h.held_s:.1f} s" if h else "another stage"
        raise MLXLockTimeout(
            f"{stage} waited {timeout:.1f} s for the MLX lock, held by {who}; "
            "that stage may be stuck: stop the turn or restart the app"
        )
    try:
        with _state:
            if _depth == 0:
                _owner, _owner_thread, _since = (
                    stage,
                    threading.current_thread().name,
                    (time.monotonic()),
                )
            _depth += 1
        yield
    finally:
        with _state:
            _depth -= 1
            if _depth == 0:
                _owner = _owner_thread = None
        _lock.release()


def locked_steps(stage: str, steps: Iterator[T], timeout: float | None = None) -> Iterator[T]:
    """Yield from `steps`, taking the lock around each `next()` only (one token), so other
    stages can run MLX work between steps. Closing this closes `steps` under the lock too."""
    try:
        while True:
            with mlx_lock(stage, timeout):
                try:
                    item = next(steps)
                except StopIteration:
                    return
                _synchronize()
            yield item
    finally:
        close = getattr(steps, "close", None)
        if close is not None:
            with mlx_lock(stage, timeout):
                close()  # generator cleanup (e.g. mlx-lm's wired-memory limit) is MLX work


def _synchronize() -> None:
    """Finish MLX work queued asynchronously (mlx-lm evaluates the next token ahead) before
    another thread may start its own."""
    import sys

    mx = sys.modules.get("mlx.core")
    if mx is not None:
        mx.synchronize()
