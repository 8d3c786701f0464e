"""The tray (menu bar) icon: one icon per state, a tooltip that says what is happening or what
failed, and the menu: Talk, Conversation…, Settings…, Models…, Pause Hotkey, Quit."""

from __future__ import annotations

from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from ..states import LOOKS, AppState, look
from .actions import AppActions
from .icons import state_icon

STATE_WORDS = {state: look.label for state, look in LOOKS.items()}


def tooltip_text(state: str, detail: str, hotkey: dict | None = None,
                 hands_free: bool = False) -> str:
    """'s2s-desktop — Loading models' + what is happening + how to talk."""
    word = look(state, hands_free).label if state in STATE_WORDS else state
    lines = [f"s2s-desktop — {word}"]
    if detail and detail != "Ready" and not detail.startswith(STATE_WORDS.get(state, "?")):
        lines.append(detail)  # what failed, or the loading progress
    hk = hotkey or {}
    if state in (AppState.IDLE, AppState.ERROR) and hk.get("combo"):
        if hk.get("available") and not hk.get("paused"):
            verb = "Hold" if hk.get("mode") == "hold" else "Press"
            lines.append(f"{verb} {hk['combo']} to talk")
        elif hk.get("paused"):
            lines.append("Hotkey paused")
    return "\n".join(lines)


MENU_STATUS_CHARS = 80  # a menu as wide as a long error would cover the screen


def cut(text: str, limit: int) -> str:
    """`text`, or its first `limit` - 1 characters and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def menu_status_text(tooltip: str) -> str:
    """The menu's greyed first line: the state and what is happening, from the tooltip."""
    return cut(" — ".join(tooltip.split("\n")[:2]).replace("s2s-desktop — ", "", 1),
               MENU_STATUS_CHARS)


class TrayIcon(QSystemTrayIcon):
    def __init__(self, actions: AppActions, parent=None):
        super().__init__(parent)
        self.actions = actions
        self.clicked_action = None  # what a click on the message shown last does, if anything
        self.messageClicked.connect(self._message_clicked)
        self.menu = QMenu()
        self.status_action = actions.fill_menu(self.menu)
        self.setContextMenu(self.menu)
        self.state = ""
        self.show_state(AppState.LOADING, "")
        self.activated.connect(self._activated)

    def show_state(self, state: str, detail: str, hotkey: dict | None = None,
                   hands_free: bool = False) -> None:
        shown = look(state, hands_free).icon
        if shown != self.state:
            self.setIcon(state_icon(state, hands_free))
            self.state = shown
        self.actions.show_state(state)
        text = tooltip_text(state, detail, hotkey, hands_free)
        self.setToolTip(text)
        self.status_action.setText(menu_status_text(text))

    def show_notice(self, text: str, error: bool = False) -> None:
        self.clicked_action = None  # a new message: an earlier one's offer is not this one's
        if self.isVisible() and self.supportsMessages():
            icon = (
                QSystemTrayIcon.MessageIcon.Warning
                if error
                else QSystemTrayIcon.MessageIcon.Information
            )
            self.showMessage("s2s-desktop", text, icon, 6000)

    def _message_clicked(self) -> None:
        if self.clicked_action is not None and self.clicked_action.isVisible():
            self.clicked_action.trigger()

    def _activated(self, reason) -> None:
        # a plain click opens the conversation; the menu has everything else
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.actions.conversation.trigger()
