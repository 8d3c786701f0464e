"""The question before a writing tool runs ("Shall I save the note 'buy milk'?"), with Allow
and Deny, on top of the other windows. Asked from the LLM stage's thread, which waits for the
answer; no answer within WAIT_S, or Stop, is a no."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QMessageBox

WAIT_S = 60.0
POLL_S = 0.1


class _Answer:
    def __init__(self):
        self.given = threading.Event()
        self.allowed = False


class ToolPermission(QObject):
    _show = Signal(str, object)  # the question, its _Answer
    _close = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._boxes: dict[int, QMessageBox] = {}
        self._show.connect(self._open, Qt.ConnectionType.QueuedConnection)
        self._close.connect(self._dismiss, Qt.ConnectionType.QueuedConnection)

    def ask(self, tool, call, stop: threading.Event) -> bool:
        """Any thread but the GUI's: show the question and wait for Allow or Deny."""
        answer = _Answer()
        self._show.emit(tool.question(call.arguments), answer)
        waited = 0.0
        while not answer.given.wait(POLL_S):
            waited += POLL_S
            if stop.is_set() or waited >= WAIT_S:
                self._close.emit(answer)
                return False
        return answer.allowed

    def _open(self, question: str, answer: _Answer) -> None:
        box = QMessageBox(QMessageBox.Icon.Question, "s2s-desktop", question)
        allow = box.addButton("Allow", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Deny", QMessageBox.ButtonRole.RejectRole)
        box.setWindowFlag(Qt.WindowType.WindowStaysOnTopHint)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def done(_result: int) -> None:
            answer.allowed = box.clickedButton() is allow
            answer.given.set()
            self._boxes.pop(id(answer), None)

        box.finished.connect(done)
        self._boxes[id(answer)] = box
        box.open()

    def _dismiss(self, answer: _Answer) -> None:
        box = self._boxes.pop(id(answer), None)
        if box is not None:
            box.close()
