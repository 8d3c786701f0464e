"""The built-in tools, each declared once in its own module; `builtin_tools` gathers them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...assistant.timers import TimerBook
from ..spec import Tool, ToolSpec
from ..toolbox import ToolBox
from .calculator import calculator_tool
from .clock import clock_tools
from .desktop import desktop_tools
from .notes import note_tool


def abilities_tool(box: ToolBox) -> Tool:
    """"What can you do?": the tools switched on, in a line each."""

    def abilities(args, stop) -> str:
        return "\n".join(f"{t.spec.name}: {t.spec.description}" for t in box.offered())

    return Tool(ToolSpec("list_abilities", "What this assistant can do: its tools.",
                         {"type": "object", "properties": {}}), abilities)


def builtin_tools(timers: TimerBook, notes_folder: Callable[[], Path],
                  clipboard: Callable[[], str] | None = None) -> list[Tool]:
    return [calculator_tool(), *clock_tools(timers), *desktop_tools(clipboard),
            note_tool(notes_folder)]
