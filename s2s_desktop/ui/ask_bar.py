"""The conversation window's bottom row: a box to type a question (Enter sends) and a Stop
button that silences the reply (Esc in the window does the same)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPushButton, QWidget

from ..states import AppState


class AskBar(QWidget):
    asked = Signal(str)  # a typed question, stripped, never empty
    stop_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.input = QLineEdit()
        self.input.setPlaceholderText("Type a question and press Enter")
        self.input.setClearButtonEnabled(True)
        self.input.returnPressed.connect(self._send)
        self.send_button = QPushButton("Ask")
        self.send_button.setToolTip("Send the typed question (Enter)")
        self.send_button.clicked.connect(self._send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop speaking; the reply is kept as far as it was spoken (Esc)")
        self.stop_button.clicked.connect(self.stop_requested)
        self.stop_button.setEnabled(False)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.input, 1)
        row.addWidget(self.send_button)
        row.addWidget(self.stop_button)

    def show_state(self, state: str) -> None:
        self.stop_button.setEnabled(AppState(state).answering)

    def _send(self) -> None:
        text = " ".join(self.input.text().split())
        if not text:
            self.input.setFocus()
            return
        self.input.clear()
        self.asked.emit(text)
