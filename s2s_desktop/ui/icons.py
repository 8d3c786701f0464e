"""The state icons (resources/icons/<state>-<size>.png, drawn by scripts/render_icons.py)."""

from __future__ import annotations

import functools

from PySide6.QtGui import QIcon

from ..resources_path import resources_dir
from ..states import HANDS_FREE_LOOK, LOOKS, AppState, look

# the icon files drawn (scripts/render_icons.py): one per state, and hands-free's
STATES = (*(each.icon for each in LOOKS.values()), HANDS_FREE_LOOK.icon)
SIZES = (16, 22, 32, 48, 64, 128)


def state_icon(state: str, hands_free: bool = False) -> QIcon:
    """The icon for an app state (ready in hands-free: its own); unknown states get idle's."""
    return icon_named(look(state, hands_free).icon)


@functools.cache
def icon_named(name: str) -> QIcon:
    """resources/icons/<name>-<size>.png at every size drawn."""
    icon = QIcon()
    folder = resources_dir() / "icons"
    for size in SIZES:
        path = folder / f"{name}-{size}.png"
        if path.exists():
            icon.addFile(str(path))
    return icon


def app_icon() -> QIcon:
    return state_icon(AppState.IDLE)
