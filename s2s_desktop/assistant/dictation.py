"""Dictation: what is said while the dictation key is held is typed into the application that
has focus — through the clipboard and the platform's paste keystroke (the user's clipboard is
put back afterwards), or typed key by key where pasting is refused. Where the OS refuses
synthetic keys (Wayland, macOS without Accessibility permission) the text stays on the
clipboard and the user is told what to do. Qt-free: the clipboard is the caller's."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from enum import StrEnum

log = logging.getLogger(__name__)

CLEANUP_PROMPT = (
    "Rewrite the user's dictated text with correct punctuation and capitals, removing filler "
    "words (um, uh, like, you know) and false starts. Keep every other word and the meaning. "
    "Reply with the rewritten text only."
)


class Delivery(StrEnum):
    PASTED = "pasted"  # clipboard + paste keystroke, clipboard restored
    TYPED = "typed"  # typed key by key (pasting refused)
    CLIPBOARD = "clipboard"  # the OS refuses synthetic keys: the text waits on the clipboard


def macos_accessibility_trusted() -> bool:
    """Whether macOS lets this process send keystrokes (System Settings → Privacy & Security →
    Accessibility)."""
    try:
        lib = ctypes.cdll.LoadLibrary(ctypes.util.find_library("ApplicationServices"))
        lib.AXIsProcessTrusted.restype = ctypes.c_bool
        return bool(lib.AXIsProcessTrusted())
    except (OSError, AttributeError, TypeError):
        return False


def keys_refused(platform: str = sys.platform, env: dict | None = None,
                 ax_trusted=macos_accessibility_trusted) -> str:
    """Why keystrokes cannot be sent here, with what to do ('' when they can)."""
    env = os.environ if env is None else env
    if platform.startswith("linux"):
        wayland = env.get("XDG_SESSION_TYPE", "").lower() == "wayland" or (
            env.get("WAYLAND_DISPLAY") and not env.get("DISPLAY"))
        if wayland:
            return ("Wayland does not let apps type into other windows: the dictated text "
                    "is on the clipboard, paste it with Ctrl+V")
    if platform == "darwin" and not ax_trusted():
        return ("macOS needs Accessibility permission to type for you: the dictated text is "
                "on the clipboard (paste with Cmd+V); allow s2s-desktop in System Settings → "
                "Privacy & Security → Accessibility")
    return ""


def paste_modifier(platform: str = sys.platform) -> str:
    return "cmd" if platform == "darwin" else "ctrl"


class KeyboardSender:
    """Synthetic keystrokes through pynput (the hotkey extra)."""

    def __init__(self, platform: str = sys.platform):
        from pynput.keyboard import Controller, Key

        self.keyboard, self.Key = Controller(), Key
        self.modifier = getattr(Key, paste_modifier(platform))

    def paste(self) -> None:
        with self.keyboard.pressed(self.modifier):
            self.keyboard.press("v")
            self.keyboard.release("v")

    def type(self, text: str) -> None:
        self.keyboard.type(text)


def cleanup_messages(text: str) -> list[dict]:
    """The LLM prompt of the optional clean-up (assistant.dictation_cleanup)."""
    return [{"role": "system", "content": CLEANUP_PROMPT}, {"role": "user", "content": text}]
