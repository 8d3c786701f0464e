"""The hotkey helper process: `python -m s2s_desktop.hotkey.listener --combo ctrl+alt+space`.

It watches the keyboard with pynput and prints one line per event on stdout:
    ready ctrl+alt+space      listening
    press 12345.678           the whole combo is down (time.monotonic() of the event)
    release 12345.912         a key of the combo went up (when it did; told REPEAT_S later,
                              unless it was X11 auto-repeat, whose press follows at once)
    error <message>           it cannot listen (then it exits with status 2)
It exits when its stdin closes, so it never outlives the app. Running apart from the Qt
process keeps a misbehaving keyboard hook (a known crash on macOS) from taking the app down.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from ..errors import SettingsError
from .combo import format_combo, normalize_key, parse_combo


def key_name(key) -> str:
    """A pynput Key or KeyCode → our canonical name ("ctrl", "space", "a"); "" if unknown."""
    if key is None:
        return ""
    name = getattr(key, "name", None)  # Key enum members: ctrl_l, alt_gr, space, f8, …
    if name:
        return normalize_key(name)
    char = getattr(key, "char", None)
    if char and char.isprintable():
        return char.lower()
    vk = getattr(key, "vk", None)  # ctrl+letter may come without a char
    if vk is not None and (0x30 <= vk <= 0x39 or 0x41 <= vk <= 0x5A or 0x61 <= vk <= 0x7A):
        return chr(vk).lower()
    return ""


# X11 auto-repeat sends a release and a press of a held key at the same instant; a release
# is reported only when no press of the combo follows this soon (one that comes later still
# falls inside the app's hotkey.release_grace_ms: it costs a spare transcription, no words)
REPEAT_S = 0.005


class ComboTracker:
    """Turns single key events into combo press / release (pure logic, tested alone)."""

    def __init__(self, combo: frozenset[str]):
        self.combo = combo
        self.down: set[str] = set()
        self.active = False
        self.pending: float | None = None  # when the combo went up, until reported

    def press(self, name: str) -> bool:
        """True when this key completes the combo (a new press to report)."""
        if not name:
            return False
        self.down.add(name)
        if self.pending is not None and self.combo <= self.down:
            self.pending, self.active = None, True  # auto-repeat: the combo never went up
            return False
        if not self.active and self.combo <= self.down:
            self.active = True
            return True
        return False

    def release(self, name: str, at: float) -> bool:
        """True when this key ends an active combo: its release is pending until
        `take_release()`, REPEAT_S later, unless a press of the combo undoes it."""
        self.down.discard(name)
        if self.active and name in self.combo:
            self.active, self.pending = False, at
            return True
        return False

    def take_release(self) -> float | None:
        """The time of the combo's release to report, or None (none, or it was auto-repeat)."""
        at, self.pending = self.pending, None
        return at


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _watch_stdin() -> None:
    # the app holds our stdin; when it goes (quit or crash), so do we
    try:
        for line in sys.stdin:
            if line.strip() == "quit":
                break
    except (OSError, ValueError):
        pass
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="s2s-desktop-hotkey")
    parser.add_argument("--combo", required=True)
    args = parser.parse_args(argv)
    try:
        combo = parse_combo(args.combo)
    except SettingsError as exc:
        _emit(f"error {exc}")
        return 2
    if sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
        why = "Wayland without X11" if os.environ.get("WAYLAND_DISPLAY") else "no X display"
        _emit(f"error global hotkeys need an X11 display ({why})")
        return 2
    try:
        from pynput import keyboard
    except ImportError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "pynput" in str(exc) and "No module" in str(exc):
            _emit('error the pynput package is missing: pip install "s2s-desktop[hotkey]"')
        else:
            _emit(f"error the keyboard cannot be watched here ({first})")
        return 2

    tracker = ComboTracker(combo)
    lock = threading.Lock()

    def on_press(key, injected=False):
        with lock:
            if tracker.press(key_name(key)):
                _emit(f"press {time.monotonic():.4f}")

    def report_release():
        with lock:
            at = tracker.take_release()
            if at is not None:
                _emit(f"release {at:.4f}")

    def on_release(key, injected=False):
        with lock:
            if tracker.release(key_name(key), time.monotonic()):
                threading.Timer(REPEAT_S, report_release).start()

    threading.Thread(target=_watch_stdin, daemon=True, name="stdin-watch").start()
    try:
        listener = keyboard.Listener(on_press=on_press, on_release=on_release)
        listener.start()
        listener.wait()
    except Exception as exc:
        _emit(f"error the keyboard cannot be watched ({type(exc).__name__}: {exc})")
        return 2
    if getattr(listener, "IS_TRUSTED", True) is False:  # macOS without Accessibility access
        _emit(
            "error allow s2s-desktop under System Settings → Privacy & Security → "
            "Accessibility (or Input Monitoring), then restart it"
        )
        return 2
    _emit(f"ready {format_combo(combo)}")
    listener.join()
    _emit("error the keyboard listener stopped")
    return 2


if __name__ == "__main__":
    sys.exit(main())
