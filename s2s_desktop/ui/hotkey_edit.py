"""A shortcut field you set by pressing the combo: modifiers held plus one key ("ctrl+alt+space"),
or two or more modifiers pressed and released together. Esc alone gives the old combo back.

The text it produces is the same format the hotkey helper reads (hotkey/combo.py)."""

from __future__ import annotations

import sys

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import QLineEdit

from ..errors import SettingsError
from ..hotkey.combo import MODIFIERS, format_combo, parse_combo

K = Qt.Key
NAMED = {
    K.Key_Space: "space",
    K.Key_Return: "enter",
    K.Key_Enter: "enter",
    K.Key_Tab: "tab",
    K.Key_Backtab: "tab",
    K.Key_Escape: "esc",
    K.Key_Backspace: "backspace",
    K.Key_Delete: "delete",
    K.Key_Insert: "insert",
    K.Key_Home: "home",
    K.Key_End: "end",
    K.Key_PageUp: "page_up",
    K.Key_PageDown: "page_down",
    K.Key_Up: "up",
    K.Key_Down: "down",
    K.Key_Left: "left",
    K.Key_Right: "right",
    K.Key_CapsLock: "caps_lock",
    K.Key_ScrollLock: "scroll_lock",
    K.Key_Pause: "pause",
    K.Key_Print: "print_screen",
    K.Key_Menu: "menu",
    K.Key_NumLock: "num_lock",
    K.Key_MediaTogglePlayPause: "media_play_pause",
    K.Key_MediaPlay: "media_play_pause",
    K.Key_MediaNext: "media_next",
    K.Key_MediaPrevious: "media_previous",
}
NAMED.update({getattr(K, f"Key_F{i}"): f"f{i}" for i in range(1, 25)})
MODIFIER_KEYS = {
    K.Key_Control: "ctrl",
    K.Key_Alt: "alt",
    K.Key_AltGr: "alt",
    K.Key_Shift: "shift",
    K.Key_Meta: "cmd",
    K.Key_Super_L: "cmd",
    K.Key_Super_R: "cmd",
}
if sys.platform == "darwin":  # Qt swaps them on macOS: "Control" is ⌘, "Meta" is ⌃
    MODIFIER_KEYS.update({K.Key_Control: "cmd", K.Key_Meta: "ctrl"})
PROMPT = "Press the shortcut…"

# combos a desktop keeps for itself: the app would not hear them, or both would act
TAKEN_COMBOS = (
    ("alt+space", "linux", "KDE opens KRunner and openbox its window menu on Alt+Space"),
    ("ctrl+alt+space", "linux", "openbox opens its menu on Ctrl+Alt+Space"),
    ("alt+space", "win32", "Windows opens the window menu on Alt+Space"),
    ("cmd+space", "darwin", "macOS opens Spotlight on Cmd+Space"),
    ("cmd+space", "win32", "Windows switches the keyboard layout on Win+Space"),
)


def _keys(combo: str) -> frozenset[str]:
    return frozenset(p.strip().lower() for p in combo.split("+") if p.strip())


def taken_by_desktop(combo: str, platform: str = sys.platform) -> str:
    """Why the desktop is known to take `combo` on this platform, or ""."""
    for taken, where, why in TAKEN_COMBOS:
        if platform.startswith(where) and _keys(combo) == _keys(taken):
            return f"{why}: choose another, e.g. ctrl+shift+space"
    return ""


def modifier_names(mods: Qt.KeyboardModifier) -> set[str]:
    M = Qt.KeyboardModifier
    ctrl, meta = ("cmd", "ctrl") if sys.platform == "darwin" else ("ctrl", "cmd")
    found = {
        name
        for flag, name in (
            (M.ControlModifier, ctrl),
            (M.AltModifier, "alt"),
            (M.ShiftModifier, "shift"),
            (M.MetaModifier, meta),
        )
        if mods & flag
    }
    return found


def key_name(key: int, text: str = "") -> str:
    """A Qt key code → our key name ("space", "f8", "k", ","); "" when it has none."""
    if key in NAMED:
        return NAMED[key]
    if K.Key_A <= key <= K.Key_Z or K.Key_0 <= key <= K.Key_9:
        return chr(key).lower()
    name = QKeySequence(key).toString()  # punctuation: Key_Comma → ","
    if len(name) == 1 and name.isprintable() and not name.isspace():
        return name.lower()
    return text.lower() if len(text) == 1 and text.isprintable() and not text.isspace() else ""


class HotkeyEdit(QLineEdit):
    """Click (or tab into) it, press the combo. `combo_changed(str)` fires when one is set."""

    combo_changed = Signal(str)

    def __init__(self, combo: str = "", parent=None):
        self._combo = combo
        self._held: set[str] = set()  # modifiers pressed since capture began
        self._capturing = False
        super().__init__(parent)
        self.setReadOnly(True)  # typing letters would not make a shortcut
        self.setPlaceholderText(PROMPT)
        self.setToolTip("Click here, then press the key combination you want to hold to talk")
        self.setText(combo)

    def combo(self) -> str:
        return self._combo

    def set_combo(self, combo: str) -> None:
        self._combo = combo
        self._capturing = False
        self.setText(combo)

    # ------------------------------------------------------------------ capture
    def focusInEvent(self, event) -> None:
        super().focusInEvent(event)
        self._start()

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self._stop()

    def mousePressEvent(self, event) -> None:
        super().mousePressEvent(event)
        if not self._capturing:
            self._start()

    def _start(self) -> None:
        self._capturing = True
        self._held.clear()
        self.setText("")  # the placeholder asks for the shortcut

    def _stop(self) -> None:
        self._capturing = False
        self._held.clear()
        self.setText(self._combo)

    def event(self, event) -> bool:
        # Tab would move the focus before keyPressEvent saw it; while capturing it is a key
        if (
            self._capturing
            and event.type() == QEvent.Type.KeyPress
            and event.key() in (K.Key_Tab, K.Key_Backtab)
        ):
            self.keyPressEvent(event)
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not self._capturing:
            self._start()
        key = event.key()
        mods = modifier_names(event.modifiers())
        if key in MODIFIER_KEYS:
            self._held |= mods | {MODIFIER_KEYS[key]}
            self.setText("+".join(m for m in MODIFIERS if m in self._held) + "+…")
            return
        name = key_name(key, event.text())
        if name == "esc" and not mods:
            self._stop()  # changed their mind: keep the old combo
            return
        if name:
            self._finish(mods | {name})

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        # modifiers only (e.g. ctrl+alt): the combo is complete when they are let go
        if self._capturing and event.key() in MODIFIER_KEYS and len(self._held) >= 2:
            self._finish(set(self._held))

    def _finish(self, keys: set[str]) -> None:
        text = format_combo(keys)
        try:
            parse_combo(text)
        except SettingsError as exc:
            self.setToolTip(str(exc))
            self._held.clear()
            self.setText("")
            return
        changed = text != self._combo
        self._combo = text
        self._stop()
        if changed:
            self.combo_changed.emit(text)
