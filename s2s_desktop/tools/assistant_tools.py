"""The app's tool box: the built-in tools plus "what can you do?" over all of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..assistant.timers import TimerBook
from .builtin import abilities_tool, builtin_tools
from .toolbox import ToolBox


def assistant_toolbox(timers: TimerBook, notes_folder: Callable[[], Path],
                      clipboard: Callable[[], str] | None = None) -> ToolBox:
    box = ToolBox(builtin_tools(timers, notes_folder, clipboard))
    box.add(abilities_tool(box))
    return box
