"""Answers for the local commands (intents.py): the time and date from the OS clock, locale
and time zone, timers, "say that again" and "stop" — before, and instead of, the LLM."""

from __future__ import annotations

import locale
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .intents import Intent, IntentKind, IntentMatcher, intent_data
from .timers import MAX_TIMER_S, TimerBook

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalAnswer:
    kind: IntentKind
    text: str  # what is said ("" for stop: nothing)


def _use_user_time_locale() -> None:
    try:  # month and day names, 12 or 24 hours: the user's locale, not C
        locale.setlocale(locale.LC_TIME, "")
    except locale.Error:
        log.debug("the user's time locale is not available; using C")


def uses_12_hour_clock() -> bool:
    """Whether the user's locale writes times with AM/PM."""
    try:
        fmt = locale.nl_langinfo(locale.T_FMT)
    except (AttributeError, ValueError):  # Windows has no nl_langinfo: ask strftime
        sample = time.strftime("%X", (2000, 1, 1, 15, 0, 0, 5, 1, -1))
        return "15" not in sample
    return any(code in fmt for code in ("%I", "%l", "%r", "%p"))


class LocalCommands:
    """`answer(transcript)` → a LocalAnswer, or None when the LLM should answer."""

    def __init__(
        self,
        timers: TimerBook | None = None,
        last_reply: Callable[[], str] = lambda: "",
        language: str = "en",
        now: Callable[[], datetime] = lambda: datetime.now().astimezone(),
    ):
        _use_user_time_locale()
        self.matcher = IntentMatcher(language)
        self.words = intent_data(language)["answers"]
        self.timers = timers or TimerBook()
        self.last_reply = last_reply
        self.now = now

    def answer(self, transcript: str) -> LocalAnswer | None:
        intent = self.matcher.match(transcript)
        if intent is None:
            return None
        return LocalAnswer(intent.kind, self._text(intent))

    def _text(self, intent: Intent) -> str:
        w, kind = self.words, intent.kind
        if kind is IntentKind.TIME:
            return w["time"].format(time=self.clock_text(self.now()))
        if kind is IntentKind.DATE:
            return w["date"].format(date=self.date_text(self.now()))
        if kind is IntentKind.TIMER_SET:
            if intent.seconds > MAX_TIMER_S:
                return w["timer_set_too_long"]
            self.timers.start(intent.seconds, self.label(intent.seconds))
            return w["timer_set"].format(duration=self.duration_text(intent.seconds))
        if kind is IntentKind.TIMER_LEFT:
            running = self.timers.running()
            if not running:
                return w["timer_left_none"]
            return " ".join(
                w["timer_left_one"].format(label=t.label, left=self.duration_text(t.left_s()))
                for t in running
            )
        if kind is IntentKind.TIMER_CANCEL:
            gone = self.timers.cancel()
            if not gone:
                return w["timer_cancel_none"]
            if len(gone) == 1:
                return w["timer_cancel_one"].format(label=gone[0].label)
            return w["timer_cancel_many"].format(count=len(gone))
        if kind is IntentKind.REPEAT:
            return self.last_reply() or w["repeat_none"]
        return ""  # STOP: the press already silenced the reply; nothing more is said

    def timer_done_text(self, label: str) -> str:
        return self.words["timer_done"].format(label=label)

    # ------------------------------------------------------------------ words
    @staticmethod
    def clock_text(now: datetime) -> str:
        if uses_12_hour_clock():
            return f"{now.hour % 12 or 12}:{now.minute:02d} {'AM' if now.hour < 12 else 'PM'}"
        return f"{now.hour}:{now.minute:02d}"

    @staticmethod
    def date_text(now: datetime) -> str:
        return f"{now.strftime('%A')}, {now.strftime('%B')} {now.day}, {now.year}"

    def _parts(self, seconds: float) -> list[tuple[int, str]]:
        """(count, unit) from the largest unit down; seconds only under 10 minutes."""
        s = int(round(seconds))
        hours, rest = divmod(s, 3600)
        minutes, secs = divmod(rest, 60)
        parts = [(hours, "hour"), (minutes, "minute")]
        if s < 600 or (hours == 0 and minutes == 0):
            parts.append((secs, "second"))
        return [(n, unit) for n, unit in parts if n] or [(0, "second")]

    def duration_text(self, seconds: float) -> str:
        """'1 hour 30 minutes', '2 seconds'."""
        names = lambda n, u: self.words["units_singular" if n == 1 else "units_plural"][u]  # noqa: E731
        return " ".join(f"{n} {names(n, unit)}" for n, unit in self._parts(seconds))

    def label(self, seconds: int) -> str:
        """'5 minute', as in 'your 5 minute timer'."""
        return " ".join(
            f"{n} {self.words['units_singular'][unit]}" for n, unit in self._parts(seconds)
        )
