"""save_note: appends a dated line to notes.md in the user's data folder (asks first)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from ..spec import Tool, ToolError, ToolSpec

NOTES_FILE = "notes.md"


def note_tool(folder: Callable[[], Path]) -> Tool:
    def save(args, stop) -> str:
        text = " ".join(str(args["text"]).split())
        if not text:
            raise ToolError("the note is empty: say what it should say")
        path = folder() / NOTES_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"- {datetime.now():%Y-%m-%d %H:%M} {text}\n")
        except OSError as exc:
            raise ToolError(f"the note could not be saved in {path}: {exc}") from exc
        return f"saved the note '{text}' in {NOTES_FILE}"

    return Tool(
        ToolSpec("save_note", "Save a short note for the user (a reminder, a list item).",
                 {"type": "object", "properties": {"text": {
                     "type": "string", "description": "the note's words"}},
                  "required": ["text"]},
                 read_only=False),
        save,
        describe=lambda args: f"save the note '{args.get('text', '')}'",
    )
