"""The question before a writing tool runs ("Shall I save the note 'buy milk'?"), with Allow
and Deny, on top of the other windows. Asked from the LLM stage's thread, which waits for the
answer; a spoken yes or no (the controller holds the talk key's recording, `answer()`), a
click, or no answer within WAIT_S or Stop (a no) settles it."""

from __future__ import annotations

import threading

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import QMessageBox

WAIT_S = 60.0
POLL_S = 0.1
HOW_TO_ANSWER = "Say yes or no (hold the talk key), or click Allow / Deny."


class _Answer:
    def __init__(self):
        self.given = threading.Event()
        self.allowed = False


class _NoKeys(QObject):
    """Drops every key but Escape."""

    def eventFilter(self, watched, event) -> bool:
        if event.type() in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease,
                            QEvent.Type.ShortcutOverride):
            return event.key() != Qt.Key.Key_Escape
        return False


class ToolPermission(QObject):
    asked = Signal()  # a question is up (the talk key now answers it)
    settled = Signal()  # it was answered, or Stop or the time limit said no
    _show = Signal(str, object)  # the question, its _Answer
    _close = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._boxes: dict[int, QMessageBox] = {}
        self._waiting: _Answer | None = None  # the question a spoken answer settles
        self._no_keys = _NoKeys(self)
        self._show.connect(self._open, Qt.ConnectionType.QueuedConnection)
        self._close.connect(self._dismiss, Qt.ConnectionType.QueuedConnection)

    def ask(self, tool, call, stop: threading.Event) -> bool:
        """Any thread but the GUI's: show the question and wait for Allow or Deny."""
        answer = _Answer()
        self._show.emit(tool.question(call.arguments), answer)
        waited = 0.0
        try:
            while not answer.given.wait(POLL_S):
                waited += POLL_S
                if stop.is_set() or waited >= WAIT_S:
                    self._close.emit(answer)
                    return False
            return answer.allowed
        finally:
            self.settled.emit()

    def answer(self, allowed: bool) -> None:
        """GUI thread: the user's spoken yes or no settles the question that is up."""
        answer, self._waiting = self._waiting, None
        if answer is None or answer.given.is_set():
            return
        answer.allowed = allowed
        answer.given.set()
        self._dismiss(answer)

    def _open(self, question: str, answer: _Answer) -> None:
        if answer.given.is_set():
            return  # settled (Stop) before it could be shown
        box = QMessageBox(QMessageBox.Icon.Question, "s2s-desktop", question)
        box.setInformativeText(HOW_TO_ANSWER)
        allow = box.addButton("Allow", QMessageBox.ButtonRole.AcceptRole)
        deny = box.addButton("Deny", QMessageBox.ButtonRole.RejectRole)
        box.setWindowFlag(Qt.WindowType.WindowStaysOnTopHint)
        # keys never answer it (Escape denies): held under the pointer, the talk key's Space
        # (X repeats a held key) pressed the focused Allow; only a click or a spoken yes allows
        box.setWindowFlag(Qt.WindowType.WindowDoesNotAcceptFocus)
        box.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        for widget in (box, allow, deny):
            widget.installEventFilter(self._no_keys)
        for button in (allow, deny):
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            button.setAutoDefault(False)
        box.setEscapeButton(deny)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def done(_result: int) -> None:
            if not answer.given.is_set():  # a click (a spoken answer set it already)
                answer.allowed = box.clickedButton() is allow
                answer.given.set()
            self._boxes.pop(id(answer), None)
            if self._waiting is answer:
                self._waiting = None

        box.finished.connect(done)
        self._boxes[id(answer)] = box
        self._waiting = answer
        box.open()
        self.asked.emit()

    def _dismiss(self, answer: _Answer) -> None:
        if self._waiting is answer:
            self._waiting = None
        box = self._boxes.pop(id(answer), None)
        if box is not None:
            box.close()
