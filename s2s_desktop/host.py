"""Facts about the machine the app runs on: the OS, Apple Silicon, the CPU count. A leaf
module (standard library only): config, models, engines and the pipeline ask here, and tests
monkeypatch these functions to play another machine."""

from __future__ import annotations

import os
import platform
import sys


def apple_silicon() -> bool:
    """A Mac with an Apple M-series chip (MLX and Metal)."""
    return sys.platform == "darwin" and platform.machine() == "arm64"


def cpu_count() -> int:
    """Logical CPUs (at least 1)."""
    return os.cpu_count() or 1


# Windows names its locales in words ("German_Germany"): the languages the catalog has voices for
_WINDOWS_LANGUAGE_NAMES = {"english": "en", "german": "de", "french": "fr", "spanish": "es",
                           "italian": "it", "portuguese": "pt"}


def user_language() -> str:
    """The two-letter language of the user's locale ("en" where none is set, or "C")."""
    import locale

    # the first of these that is set decides, as for the C library; then the OS's own locale
    name = next((os.environ[var] for var in ("LC_ALL", "LC_MESSAGES", "LANG")
                 if os.environ.get(var)), "")
    if not name:
        try:
            name = locale.getlocale()[0] or ""
        except ValueError:  # an unknown locale name
            name = ""
    head = name.split(".")[0].split("@")[0]
    if not head or head in ("C", "POSIX"):
        return "en"
    word = head.split("_")[0].split("-")[0].lower()
    return _WINDOWS_LANGUAGE_NAMES.get(word, word if len(word) in (2, 3) else "en")
