"""First-run help: which permissions the app needs and a button to open each settings pane.

macOS asks for the microphone itself (with the Info.plist usage string) the first time the app
records, but the global talk key needs Input Monitoring, and on some versions Accessibility,
which the user must switch on by hand in System Settings; an app that silently hears no key
looks broken. Windows has one such switch: "Let desktop apps access your microphone".
Shown once: a marker file in the settings folder records that the user has seen it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
)

MARKER_NAME = "first-run-seen"
_MAC_PRIVACY = "x-apple.systempreferences:com.apple.preference.security?"


@dataclass(frozen=True)
class Permission:
    key: str
    title: str
    why: str
    url: str  # the settings pane that grants it


PERMISSIONS: dict[str, tuple[Permission, ...]] = {
    "darwin": (
        Permission(
            "microphone",
            "Microphone",
            "to hear you while you hold the talk key. macOS asks the first time; if you "
            "said no, switch S2S Desktop on here.",
            _MAC_PRIVACY + "Privacy_Microphone",
        ),
        Permission(
            "input-monitoring",
            "Input Monitoring",
            "so the talk key works while another app is in front. Add S2S Desktop and "
            "switch it on, then restart the app.",
            _MAC_PRIVACY + "Privacy_ListenEvent",
        ),
        Permission(
            "accessibility",
            "Accessibility",
            "needed by some macOS versions for the same global talk key. Switch S2S Desktop "
            "on if the key still does nothing.",
            _MAC_PRIVACY + "Privacy_Accessibility",
        ),
    ),
    "win32": (
        Permission(
            "microphone",
            "Microphone",
            'to hear you. If "Let desktop apps access your microphone" is off, Windows '
            "gives the app silence.",
            "ms-settings:privacy-microphone",
        ),
    ),
}


def permissions_for(platform: str = sys.platform) -> tuple[Permission, ...]:
    return PERMISSIONS.get(platform, ())


def should_show_first_run(settings_dir: str | os.PathLike, platform: str = sys.platform) -> bool:
    """True on a platform with permissions to explain, until the user has seen the help once."""
    return bool(permissions_for(platform)) and not (Path(settings_dir) / MARKER_NAME).exists()


def mark_first_run_seen(settings_dir: str | os.PathLike) -> None:
    folder = Path(settings_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER_NAME).write_text("seen\n", encoding="utf-8")


def open_url(url: str, platform: str = sys.platform) -> None:
    """Open a settings pane: `open` on macOS, the shell's URL handler on Windows."""
    if platform == "darwin":
        subprocess.Popen(["open", url])
    elif platform == "win32":
        os.startfile(url)  # noqa: S606 (ms-settings: is a shell URL, not a program)
    else:
        subprocess.Popen(["xdg-open", url])


class FirstRunDialog(QDialog):
    """The permissions, one row each: what it is for and a button to its settings pane."""

    def __init__(self, settings_dir: str | os.PathLike, platform: str = sys.platform, parent=None):
        super().__init__(parent)
        self.settings_dir = Path(settings_dir)
        self.platform = platform
        self.setWindowTitle("Welcome")  # Qt appends the app name
        self.setMinimumWidth(520)

        intro = QLabel(
            "<b>Hold the talk key, ask your question, let go.</b> Everything runs on this "
            "computer. For that, S2S Desktop needs these permissions:"
        )
        intro.setWordWrap(True)
        grid = QGridLayout()
        self.buttons: dict[str, QPushButton] = {}
        for row, perm in enumerate(permissions_for(platform)):
            text = QLabel(f"<b>{perm.title}</b>: {perm.why}")
            text.setWordWrap(True)
            text.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
            button = QPushButton(f"Open {perm.title} settings")
            button.setObjectName(f"open-{perm.key}")
            button.clicked.connect(lambda _=False, url=perm.url: open_url(url, self.platform))
            self.buttons[perm.key] = button
            grid.addWidget(text, row, 0)
            grid.addWidget(button, row, 1, Qt.AlignmentFlag.AlignTop)
        grid.setColumnStretch(0, 1)

        self.dont_show = QCheckBox("Don't show this again")
        self.dont_show.setChecked(True)
        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok)
        box.button(QDialogButtonBox.StandardButton.Ok).setText("Done")
        box.accepted.connect(self.accept)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(grid)
        layout.addWidget(self.dont_show)
        layout.addWidget(box)

    def done(self, result: int) -> None:  # Done, Esc and the close box all land here
        if self.dont_show.isChecked():
            mark_first_run_seen(self.settings_dir)
        super().done(result)


def show_first_run_if_needed(settings_dir: str | os.PathLike, parent=None) -> FirstRunDialog | None:
    """Open the help (non-modal) when it is due; the caller keeps the returned dialog alive."""
    if not should_show_first_run(settings_dir):
        return None
    dialog = FirstRunDialog(settings_dir, parent=parent)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    dialog.raise_()
    return dialog
