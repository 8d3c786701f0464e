"""The model manager window: the catalog and what is on disk (HF cache, packages, imports) with
sizes, where each lives, whether it is installed and verified, and which are in use (chosen
and on disk). Download (progress in bytes and speed, cancel, resume), use this model, verify,
delete, import, open folder; at first run the recommended models are offered pre-selected.

Downloads and checks run in a QThread (`tasks.BackgroundTask`) calling the Qt-free ModelManager with a
progress callback and a cancel Event; the window only shows what they report."""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from .. import config
from ..errors import S2SError
from ..languages import VoiceOption, coverage_text
from ..models import cache
from ..models.download import DownloadProgress, human_size
from ..models.manager import ModelInfo, ModelManager, VerifyReport
from .icons import app_icon
from .model_texts import in_use_text, size_text, status_text, use_keys, where_text
from .tasks import ERROR_STYLE, BackgroundTask, ProgressWidgets, progress_text

log = logging.getLogger(__name__)

COLUMNS = ("Model", "Stage", "Backend", "Size", "Where", "Status", "In use")
IMPORT_ADVICE = (
    "No connection? Copy the model's files to this computer another way, then "
    "use Import Folder… (or `s2s-desktop models import PATH`)."
)


class ModelManagerWindow(QWidget):
    downloaded = Signal(str)  # model id: its files are now on disk (the app may reload a stage)
    use_model = Signal(object)  # settings keys ({"stt.model": …}) the user chose to run

    def __init__(
        self,
        settings: config.Settings | None = None,
        manager: ModelManager | None = None,
        parent=None,
    ):
        super().__init__(parent)
        self.setWindowTitle("Models")  # Qt appends the app name
        self.setWindowIcon(app_icon())
        self.resize(980, 560)
        self.manager = manager or ModelManager(settings=settings)
        if settings is not None:
            self.manager.settings = settings
        self.models: list[ModelInfo] = []
        self.task: BackgroundTask | None = None
        self.queue: list[str] = []  # offered models still to download, in order

        where = QLabel(
            f"Models are kept in {cache.hf_hub_cache()}, shared with your other Hugging Face tools."
        )
        where.setWordWrap(True)
        self.languages_label = QLabel("")  # which reply languages have a voice
        self.languages_label.setWordWrap(True)
        self.offer_label = QLabel("")
        self.offer_label.setWordWrap(True)
        self.offer_label.setStyleSheet("background: #e8f1fb; padding: 6px")
        self.offer_label.hide()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        shown = ProgressWidgets()
        self.bar, self.progress_label, self.message = shown.bar, shown.label, shown.message

        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        for key, label, slot in (
            ("download", "Download", self.download),
            ("cancel", "Cancel", self.cancel),
            ("use", "Use This Model", self.use_selected),
            ("verify", "Verify", self.verify),
            ("delete", "Delete…", self.delete),
            ("import", "Import Folder…", self.import_folder),
            ("import_file", "Import File…", self.import_file),
            ("open", "Open Folder", self.open_folder),
            ("refresh", "Refresh", self.refresh),
        ):
            button = QPushButton(label)
            button.clicked.connect(slot)
            self.buttons[key] = button
            row.addWidget(button)
            if key in ("delete", "import_file"):
                row.addStretch(1)

        layout = QVBoxLayout(self)
        layout.addWidget(where)
        layout.addWidget(self.languages_label)
        layout.addWidget(self.offer_label)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.details)
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.bar, 1)
        progress_row.addWidget(self.progress_label, 2)
        layout.addLayout(progress_row)
        layout.addLayout(row)
        layout.addWidget(self.message)
        self._show_progress(False)
        self.refresh()

    # ------------------------------------------------------------------ the list
    def refresh(self) -> None:
        keep = self.selected_id()
        try:
            found = self.manager.list()
        except S2SError as exc:
            self.say(str(exc), error=True)
            found = []
        self.models = [m for m in found if m.runs_here or m.installed]
        self.languages_label.setText(coverage_text(
            VoiceOption(m.id, m.name, m.languages, {}, m.installed)
            for m in self.models if m.stage == "tts" and m.languages))
        self.table.setRowCount(len(self.models))
        for r, m in enumerate(self.models):
            cells = (
                m.name,
                m.stage.upper() or "?",
                m.backend or "?",
                size_text(m),
                where_text(m),
                status_text(m),
                in_use_text(m),
            )
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, m.id)
                item.setToolTip(f"{m.id}\n{m.path}" if m.path else m.id)
                if c == 5 and m.verified is False:
                    item.setForeground(Qt.GlobalColor.red)
                self.table.setItem(r, c, item)
        if keep:
            self.select(keep)
        self._selection_changed()

    def set_settings(self, settings: config.Settings) -> None:
        """New settings: the "in use" marks follow them."""
        self.manager.settings = settings
        self.refresh()

    def row_of(self, model_id: str) -> int:
        return next((i for i, m in enumerate(self.models) if m.id == model_id), -1)

    def select(self, model_id: str) -> bool:
        row = self.row_of(model_id)
        if row >= 0:
            self.table.selectRow(row)
        return row >= 0

    def selected(self) -> ModelInfo | None:
        rows = self.selected_all()
        return rows[0] if len(rows) == 1 else None

    def selected_all(self) -> list[ModelInfo]:
        rows = sorted(r.row() for r in self.table.selectionModel().selectedRows())
        return [self.models[r] for r in rows]

    def offer(self, model_ids: list[str], intro: str,
              after: str = "Press Download to fetch them; the starter set answers meanwhile."
              ) -> bool:
        """Pre-select models to download (first run, a voice for a reply's language), show
        the first, say what they need and put the keyboard on Download. False: all are here."""
        found = [m for m in (self.info(i) for i in model_ids) if m is not None and not m.installed]
        if not found:
            return False
        total = sum(m.size_bytes or 0 for m in found)
        names = ", ".join(f"{m.name} ({size_text(m)})" for m in found)
        size = f" Total {human_size(total)}." if len(found) > 1 else ""
        self.offer_label.setText(f"{intro} {names}.{size} {after}")
        self.offer_label.show()
        self.table.clearSelection()
        for m in found:
            self.table.selectionModel().select(
                self.table.model().index(self.row_of(m.id), 0),
                self.table.selectionModel().SelectionFlag.Select
                | self.table.selectionModel().SelectionFlag.Rows,
            )
        first = self.table.item(self.row_of(found[0].id), 0)
        center = QAbstractItemView.ScrollHint.PositionAtCenter
        self.table.scrollToItem(first, center)
        QTimer.singleShot(0, lambda: self.table.scrollToItem(first, center))  # once laid out
        self._selection_changed()
        self.buttons["download"].setDefault(True)
        self.buttons["download"].setFocus()
        return True

    def selected_id(self) -> str:
        m = self.selected() if self.table.rowCount() else None
        return m.id if m else ""

    def info(self, model_id: str) -> ModelInfo | None:
        row = self.row_of(model_id)
        return self.models[row] if row >= 0 else None

    def _selection_changed(self) -> None:
        m, busy = self.selected(), self.task is not None
        fetchable = [x for x in self.selected_all() if x.source == "hf" and not x.installed]
        self.buttons["download"].setEnabled(bool(fetchable) and not busy)
        self.buttons["use"].setEnabled(
            bool(m and m.installed and use_keys(m) and not (m.used_by_settings)) and not busy
        )
        self.buttons["cancel"].setEnabled(busy and self.task.kind == "download")
        self.buttons["verify"].setEnabled(bool(m and m.installed) and not busy)
        self.buttons["delete"].setEnabled(
            bool(m and m.installed and m.source != "package") and not busy
        )
        self.buttons["open"].setEnabled(bool(m and m.installed))
        for key in ("import", "import_file", "refresh"):
            self.buttons[key].setEnabled(not busy)
        many = len(self.selected_all()) > 1
        self.details.setText(
            self._details(m) if m else "Several models selected." if many else "Select a model."
        )

    def _details(self, m: ModelInfo) -> str:
        lines = [m.id + (f" · {m.repo}@{m.revision[:12]}" if m.repo else "")]
        facts = [
            f"licence {m.license}" if m.license else "",
            f"languages {', '.join(m.languages)}" if m.languages else "",
            f"profiles {', '.join(m.profiles)}" if m.profiles else "",
            "can use tools" if m.tools else "",
        ]
        if any(facts):
            lines.append(" · ".join(f for f in facts if f))
        if m.path:
            lines.append(str(m.path))
        elif m.source == "hf":
            try:
                plan = self.manager.plan(m.id)
                need = (
                    "size unknown until the Hub lists the files"
                    if plan.need_bytes is None
                    else ("about " if plan.approx else "") + human_size(plan.need_bytes)
                )
                room = "fits" if plan.fits else "DOES NOT FIT"
                lines.append(
                    f"Download: {need}; {human_size(plan.free_bytes)} free in "
                    f"{plan.folder} ({room})"
                )
            except (S2SError, OSError) as exc:
                lines.append(str(exc))
        return "\n".join(lines)

    # ------------------------------------------------------------------ tasks
    def _start(self, kind: str, model_id: str, fn: Callable, done: Callable) -> BackgroundTask:
        task = BackgroundTask(kind, model_id, fn, self)
        task.progress.connect(self._progress)
        task.succeeded.connect(done)
        task.failed.connect(self._failed)
        task.finished.connect(self._task_finished)
        self.task = task
        self._selection_changed()
        task.start()
        return task

    def _task_finished(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.deleteLater()
        self.refresh()

    def _failed(self, kind: str, message: str) -> None:
        self._show_progress(False)
        self.queue.clear()  # the offered models after a failed one wait for the user
        if kind == "cancelled":
            self.say("Download cancelled. What was downloaded is kept: Download resumes there.")
            return
        advice = f"\n{IMPORT_ADVICE}" if "import" in message and "Import" not in message else ""
        self.say(f"{message}{advice}", error=True)

    def _show_progress(self, shown: bool) -> None:
        self.bar.setVisible(shown)
        self.progress_label.setVisible(shown)
        if not shown:
            self.bar.setValue(0)
            self.progress_label.setText("")

    def _progress(self, p: DownloadProgress) -> None:
        if p.total:
            self.bar.setRange(0, 1000)
            self.bar.setValue(min(1000, int(p.done * 1000 / p.total)))
        else:
            self.bar.setRange(0, 0)  # unknown size: a busy bar
        self.progress_label.setText(progress_text(p))
        row = self.row_of(self.task.subject) if self.task else -1
        if row >= 0 and p.total:
            self.table.item(row, 5).setText(f"Downloading {p.done * 100 // p.total}%")

    # ------------------------------------------------------------------ actions
    def use_selected(self) -> None:
        m = self.selected()
        keys = use_keys(m) if m is not None and m.installed else {}
        if keys:
            self.use_model.emit(keys)
            self.say(f"{m.name} is now the {m.stage.upper()} model.")

    def download(self) -> None:
        """Download the selected models, one after another."""
        if self.task is not None:
            return
        self.queue = [
            x.id for x in self.selected_all() if x.source == "hf" and not x.installed
        ]
        self._download_next()

    def _download_next(self) -> None:
        m = self.info(self.queue.pop(0)) if self.queue else None
        if m is None:
            return
        try:
            plan = self.manager.plan(m.id)
        except (S2SError, OSError) as exc:
            return self.say(str(exc), error=True)
        if not plan.fits:
            return self.say(
                f"Not enough free space for {m.name}: it needs "
                f"{human_size(plan.need_bytes)}, {human_size(plan.free_bytes)} is "
                f"free in {plan.folder}. Free some space or set HF_HOME to a "
                "larger disk.",
                error=True,
            )
        self.say(f"Downloading {m.name}…")
        self.bar.setValue(0)
        self._show_progress(True)

        def fetch(progress, cancel):
            return self.manager.download(m.id, progress=progress, cancel=cancel)

        def done(folder):
            self._show_progress(False)
            self.say(f"Downloaded {m.name} into {folder}")
            self.downloaded.emit(m.id)
            if self.queue:  # the next one once this task has finished
                self.task.finished.connect(self._download_next)

        self._start("download", m.id, fetch, done)

    def cancel(self) -> None:
        if self.task is not None and self.task.kind == "download":
            self.task.cancel.set()
            self.progress_label.setText("Cancelling…")

    def verify(self) -> None:
        m = self.selected()
        if m is None or self.task is not None:
            return
        self.say(f"Checking {m.name}…")
        self._start(
            "verify",
            m.id,
            lambda progress, cancel: self.manager.verify(m.id),
            lambda report: self._verified(m, report),
        )

    def _verified(self, m: ModelInfo, report: VerifyReport) -> None:
        if report.ok:
            self.say(f"{m.name}: all {len(report.files)} files match their checksums.")
        elif report.ok is False:
            bad = "; ".join(f"{f.name}: {f.detail}" for f in report.bad)
            self.say(f"{m.name} is damaged ({bad}). Delete it and download it again.", error=True)
        else:
            why = "; ".join(f"{f.name}: {f.detail}" for f in report.files if f.status != "ok")
            self.say(f"{m.name}: could not check every file ({why}).")

    def delete(self) -> None:
        m = self.selected()
        if m is None or self.task is not None or not m.installed:
            return
        warn = (
            "\n\nThe current settings use it: choose another model in Settings, or "
            "download it again."
            if m.used_by_settings
            else ""
        )
        shared = (
            " Other Hugging Face tools on this computer lose it too."
            if m.source in ("hf", "cache")
            else ""
        )
        what = (
            (
                f"Forget the imported model at {m.path} (a copy the app made is deleted, a "
                "folder of yours stays)"
            )
            if m.source == "imported"
            else f"Delete {m.name} ({size_text(m)} at {m.path})"
        )
        answer = QMessageBox.question(
            self,
            "Delete model",
            f"{what}?{shared}{warn}",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        try:
            removed = self.manager.delete(m.id)
        except (S2SError, OSError) as exc:
            return self.say(str(exc), error=True)
        self.refresh()
        self.say(f"Deleted {m.name} ({len(removed)} item(s) removed).")

    def import_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Import a model folder")
        if path:
            self.import_path(path)

    def import_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import a model file", "", "Models (*.gguf *.onnx *.safetensors);;All (*)"
        )
        if path:
            self.import_path(path)

    def import_path(self, path: str) -> None:
        if self.task is not None:
            return
        self.say(f"Importing {path}…")

        def done(m: ModelInfo):
            self.refresh()
            self.select(m.id)
            self.say(f"Imported {path} as {m.id} ({m.stage or '?'}, {m.backend or '?'}).")

        self._start("import", path, lambda progress, cancel: self.manager.import_folder(path), done)

    def open_folder(self) -> None:
        m = self.selected()
        if m is None:
            return
        try:
            self.say(f"Opened {self.manager.open_folder(m.id)}")
        except S2SError as exc:
            self.say(str(exc), error=True)

    def say(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else "")

    def closeEvent(self, event) -> None:
        if self.task is not None:  # a window closing mid-download stops it (it resumes later)
            self.task.cancel.set()
            self.task.wait(3000)
        super().closeEvent(event)
