"""Settings → General row: free the models' memory after the app has been idle a while."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QFormLayout

from .form_fields import Fields

CHOICES = ((0, "Never"), (5, "After 5 minutes idle"), (15, "After 15 minutes idle"),
           (60, "After an hour idle"))


def add_unload_row(form: QFormLayout, fields: Fields) -> QComboBox:
    box = QComboBox()
    for minutes, label in CHOICES:
        box.addItem(label, minutes)
    box.setToolTip("Unload the models when unused; the next question loads them again first "
                   "(a few seconds, shown as Loading)")
    form.addRow("Free memory:", fields.bind("ui.unload_after_minutes", box))
    return box
