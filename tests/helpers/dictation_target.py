"""A window with one focused text field, for the dictation test: it puts a known text on the
clipboard, then writes what the field holds and what the clipboard holds to a JSON file every
100 ms.

    python -m tests.helpers.dictation_target STATUS.json "clipboard text"
"""

from __future__ import annotations

import json
import os
import sys

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QLineEdit


def main() -> int:
    status_path, before = sys.argv[1], sys.argv[2]
    app = QApplication(sys.argv[:1])
    field = QLineEdit()
    field.setWindowTitle("dictation-target")
    field.resize(700, 40)
    field.show()
    field.activateWindow()
    field.setFocus()
    QGuiApplication.clipboard().setText(before)

    def report() -> None:
        tmp = status_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"field": field.text(), "clipboard": QGuiApplication.clipboard().text(),
                       "focus": field.hasFocus()}, f)
        os.replace(tmp, status_path)

    timer = QTimer(interval=100)
    timer.timeout.connect(report)
    timer.start()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
