"""The "NVIDIA GPU libraries" group of the Compute tab: whether NVIDIA's cuBLAS (and cuDNN) for
faster-whisper are installed, what a download would fetch, install with progress and cancel,
remove. The Qt-free `cuda` package does the work in a BackgroundTask thread; the index is asked only
when the user clicks, so opening Settings offline costs nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
)

from ..cuda import INSTALL_HINT, CudaCancelled, CudaError, CudaUnsupported, install, store, wheels
from ..cuda.install import Plan
from ..cuda.store import CudaStatus
from ..models.download import DownloadCancelled, DownloadProgress, human_size
from .tasks import ERROR_STYLE, BackgroundTask, ProgressWidgets, progress_text

TITLE = "NVIDIA GPU libraries"
GUI_HINT = "click Install again"  # in place of the CLI's `s2s-desktop cuda install` advice
CANCELLED = (
    "Cancelled: nothing was installed. What was downloaded is kept: Install continues from there."
)


class CudaTask(BackgroundTask):
    # the cuda package reports a cancel as CudaCancelled (a CudaError): "cancelled", not an error
    cancelled_errors = (CudaCancelled, DownloadCancelled)


def gui_message(text: str) -> str:
    """The cuda package's message (written for the CLI's "error: ...") as a sentence here."""
    text = text.replace(INSTALL_HINT, GUI_HINT)
    return text[:1].upper() + text[1:]


def partial_bytes() -> int:
    """Wheels a cancelled or cut install left in the cache (kept for a resume)."""
    folder = store.download_dir()
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def versions_text(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


def plan_text(plan: Plan) -> str:
    if plan.up_to_date:
        return "These versions are installed already: nothing to download."
    # two lines: with the progress below, more would not fit the Compute tab
    packages = ", ".join(
        f"{w.package.name} {w.package.version} ({human_size(w.size)})" for w in plan.wheels
    )
    return (
        f"{packages}\nDownload {human_size(plan.download_bytes)} from {wheels.host_of(plan.index)}; "
        f"about {human_size(plan.disk_bytes)} on disk ({human_size(plan.free_bytes)} free)"
    )


class CudaLibrariesBox(QGroupBox):
    def __init__(self, gpu_count: int | None = None, parent=None):
        super().__init__(TITLE, parent)
        self.gpu_count = gpu_count
        self.task: CudaTask | None = None
        self.plan: Plan | None = None  # the last one asked of the index, for the progress bar
        self.unsupported = ""
        try:
            wheels.platform_key()
        except CudaUnsupported as exc:
            self.unsupported = str(exc)

        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # what a download would fetch, once asked for; short lines, unwrapped: a wrapped label
        # in a tab gets less height than its lines need
        self.details = QLabel("")
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        shown = ProgressWidgets()
        self.bar, self.progress_label, self.message = shown.bar, shown.label, shown.message
        self.progress_label.setWordWrap(True)

        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        for key, label, slot in (
            ("check", "Show Download Size", self.check),
            ("install", "Install", self.install),
            ("cancel", "Cancel", self.cancel),
            ("remove", "Remove…", self.remove),
        ):
            button = QPushButton(label)
            button.clicked.connect(slot)
            self.buttons[key] = button
            row.addWidget(button)
        row.addWidget(self.bar, 1)  # beside the buttons: the Compute tab has little height left
        row.addStretch(0)  # takes the room while the bar is hidden, so the buttons stay compact

        layout = QVBoxLayout(self)
        layout.setSpacing(4)  # tight, so the download's progress fits without scrolling
        layout.addWidget(self.status)
        layout.addWidget(self.details)
        layout.addLayout(row)
        layout.addWidget(self.progress_label)
        layout.addWidget(self.message)
        self._show_progress(False)
        self.details.hide()
        self.message.hide()
        self.refresh()

    # ------------------------------------------------------------------ state
    def refresh(self) -> None:
        busy = self.task is not None
        if self.unsupported:
            self.status.setText(f"Not needed on this platform: {self.unsupported}.")
            for button in self.buttons.values():
                button.hide()
            return
        st = store.status()
        outdated = False
        with contextlib.suppress(CudaUnsupported):  # an old CTranslate2: Install says why
            wanted = wheels.required_packages(wheels.ctranslate2_version())
            outdated = st.installed and not st.has(wanted)
        if st.installed:
            text = (
                f"Installed: {versions_text(st.versions)} ({human_size(st.size_bytes)} in "
                f"{st.folder}). faster-whisper uses them on a cuda or auto device."
            )
            if outdated:
                text += " This version of the app wants newer ones: Update downloads them."
        elif st.problem:
            text = f"Installed but not usable: {gui_message(st.problem)}"
        else:
            text = (
                "Not installed. Speech to text (faster-whisper) needs them to run on an NVIDIA "
                "GPU: Install downloads NVIDIA's cuBLAS (and cuDNN where needed) from PyPI."
            )
            if self.gpu_count == 0:
                text += " No NVIDIA GPU was found on this computer."
        if busy and self.task.kind == "install":
            text = "Installing…"  # one line: the progress needs the room
        self.status.setText(text)
        self.status.setStyleSheet(ERROR_STYLE if st.problem and not busy else "")
        self.buttons["install"].setText(
            "Update" if outdated else "Install Again" if st.problem else "Install"
        )
        no_gpu = self.gpu_count == 0  # nothing to install for: no NVIDIA GPU found
        self.buttons["install"].setEnabled(not busy and not no_gpu and (outdated or not st.installed))
        self.buttons["install"].setToolTip("No NVIDIA GPU was found on this computer" if no_gpu else "")
        self.buttons["check"].setEnabled(not busy and not st.installed)
        self.buttons["cancel"].setEnabled(busy and self.task.kind == "install")
        self.buttons["remove"].setEnabled(not busy and (st.folder.exists() or partial_bytes() > 0))

    def say(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else "")
        self.message.setVisible(bool(text))

    def _show_plan(self, plan: Plan) -> None:
        self.plan = plan
        self.details.setText(plan_text(plan))
        self.details.setToolTip(
            "\n".join(f"{w.package.name}: {w.package.what}" for w in plan.wheels)
        )
        self.details.show()

    def _show_progress(self, shown: bool) -> None:
        self.bar.setVisible(shown)
        self.progress_label.setVisible(shown)
        if not shown:
            self.bar.setValue(0)
            self.progress_label.setText("")

    # ------------------------------------------------------------------ tasks
    def _start(self, kind: str, fn: Callable, done: Callable) -> None:
        task = CudaTask(kind, TITLE, fn, self)
        task.progress.connect(self._progress)
        task.succeeded.connect(done)
        task.failed.connect(self._failed)
        task.finished.connect(self._task_finished)
        self.task = task
        self.refresh()
        task.start()

    def _task_finished(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.deleteLater()
        self.refresh()

    def _failed(self, kind: str, message: str) -> None:
        self._show_progress(False)
        if kind == "cancelled":
            self.say(CANCELLED)
        else:
            self.say(gui_message(message), error=True)

    def _progress(self, p) -> None:
        if isinstance(p, Plan):  # the install's own plan comes first: show what it fetches
            self._show_plan(p)
            self.say("")
            return
        wheels = {w.filename: w for w in self.plan.wheels} if self.plan else {}
        wheel = wheels.get(p.name)
        name = f"{wheel.package.name} {wheel.package.version}" if wheel else p.name
        step = "Downloading" if p.step == "download" else "Unpacking"
        label = f"{step} {name} ({p.index} of {p.count})"
        if p.step == "download" and self.plan and self.plan.download_bytes:
            # one bar for all the wheels: the bytes of the earlier ones count as done
            before = sum(w.size for w in self.plan.wheels[: p.index - 1])
            fraction = (before + p.done) / self.plan.download_bytes
        else:
            fraction = p.fraction if p.step == "download" else 1.0  # unpacking is quick
        self.bar.setValue(min(1000, int(1000 * (fraction or 0.0))))
        if p.step == "download":
            label = progress_text(DownloadProgress(label, p.done, p.total, p.speed_bps))
        elif p.fraction is not None:
            label += f": {100 * p.fraction:.0f}%"
        self.progress_label.setText(label)

    # ------------------------------------------------------------------ actions
    def check(self) -> None:
        if self.task is not None or self.unsupported:
            return
        self.say("Asking the index what to download…")
        self._start("check", lambda progress, cancel: install.plan(), self._checked)

    def _checked(self, plan: Plan) -> None:
        self._show_plan(plan)
        self.say("")

    def install(self) -> None:
        if self.task is not None or self.unsupported:
            return
        self.say("Asking the index what to download…")
        self.bar.setValue(0)
        self._show_progress(True)

        def fetch(progress, cancel):
            plan = install.plan()  # fresh: what is installed may have changed since a check
            progress(plan)
            return install.install(progress=progress, cancel=cancel, from_plan=plan)

        self._start("install", fetch, self._installed)

    def _installed(self, st: CudaStatus) -> None:
        self._show_progress(False)
        self.details.hide()
        self.say(
            "Done. Speech to text uses them the next time it loads on a cuda or auto device, "
            "at the latest when the app restarts."
        )

    def cancel(self) -> None:
        if self.task is not None and self.task.kind == "install":
            self.task.cancel.set()
            self.progress_label.setText("Cancelling…")

    def remove(self) -> None:
        if self.task is not None:
            return
        st = store.status()
        if st.folder.exists():
            question = (
                f"Delete {st.folder} ({human_size(st.size_bytes)})? Speech to text then runs "
                "on the CPU until they are installed again."
            )
        else:
            question = (
                f"Delete the partly downloaded libraries in {store.download_dir()} "
                f"({human_size(partial_bytes())})? Install then starts from the beginning."
            )
        answer = QMessageBox.question(
            self,
            "Remove the NVIDIA GPU libraries",
            question,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        try:
            freed = store.remove()
        except CudaError as exc:
            self.say(gui_message(str(exc)), error=True)
        else:
            self.say(f"Removed ({human_size(freed)} freed).")
        self.details.hide()
        self.refresh()

    def stop(self) -> None:
        """Settings closing mid-download: stop it (Install resumes later)."""
        if self.task is not None:
            self.task.cancel.set()
            self.task.wait(5000)
