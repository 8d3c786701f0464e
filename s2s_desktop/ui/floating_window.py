"""Where the desktop has no tray: a small always-on-top window with the same controls. Its Talk
button works like the hotkey — hold it while you speak (or click twice in toggle mode)."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from .actions import AppActions
from .icons import state_icon
from .tray import STATE_WORDS, tooltip_text


class FloatingWindow(QWidget):
    talk_pressed = Signal()
    talk_released = Signal()

    def __init__(self, actions: AppActions, level=None, parent=None):
        super().__init__(parent, Qt.WindowType.Window | Qt.WindowType.WindowStaysOnTopHint)
        self.setWindowTitle("s2s-desktop")
        self.setWindowIcon(state_icon("idle"))
        self.actions = actions
        self._level = level  # callable -> 0..1, polled for the meter while listening

        self.icon = QLabel()
        self.icon.setFixedSize(32, 32)
        self.state_label = QLabel()
        self.state_label.setStyleSheet("font-weight: 600")
        self.detail_label = QLabel()
        self.detail_label.setWordWrap(True)
        self.detail_label.setStyleSheet("color: palette(mid)")
        self.meter = QProgressBar()
        self.meter.setRange(0, 100)
        self.meter.setTextVisible(False)
        self.meter.setFixedHeight(6)
        self.meter.setVisible(False)

        self.talk = QPushButton("Talk")
        self.talk.setMinimumHeight(36)
        self.talk.setToolTip("Hold while you speak")
        self.talk.pressed.connect(self.talk_pressed)
        self.talk.released.connect(self.talk_released)

        top = QHBoxLayout()
        top.addWidget(self.icon)
        words = QVBoxLayout()
        words.addWidget(self.state_label)
        words.addWidget(self.detail_label)
        top.addLayout(words, 1)
        tools = QHBoxLayout()
        self.tool_buttons = {}
        for action in (
            actions.conversation,
            actions.settings,
            actions.models,
            actions.pause_hotkey,
            actions.quit,
        ):
            button = QToolButton()
            button.setDefaultAction(action)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            tools.addWidget(button)
            self.tool_buttons[action.text()] = button
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.meter)
        layout.addWidget(self.talk)
        layout.addLayout(tools)

        self._meter_timer = QTimer(self, interval=50)
        self._meter_timer.timeout.connect(self._update_meter)
        self.show_state("loading", "")

    def show_state(self, state: str, detail: str, hotkey: dict | None = None) -> None:
        self.icon.setPixmap(state_icon(state).pixmap(32, 32))
        self.state_label.setText(STATE_WORDS.get(state, state))
        # the detail line: what failed, the loading progress, or how to talk
        lines = tooltip_text(state, detail, hotkey).split("\n")[1:]
        self.detail_label.setText("\n".join(lines))
        self.talk.setEnabled(state != "loading")
        self.talk.setText(
            {
                "listening": "Listening… (release to send)",
                "thinking": "Talk (interrupts)",
                "speaking": "Talk (interrupts)",
            }.get(state, "Talk")
        )
        listening = state == "listening"
        self.meter.setVisible(listening)
        if listening and self._level is not None:
            self._meter_timer.start()
        else:
            self._meter_timer.stop()
            self.meter.setValue(0)

    def set_talk_hint(self, text: str) -> None:
        self.talk.setToolTip(text)

    def show_notice(self, text: str, error: bool = False) -> None:
        self.detail_label.setText(text)

    def _update_meter(self) -> None:
        level = float(self._level()) if self._level is not None else 0.0
        self.meter.setValue(int(min(1.0, level * 4) * 100))  # speech RMS ≈ 0.05–0.25
