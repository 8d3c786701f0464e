"""Where the user put the app's windows, kept between runs in `windows.json` beside the settings
(not in settings.json: moving a window is not a setting, and must not save a --profile)."""

from __future__ import annotations

import json
import logging

from .. import config

log = logging.getLogger(__name__)

FILENAME = "windows.json"


def load_positions() -> dict[str, list[int]]:
    try:
        data = json.loads((config.config_dir() / FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def saved_position(name: str) -> tuple[int, int] | None:
    pos = load_positions().get(name)
    if isinstance(pos, list) and len(pos) == 2 and all(isinstance(v, int) for v in pos):
        return pos[0], pos[1]
    return None


def save_position(name: str, x: int, y: int) -> None:
    positions = load_positions()
    positions[name] = [int(x), int(y)]
    try:
        config.atomic_write_text(config.config_dir() / FILENAME, json.dumps(positions) + "\n")
    except OSError as exc:
        log.warning("could not remember the window position (%s)", exc)
