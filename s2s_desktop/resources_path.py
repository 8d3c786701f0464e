"""Where the app's data files (icons, prompts, the model catalog) live.

Installed, they sit in the package (`s2s_desktop/resources/`); in a source checkout, at the
repository root (`resources/`); in a PyInstaller bundle, next to the unpacked code.
"""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resources_dir() -> Path:
    """The resources folder, found the same way installed, frozen or from a checkout."""
    candidates = [_PACKAGE / "resources", _PACKAGE.parent / "resources"]
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        candidates.insert(0, Path(frozen) / "resources")
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        "s2s-desktop resources are missing (looked in "
        + ", ".join(str(c) for c in candidates)
        + "): reinstall s2s-desktop"
    )
