"""Settings → General rows for dictation: its own shortcut (empty = off) and the optional
clean-up of the dictated text by the LLM."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QFormLayout, QHBoxLayout, QPushButton

from .form_fields import Fields
from .hotkey_edit import HotkeyEdit


def add_dictation_rows(form: QFormLayout, fields: Fields) -> HotkeyEdit:
    edit = fields.bind("hotkey.dictation_combo", HotkeyEdit())
    edit.setToolTip("Hold these keys and speak: the words are typed where your cursor is, "
                    "not answered. Empty: no dictation key.")
    off = QPushButton("Off")
    off.setToolTip("No dictation key")
    off.clicked.connect(lambda: edit.set_combo(""))
    row = QHBoxLayout()
    row.addWidget(edit, 1)
    row.addWidget(off)
    form.addRow("Dictation shortcut:", row)
    form.addRow("", fields.bind("assistant.dictation_cleanup", QCheckBox(
        "Let the language model fix punctuation and drop filler words in dictation")))
    return edit
