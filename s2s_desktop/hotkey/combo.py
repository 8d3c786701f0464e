"""Hotkey combos as text ("ctrl+alt+space") → a set of canonical key names, and back."""

from __future__ import annotations

from ..errors import SettingsError

MODIFIERS = ("ctrl", "alt", "shift", "cmd")
ALIASES = {
    "control": "ctrl",
    "ctl": "ctrl",
    "option": "alt",
    "opt": "alt",
    "altgr": "alt",
    "alt_gr": "alt",
    "super": "cmd",
    "win": "cmd",
    "windows": "cmd",
    "meta": "cmd",
    "command": "cmd",
    "escape": "esc",
    "return": "enter",
    "spacebar": "space",
    "del": "delete",
    "ins": "insert",
    "pgup": "page_up",
    "pgdn": "page_down",
    "pageup": "page_up",
    "pagedown": "page_down",
    "capslock": "caps_lock",
    "scrolllock": "scroll_lock",
    "printscreen": "print_screen",
    "prtsc": "print_screen",
}
NAMED_KEYS = {
    "space",
    "enter",
    "tab",
    "esc",
    "backspace",
    "delete",
    "insert",
    "home",
    "end",
    "page_up",
    "page_down",
    "up",
    "down",
    "left",
    "right",
    "caps_lock",
    "scroll_lock",
    "pause",
    "print_screen",
    "menu",
    "num_lock",
    *(f"f{i}" for i in range(1, 25)),
    "media_play_pause",
    "media_next",
    "media_previous",
}


def normalize_key(name: str) -> str:
    key = name.strip().lower().replace(" ", "")
    key = ALIASES.get(key, key)
    for side in ("_l", "_r"):  # ctrl_l / shift_r count as ctrl / shift
        if key.endswith(side) and key[: -len(side)] in MODIFIERS:
            key = key[: -len(side)]
    return key


def parse_combo(text: str) -> frozenset[str]:
    """ "ctrl+alt+space" → {"ctrl", "alt", "space"}. Raises SettingsError for a bad combo."""
    if not text or not text.strip():
        raise SettingsError("hotkey.combo is empty: use something like ctrl+alt+space")
    parts = text.split("+")
    keys = set()
    for part in parts:
        if part == "":
            continue
        key = normalize_key(part)
        if key not in MODIFIERS and key not in NAMED_KEYS and len(key) != 1:
            raise SettingsError(
                f"hotkey.combo: unknown key '{part.strip()}' in '{text}' "
                "(use names like ctrl, alt, shift, cmd, space, f8, a)"
            )
        keys.add(key)
    if not keys:
        raise SettingsError(f"hotkey.combo: no keys in '{text}'")
    if keys <= set(MODIFIERS) and len(keys) < 2:
        raise SettingsError(
            f"hotkey.combo '{text}' is a single modifier: add a key, e.g. ctrl+alt+space"
        )
    return frozenset(keys)


def format_combo(keys: frozenset[str] | set[str]) -> str:
    """Modifiers first, in a fixed order: {"space", "ctrl"} → "ctrl+space"."""
    mods = [m for m in MODIFIERS if m in keys]
    rest = sorted(k for k in keys if k not in MODIFIERS)
    return "+".join(mods + rest)
