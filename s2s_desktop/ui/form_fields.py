"""Settings keys bound to widgets: one table says which widget shows `llm.max_new_tokens`, so
loading a Settings tree into the dialog and reading it back are two loops, not two long lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from .. import config

MISSING_SUFFIX = " (not available here)"


def combo_value(box: QComboBox) -> Any:
    """The item's data; for an editable box, the typed text unless it is an item's label."""
    if box.isEditable():
        text = box.currentText().strip()
        i = box.findText(text)
        return box.itemData(i) if i >= 0 else text
    return box.currentData()


def set_combo_value(box: QComboBox, value: Any, missing: str = MISSING_SUFFIX) -> None:
    """Select the item holding `value`; a value with no item is kept visible, never dropped."""
    i = box.findData(value)
    if i >= 0:
        box.setCurrentIndex(i)
    elif box.isEditable():
        box.setEditText(str(value))
    else:
        box.addItem(f"{value}{missing}", value)
        box.setCurrentIndex(box.count() - 1)


def getter_setter(widget: QWidget) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    if hasattr(widget, "combo") and hasattr(widget, "set_combo"):  # HotkeyEdit
        return widget.combo, widget.set_combo
    if isinstance(widget, QCheckBox):
        return widget.isChecked, lambda v: widget.setChecked(bool(v))
    if isinstance(widget, QSpinBox):
        return widget.value, lambda v: widget.setValue(int(v))
    if isinstance(widget, QDoubleSpinBox):
        return widget.value, lambda v: widget.setValue(float(v))
    if isinstance(widget, QPlainTextEdit):
        return widget.toPlainText, widget.setPlainText
    if isinstance(widget, QLineEdit):
        return lambda: widget.text().strip(), lambda v: widget.setText(str(v))
    if isinstance(widget, QComboBox):
        return lambda: combo_value(widget), lambda v: set_combo_value(widget, v)
    raise TypeError(f"no binding for {type(widget).__name__}")


class Fields:
    """Dotted settings keys → widgets."""

    def __init__(self):
        self.widgets: dict[str, QWidget] = {}
        self._access: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {}

    def bind(self, key: str, widget: QWidget) -> QWidget:
        self.widgets[key] = widget
        self._access[key] = getter_setter(widget)
        return widget

    def get(self, key: str) -> Any:
        return self._access[key][0]()

    def set(self, key: str, value: Any) -> None:
        if key in self._access:
            self._access[key][1](value)

    def load(self, settings: config.Settings) -> None:
        for key in self.widgets:
            self.set(key, config.get_key(settings, key))

    def store(self, settings: config.Settings) -> None:
        """Write every bound widget into `settings` (types coerced; SettingsError if bad)."""
        for key in self.widgets:
            config.set_key(settings, key, self.get(key))
