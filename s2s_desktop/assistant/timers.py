"""Running timers: set, listed with the time left, cancelled, and a callback when one is due.
Threads only (no Qt): the app turns the callback into a sound, speech and a notification."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_TIMER_S = 24 * 3600


@dataclass
class Timer:
    id: int
    seconds: int  # the length asked for
    label: str  # "5 minute", as in "your 5 minute timer"
    due: float  # time.monotonic() when it rings
    _thread: threading.Timer | None = field(default=None, repr=False, compare=False)

    def left_s(self, now: float | None = None) -> float:
        return max(0.0, self.due - (time.monotonic() if now is None else now))


class TimerBook:
    """The running timers. `on_due(timer)` is called from a timer thread when one rings."""

    def __init__(self, on_due: Callable[[Timer], None] | None = None):
        self.on_due = on_due
        self._lock = threading.Lock()
        self._timers: dict[int, Timer] = {}
        self._ids = itertools.count(1)
        self.listeners: list[Callable[[], None]] = []  # told when the list changes

    def start(self, seconds: int, label: str) -> Timer:
        if not 0 < seconds <= MAX_TIMER_S:
            raise ValueError(f"a timer lasts 1 s to {MAX_TIMER_S // 3600} hours, not {seconds} s")
        with self._lock:
            timer = Timer(next(self._ids), seconds, label, time.monotonic() + seconds)
            thread = threading.Timer(seconds, self._ring, args=(timer.id,))
            thread.daemon = True
            timer._thread = thread
            self._timers[timer.id] = timer
        thread.start()
        self._changed()
        return timer

    def running(self) -> list[Timer]:
        """Soonest first."""
        with self._lock:
            return sorted(self._timers.values(), key=lambda t: t.due)

    def cancel(self, timer_id: int | None = None) -> list[Timer]:
        """Cancel one timer, or all of them (None); returns those cancelled."""
        with self._lock:
            ids = list(self._timers) if timer_id is None else [timer_id]
            gone = [self._timers.pop(i) for i in ids if i in self._timers]
        for timer in gone:
            if timer._thread is not None:
                timer._thread.cancel()
        if gone:
            self._changed()
        return gone

    def _ring(self, timer_id: int) -> None:
        with self._lock:
            timer = self._timers.pop(timer_id, None)
        if timer is None:
            return  # cancelled meanwhile
        self._changed()
        if self.on_due is not None:
            self.on_due(timer)

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener()

    def close(self) -> None:
        self.cancel()
