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
