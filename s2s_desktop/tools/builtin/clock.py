"""The time, the date and timers as tools, for models that call tools (the spoken local
commands still answer these first, before the LLM)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ...assistant.timers import MAX_TIMER_S, TimerBook
from ..spec import Tool, ToolError, ToolSpec

NO_ARGS = {"type": "object", "properties": {}}


def _now() -> datetime:
    return datetime.now().astimezone()


def clock_tools(timers: TimerBook, now: Callable[[], datetime] = _now) -> list[Tool]:
    def current_time(args, stop) -> str:
        t = now()
        return f"{t:%H:%M} ({t.tzname() or 'local time'})"

    def current_date(args, stop) -> str:
        return f"{now():%A, %d %B %Y}"

    def start_timer(args, stop) -> str:
        seconds = int(args.get("seconds", 0)) + 60 * int(args.get("minutes", 0))
        if not 0 < seconds <= MAX_TIMER_S:
            raise ToolError(f"a timer lasts 1 second to {MAX_TIMER_S // 3600} hours")
        label = str(args.get("label") or "").strip()
        timer = timers.start(seconds, label or f"{seconds} second")
        return f"timer {timer.id} set for {seconds} seconds" + (f" ({label})" if label else "")

    def list_timers(args, stop) -> str:
        running = timers.running()
        if not running:
            return "no timers are running"
        return "; ".join(f"{t.label}: {round(t.left_s())} seconds left" for t in running)

    timer_args = {"type": "object", "properties": {
        "minutes": {"type": "integer", "description": "whole minutes"},
        "seconds": {"type": "integer", "description": "seconds (added to the minutes)"},
        "label": {"type": "string", "description": "what the timer is for"}}}
    return [
        Tool(ToolSpec("get_time", "The current local time.", NO_ARGS), current_time),
        Tool(ToolSpec("get_date", "Today's date and weekday.", NO_ARGS), current_date),
        # a timer changes nothing that lasts and is undone by voice: it runs unasked, like
        # the spoken timer command
        Tool(ToolSpec("start_timer", "Start a countdown timer that rings when it is due.",
                      timer_args), start_timer),
        Tool(ToolSpec("list_timers", "The running timers and the time left on each.",
                      NO_ARGS), list_timers),
    ]
