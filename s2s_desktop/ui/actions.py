"""The app's controls as QActions, shared by the tray menu and the floating window, so both
offer the same things and show the same labels."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from ..controller import LISTENING, LOADING, SPEAKING, THINKING

TALK_LABELS = {
    LISTENING: "Stop and Send",
    THINKING: "Talk (interrupts)",
    SPEAKING: "Talk (interrupts)",
}


class AppActions(QObject):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.talk = QAction("Talk", self)
        self.conversation = QAction("Conversation…", self)
        self.new_conversation = QAction("New Conversation", self)
        self.new_conversation.setToolTip(
            "Start over: the assistant forgets the earlier questions (the history stays)"
        )
        self.settings = QAction("Settings…", self)
        self.models = QAction("Models…", self)
        self.pause_hotkey = QAction("Pause Hotkey", self, checkable=True)
        self.hands_free = QAction("Hands-free Conversation", self, checkable=True)
        self.hands_free.setToolTip(
            "Talk without the key: the microphone stays open (echo-cancelled), the answer "
            "comes when you finish, your voice interrupts it; off after a while of silence. "
            "A double tap of the talk key does the same"
        )
        self.quit = QAction("Quit", self)
        self.talk.setToolTip("Start talking; choose again to send")
        self.pause_hotkey.setToolTip("Ignore the global hotkey until unchecked")

    def all(self) -> list[QAction]:
        return [
            self.talk,
            self.hands_free,
            self.conversation,
            self.new_conversation,
            self.settings,
            self.models,
            self.pause_hotkey,
            self.quit,
        ]

    def fill_menu(self, menu: QMenu) -> QAction:
        """The tray's menu (and the floating window's right-click one): the state line first,
        greyed, then the controls. Returns the state line."""
        status = menu.addAction("s2s-desktop")
        status.setEnabled(False)  # menu bars that never show tooltips (macOS) still say it
        menu.addSeparator()
        for action in self.all():
            if action is self.pause_hotkey or action is self.quit:
                menu.addSeparator()
            menu.addAction(action)
        return status

    def insert_after_talk(self, menu: QMenu, extras: list[QAction]) -> None:
        after_talk = menu.actions()[menu.actions().index(self.talk) + 1]
        for action in extras:
            menu.insertAction(after_talk, action)

    def show_hands_free(self, on: bool) -> None:
        if self.hands_free.isChecked() != on:
            self.hands_free.blockSignals(True)  # showing the mode does not toggle it again
            self.hands_free.setChecked(on)
            self.hands_free.blockSignals(False)

    def show_state(self, state: str) -> None:
        self.talk.setText(TALK_LABELS.get(state, "Talk"))
        self.talk.setEnabled(state != LOADING)
