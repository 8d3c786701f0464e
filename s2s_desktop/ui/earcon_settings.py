"""Settings → Audio rows for the earcons: on/off and their volume."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QFormLayout, QHBoxLayout

from .form_fields import Fields


def add_earcon_rows(form: QFormLayout, fields: Fields) -> tuple[QCheckBox, QDoubleSpinBox]:
    on = fields.bind("audio.earcons", QCheckBox("Play a short sound when listening starts "
                                                "and stops, and when a turn fails"))
    on.setToolTip("The start sound is never part of your question: speak after it")
    volume = fields.bind("audio.earcon_volume", QDoubleSpinBox())
    volume.setRange(0.0, 1.0)
    volume.setSingleStep(0.1)
    volume.setDecimals(2)
    volume.setToolTip("0 is silent, 1 is the sounds' full level")
    on.toggled.connect(volume.setEnabled)
    row = QHBoxLayout()
    row.addWidget(volume)
    row.addStretch(1)
    form.addRow("", on)
    form.addRow("Sound volume:", row)
    return on, volume
