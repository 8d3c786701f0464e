"""The state icons (resources/icons/<state>-<size>.png, drawn by scripts/render_icons.py)."""

from __future__ import annotations

import functools

from PySide6.QtGui import QIcon

from ..resources_path import resources_dir
from ..states import LOOKS, AppState

STATES = tuple(look.icon for look in LOOKS.values())  # the icon files drawn per state
SIZES = (16, 22, 32, 48, 64, 128)


@functools.cache
def state_icon(state: str) -> QIcon:
    """The icon for an app state; unknown states get the idle icon."""
    name = LOOKS.get(state, LOOKS[AppState.IDLE]).icon
    icon = QIcon()
    folder = resources_dir() / "icons"
    for size in SIZES:
        path = folder / f"{name}-{size}.png"
        if path.exists():
            icon.addFile(str(path))
    return icon


def app_icon() -> QIcon:
    return state_icon(AppState.IDLE)
