"""The app's side of the global hotkey: runs the helper process and turns its lines into Qt
signals. When there is no way to watch the keyboard (no display, Wayland, no pynput, macOS
without Accessibility access) it says so once, naming `s2s-desktop toggle`."""

from __future__ import annotations

import logging
import os
import sys

from PySide6.QtCore import QObject, QProcess, QTimer, Signal

from ..config import HotkeySettings
from ..errors import SettingsError
from .combo import format_combo, parse_combo

log = logging.getLogger(__name__)

FALLBACK = (
    "use Talk in the tray menu, or bind a system shortcut to `s2s-desktop toggle` "
    "(or talk-start / talk-stop for hold-to-talk)"
)
MAX_RESTARTS = 3


def wayland_session() -> bool:
    return sys.platform.startswith("linux") and (
        os.environ.get("XDG_SESSION_TYPE", "").lower() == "wayland"
        or (bool(os.environ.get("WAYLAND_DISPLAY")) and not os.environ.get("DISPLAY"))
    )


def helper_command(combo: str) -> list[str]:
    if getattr(sys, "frozen", False):  # a bundle: the executable runs the helper by flag
        return [sys.executable, "--hotkey-listener", "--combo", combo]
    return [sys.executable, "-m", "s2s_desktop.hotkey.listener", "--combo", combo]


class HotkeyClient(QObject):
    pressed = Signal(float)  # monotonic time of the event in the helper
    released = Signal(float)
    unavailable = Signal(str)  # a notice: why there is no global hotkey, what to use instead
    ready = Signal(str)  # the combo now watched

    def __init__(self, settings: HotkeySettings, parent=None):
        super().__init__(parent)
        self.settings = settings
        self.paused = False
        self.available = False
        self.problem = ""
        self.combo = ""
        self._proc: QProcess | None = None
        self._buffer = b""
        self._restarts = 0
        self._stopping = False

    def info(self) -> dict:
        return {
            "combo": self.combo or self.settings.combo,
            "mode": self.settings.mode,
            "enabled": self.settings.enabled,
            "paused": self.paused,
            "available": self.available,
            "problem": self.problem,
        }

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.stop()
        self._stopping = False
        if not self.settings.enabled:
            self.problem = "the global hotkey is turned off (hotkey.enabled)"
            return
        try:
            self.combo = format_combo(parse_combo(self.settings.combo))
        except SettingsError as exc:
            self._give_up(str(exc))
            return
        if wayland_session():
            # XWayland only sees keys typed into X11 windows: a global hotkey cannot work
            self._give_up("global hotkeys are not available on Wayland")
            return
        proc = QProcess(self)
        proc.setProcessChannelMode(QProcess.ProcessChannelMode.ForwardedErrorChannel)
        proc.readyReadStandardOutput.connect(self._read)
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._process_error)
        program, *args = helper_command(self.combo)
        self._proc = proc
        self._buffer = b""
        proc.start(program, args)

    def stop(self) -> None:
        self._stopping = True
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.state() != QProcess.ProcessState.NotRunning:
            proc.closeWriteChannel()  # the helper exits when its stdin closes
            if not proc.waitForFinished(1000):
                proc.kill()
                proc.waitForFinished(1000)
        proc.deleteLater()
        self.available = False

    def restart(self, settings: HotkeySettings) -> None:
        self.settings = settings
        self._restarts = 0
        self.problem = ""
        self.start()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused

    # ------------------------------------------------------------------ helper output
    def _read(self) -> None:
        proc = self.sender()
        if not isinstance(proc, QProcess) or proc is not self._proc:
            return
        self._buffer += bytes(proc.readAllStandardOutput())
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            self._line(raw.decode("utf-8", "replace").strip())

    def _line(self, line: str) -> None:
        word, _, rest = line.partition(" ")
        if word in ("press", "release"):
            if self.paused:
                return
            try:
                at = float(rest)
            except ValueError:
                at = -1.0
            (self.pressed if word == "press" else self.released).emit(at)
        elif word == "ready":
            self.available, self.problem = True, ""
            self._restarts = 0
            log.info("global hotkey ready: %s", rest)
            self.ready.emit(rest)
        elif word == "error":
            self._give_up(rest)

    def _give_up(self, why: str) -> None:
        self.available = False
        if why == self.problem:
            return
        self.problem = why
        log.warning("global hotkey unavailable: %s", why)
        self.unavailable.emit(f"No global hotkey: {why}. Instead, {FALLBACK}.")

    def _finished(self, code: int, status) -> None:
        proc = self.sender()
        if self._stopping or proc is not self._proc:
            return
        self.available = False
        if self.problem:  # it said why; restarting would say the same
            return
        if self._restarts < MAX_RESTARTS:
            self._restarts += 1
            log.warning("hotkey helper ended (code %s); restarting", code)
            QTimer.singleShot(500 * self._restarts, self.start)
        else:
            self._give_up("the hotkey helper keeps stopping")

    def _process_error(self, error) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._give_up(
                f"the hotkey helper could not start ({self._proc.errorString()})"
                if self._proc
                else "the hotkey helper could not start"
            )
