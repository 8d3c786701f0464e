"""Where the desktop has no tray: a small tool window with the same controls, at a screen edge
(or where the user last put it), never kept on top of the app's dialogs. Its Talk button works
like the hotkey — hold it while you speak (or click twice in toggle mode). Right-click opens
the tray's menu; Stop Speaking, Copy Last Answer and running timers have buttons too."""

from __future__ import annotations

import sys

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..states import ASKING_DETAIL, AppState, look
from .actions import AppActions
from .icons import state_icon
from .tasks import ERROR_STYLE
from .tray import STATE_WORDS, cut, menu_status_text, tooltip_text
from .window_state import save_position, saved_position

WIDTH = 320
EDGE_MARGIN = 16
POSITION_KEY = "floating"
MAX_DETAIL_CHARS = 280  # a longer message is cut here; its tooltip has all of it
# a tool window (no taskbar entry) where that is a normal window; macOS hides tool windows
# whenever another app is in front
FLAGS = Qt.WindowType.Window if sys.platform == "darwin" else Qt.WindowType.Tool


class FloatingWindow(QWidget):
    talk_pressed = Signal()
    talk_released = Signal()

    def __init__(self, actions: AppActions, level=None, parent=None):
        super().__init__(parent, FLAGS)
        self.setFixedWidth(WIDTH)
        self.setWindowTitle("s2s-desktop")
        self.setWindowIcon(state_icon(AppState.IDLE))
        self.actions = actions
        self._level = level  # callable -> 0..1, polled for the meter while listening

        self.icon = QLabel()
        self.icon.setFixedSize(32, 32)
        self.state_label = QLabel()
        self.state_label.setStyleSheet("font-weight: 600")
        self.detail_label = QLabel()
        self.detail_label.setWordWrap(True)
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
        # checked while on: the same action as the menu's, a full-width switch under Talk
        self.hands_free = QToolButton()
        self.hands_free.setDefaultAction(actions.hands_free)
        self.hands_free.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.hands_free.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        tools = QGridLayout()
        self.tool_buttons = {}
        for i, action in enumerate(
            (
                actions.conversation,
                actions.new_conversation,
                actions.settings,
                actions.models,
                actions.pause_hotkey,
                actions.quit,
            )
        ):
            button = QToolButton()
            button.setDefaultAction(action)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            tools.addWidget(button, i // 2, i % 2)
            self.tool_buttons[action.text()] = button
        self.extras = QHBoxLayout()  # Stop Speaking, Copy Last Answer, Timers (add_extras)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.meter)
        layout.addWidget(self.talk)
        layout.addWidget(self.hands_free)
        layout.addLayout(self.extras)
        layout.addLayout(tools)
        self.menu = QMenu(self)  # right-click: the tray's menu
        self.status_action = actions.fill_menu(self.menu)

        self._meter_timer = QTimer(self, interval=50)
        self._meter_timer.timeout.connect(self._update_meter)
        self._save_timer = QTimer(self, singleShot=True, interval=400)  # once a drag settles
        self._save_timer.timeout.connect(lambda: save_position(POSITION_KEY, self.x(), self.y()))
        self._placed = False
        self.show_state(AppState.LOADING, "")

    def add_extras(self, extras: list[QAction]) -> None:
        """The everyday actions the tray menu has after Talk: in the menu, and as buttons."""
        self.actions.insert_after_talk(self.menu, extras)
        for action in extras:
            button = QToolButton()
            button.setDefaultAction(action)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            if action.menu() is not None:  # Timers: its menu opens at a click
                button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
            self.extras.addWidget(button)
            self.tool_buttons[action.text()] = button
            # a button follows its action's text and enabled state, not whether it is shown
            button.setHidden(not action.isVisible())
            action.changed.connect(lambda b=button, a=action: self._follow(b, a))
        self.fit_height()

    def add_offer(self, action: QAction) -> None:
        """An offer that comes with a notice ("Download German Voice…"): a full-width button
        under the notice, and in the menu after Talk, while the action is visible."""
        self.actions.insert_after_talk(self.menu, [action])
        button = QToolButton()
        button.setDefaultAction(action)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        button.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        button.setHidden(not action.isVisible())
        self.layout().insertWidget(1, button)  # under the state and the notice
        self.tool_buttons["offer"] = button
        action.changed.connect(lambda: self._follow(button, action))
        self.fit_height()

    def _follow(self, button: QToolButton, action: QAction) -> None:
        if button.isHidden() == action.isVisible():
            button.setHidden(not action.isVisible())
            self.fit_height()

    def contextMenuEvent(self, event) -> None:
        self.menu.popup(event.globalPos())

    # ------------------------------------------------------------------ where it sits
    def showEvent(self, event) -> None:
        if not self._placed:
            self._placed = True
            self.fit_height()
            self.move(self.start_position())
        super().showEvent(event)

    def start_position(self) -> QPoint:
        """Where the user left it (if that is still on a screen), else the bottom-right edge."""
        pos = saved_position(POSITION_KEY)
        if pos is not None:
            point = QPoint(*pos)
            if any(s.availableGeometry().contains(point) for s in QGuiApplication.screens()):
                return point
        screen = QGuiApplication.primaryScreen()
        area = screen.availableGeometry() if screen is not None else None
        if area is None:
            return QPoint(0, 0)
        width = max(self.width(), self.sizeHint().width())
        height = max(self.height(), self.sizeHint().height())
        frame = 24  # the title bar a window manager adds
        return QPoint(
            area.right() - width - EDGE_MARGIN,
            area.bottom() - height - frame - EDGE_MARGIN,
        )

    def moveEvent(self, event) -> None:
        super().moveEvent(event)
        if self._placed and self.isVisible():
            self._save_timer.start()

    def hideEvent(self, event) -> None:
        super().hideEvent(event)
        if self._save_timer.isActive():  # a drag that settles as the window goes: save it now
            self._save_timer.stop()
            save_position(POSITION_KEY, self.x(), self.y())

    def show_state(self, state: str, detail: str, hotkey: dict | None = None,
                   hands_free: bool = False) -> None:
        shown = look(state, hands_free)
        self.icon.setPixmap(state_icon(state, hands_free).pixmap(32, 32))
        self.state_label.setText(shown.label if state in STATE_WORDS else state)
        # the detail line: what failed, the loading progress, or (no error) how to talk
        error = state == AppState.ERROR
        text = tooltip_text(state, detail, None if error else hotkey, hands_free)
        self.status_action.setText(menu_status_text(text))
        self._set_detail("\n".join(text.split("\n")[1:]), error)
        self.talk.setEnabled(state != AppState.LOADING)
        asking = detail.startswith(ASKING_DETAIL)  # a tool's yes/no question is up
        self.talk.setText(
            {
                AppState.LISTENING: "Listening… (release to send)",
                AppState.THINKING: "Hold to say yes or no" if asking else "Talk (interrupts)",
                AppState.SPEAKING: "Hold to say yes or no" if asking else "Talk (interrupts)",
            }.get(state, "Talk")
        )
        listening = state == AppState.LISTENING
        self.meter.setVisible(listening)
        if listening and self._level is not None:
            self._meter_timer.start()
        else:
            self._meter_timer.stop()
            self.meter.setValue(0)

    def show_notice(self, text: str, error: bool = False) -> None:
        self._set_detail(text, error)

    def _set_detail(self, text: str, error: bool = False) -> None:
        shown = cut(text, MAX_DETAIL_CHARS)
        self.detail_label.setText(shown)
        self.detail_label.setToolTip(text if shown != text else "")
        self.detail_label.setStyleSheet(ERROR_STYLE if error else "")
        self.fit_height()

    def fit_height(self) -> None:
        """As tall as the wrapped message needs at the fixed width, and never past the screen
        (a longer message is cut, see MAX_DETAIL_CHARS)."""
        layout = self.layout()
        if layout is None:
            return
        layout.activate()
        height = max(self.minimumSizeHint().height(), self.heightForWidth(WIDTH))
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is not None:
            height = min(height, screen.availableGeometry().height() - 2 * EDGE_MARGIN)
        self.setFixedHeight(height)
        if self._placed and screen is not None:  # grown past the bottom edge: move it up
            area = screen.availableGeometry()
            over = self.frameGeometry().bottom() - (area.bottom() - EDGE_MARGIN)
            if over > 0:
                self.move(self.x(), max(area.top(), self.y() - over))

    def _update_meter(self) -> None:
        level = float(self._level()) if self._level is not None else 0.0
        self.meter.setValue(int(min(1.0, level * 4) * 100))  # speech RMS ≈ 0.05–0.25
