"""Work off the GUI thread with progress: the background task, and the progress bar, progress
line and message that the model manager and the NVIDIA GPU libraries group show it with."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from PySide6.QtCore import Qt, QThread, Signal
from PySide6.QtWidgets import QLabel, QProgressBar

from ..errors import S2SError
from ..models.download import DownloadCancelled, DownloadProgress, human_size

log = logging.getLogger(__name__)

ERROR_STYLE = "color: #b00020"


class BackgroundTask(QThread):
    """Runs fn(progress, cancel) off the GUI thread and reports back with signals."""

    progress = Signal(object)  # DownloadProgress, from the worker thread (queued to the GUI)
    succeeded = Signal(object)
    failed = Signal(str, str)  # kind: cancelled | error; the message
    cancelled_errors: tuple[type[Exception], ...] = (DownloadCancelled,)  # reported as "cancelled"

    def __init__(self, kind: str, subject: str, fn: Callable, parent=None):
        super().__init__(parent)
        self.kind, self.subject, self.fn = kind, subject, fn  # "download", the model id
        self.cancel = threading.Event()

    def run(self) -> None:
        try:
            result = self.fn(self.progress.emit, self.cancel)
        except self.cancelled_errors as exc:
            self.failed.emit("cancelled", str(exc))
        except S2SError as exc:
            self.failed.emit("error", str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must reach the user, not kill the thread
            log.exception("%s of %s failed", self.kind, self.subject)
            self.failed.emit("error", f"{self.kind} failed: {type(exc).__name__}: {exc}")
        else:
            self.succeeded.emit(result)


def progress_text(p: DownloadProgress) -> str:
    done = human_size(p.done)
    of = f" of {human_size(p.total)}" if p.total else ""
    speed = f" · {human_size(p.speed_bps)}/s" if p.speed_bps > 0 else ""
    eta = ""
    if p.total and p.speed_bps > 0:
        left = (p.total - p.done) / p.speed_bps
        eta = f" · {left:.0f} s left" if left < 120 else f" · {left / 60:.0f} min left"
    return f"{p.filename}: {done}{of}{speed}{eta}"


_DETACHED: list[BackgroundTask] = []


def start_detached(task: BackgroundTask) -> None:
    """Start a task no window owns (a closed dialog neither waits for it nor destroys a running
    thread); finished ones are let go at the next start, from the GUI thread."""
    _DETACHED[:] = [t for t in _DETACHED if not t.isFinished()]
    _DETACHED.append(task)
    task.start()


class ProgressWidgets:
    """A bar in per mille (byte counts overflow a QProgressBar's int), the line under it and
    the message that says how the task ended."""

    def __init__(self):
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.label = QLabel("")
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
