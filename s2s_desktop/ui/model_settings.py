"""The Models and Compute tabs: per stage the backend and model (catalog, what is on disk, or a
local folder/file), and the compute device per stage plus the global one — offering only the
devices this machine has and the chosen backend can use — and NVIDIA's CUDA libraries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from .. import devices
from ..engines import registry
from ..models.download import human_size
from ..models.importer import detect_model_kind
from ..models.manager import ModelInfo
from ..states import STAGES
from .cuda_libraries import CudaLibrariesBox
from .form_fields import Fields

STAGE_NAMES = {
    "vad": "Voice detection (VAD)",
    "stt": "Speech to text (STT)",
    "llm": "Language model (LLM)",
    "tts": "Text to speech (TTS)",
}
CUSTOM = "Custom: the reference below"



def model_label(m: ModelInfo) -> str:
    size = human_size(m.size_bytes) if m.size_bytes else "size ?"
    state = "installed" if m.installed else "not downloaded"
    return f"{m.name} · {m.backend or '?'} · {'~' if m.size_approx else ''}{size} · {state}"


def model_keys(m: ModelInfo) -> dict[str, str]:
    """The settings a model stands for: a catalog entry's own, else backend + path/repo id."""
    if m.entry is not None:
        return dict(m.entry.settings)
    ref = m.repo if m.source == "cache" else str(m.path or "")
    keys = {f"{m.stage}.model": ref}
    if m.backend:
        keys[f"{m.stage}.backend"] = m.backend
    return keys


class ModelsTab(QWidget):
    backend_changed = Signal(str, str)  # stage, backend

    def __init__(
        self, fields: Fields, models: list[ModelInfo], say: Callable[[str, bool], None], parent=None
    ):
        super().__init__(parent)
        self.fields = fields
        self.say = say
        self.choosers: dict[str, QComboBox] = {}
        self.backends: dict[str, QComboBox] = {}
        self._syncing = False
        layout = QVBoxLayout(self)
        for stage in STAGES:
            box = QGroupBox(STAGE_NAMES[stage])
            form = QFormLayout(box)
            backend = QComboBox()
            for name in registry.backend_names(stage):
                backend.addItem(name, name)
            fields.bind(f"{stage}.backend", backend)
            backend.currentIndexChanged.connect(lambda _=0, s=stage: self._backend_changed(s))
            self.backends[stage] = backend
            form.addRow("Backend:", backend)
            if stage != "vad":  # the VAD backends carry their own model
                self._model_rows(
                    stage, form, [m for m in models if m.stage == stage and m.runs_here]
                )
            layout.addWidget(box)
        layout.addStretch(1)

    def _model_rows(self, stage: str, form: QFormLayout, models: list[ModelInfo]) -> None:
        chooser = QComboBox()
        chooser.addItem(CUSTOM, None)
        for m in models:
            chooser.addItem(model_label(m), model_keys(m))
            chooser.setItemData(
                chooser.count() - 1, str(m.path or m.repo or m.id), Qt.ItemDataRole.ToolTipRole
            )
        chooser.activated.connect(lambda _=0, s=stage: self._chosen(s))
        self.choosers[stage] = chooser
        form.addRow("Model:", chooser)
        ref = QLineEdit()
        ref.setPlaceholderText("a folder or file, pkg:MODULE/PATH, or a Hub id org/name")
        ref.textEdited.connect(lambda _="", s=stage: self.sync(s))
        self.fields.bind(f"{stage}.model", ref)
        browse = QPushButton("Local folder/file…")
        menu = QMenu(browse)
        menu.addAction("Folder…", lambda s=stage: self.browse(s, folder=True))
        menu.addAction("File…", lambda s=stage: self.browse(s, folder=False))
        browse.setMenu(menu)
        row = QHBoxLayout()
        row.addWidget(ref, 1)
        row.addWidget(browse)
        form.addRow("Reference:", row)
        if stage == "llm":
            file_edit = QLineEdit()
            file_edit.setPlaceholderText("the .gguf inside a repo or folder with several")
            file_edit.textEdited.connect(lambda _="": self.sync("llm"))
            self.fields.bind("llm.model_file", file_edit)
            form.addRow("File:", file_edit)

    # ------------------------------------------------------------------ choosing
    def _chosen(self, stage: str) -> None:
        keys = self.choosers[stage].currentData()
        if not keys:
            return
        self._syncing = True
        try:
            if stage == "llm":
                self.fields.set("llm.model_file", "")  # entries without a file name use none
            for key, value in keys.items():
                self.fields.set(key, value)
        finally:
            self._syncing = False
        self.sync(stage)

    def sync(self, stage: str) -> None:
        """Show the catalog/disk model the fields match, else "Custom"."""
        chooser = self.choosers.get(stage)
        if chooser is None or self._syncing:
            return
        for i in range(1, chooser.count()):
            keys = chooser.itemData(i) or {}
            if all(
                key not in self.fields.widgets or self.fields.get(key) == value
                for key, value in keys.items()
            ):
                chooser.setCurrentIndex(i)
                return
        chooser.setCurrentIndex(0)

    def sync_all(self) -> None:
        for stage in self.choosers:
            self.sync(stage)

    def _backend_changed(self, stage: str) -> None:
        self.sync(stage)
        self.backend_changed.emit(stage, self.fields.get(f"{stage}.backend") or "")

    def browse(self, stage: str, folder: bool) -> None:
        start = str(Path(self.fields.get(f"{stage}.model") or "~").expanduser())
        title = f"{STAGE_NAMES[stage]} model"
        if folder:
            path = QFileDialog.getExistingDirectory(self, title, start)
        else:
            path, _ = QFileDialog.getOpenFileName(self, title, start)
        if path:
            self.use_local(stage, path)

    def use_local(self, stage: str, path: str) -> bool:
        """Point `stage` at a local model; the backend follows what the files are."""
        kind = detect_model_kind(Path(path))
        if kind is not None and kind[0] != stage:
            self.say(
                f"{path} holds a {kind[0].upper()} model ({kind[1]}), not a "
                f"{STAGE_NAMES[stage]} model",
                True,
            )
            return False
        self._syncing = True
        try:
            if kind is not None:
                self.fields.set(f"{stage}.backend", kind[1])
            self.fields.set(f"{stage}.model", path)
            if stage == "llm":
                ggufs = sorted(Path(path).glob("*.gguf")) if Path(path).is_dir() else []
                self.fields.set("llm.model_file", ggufs[0].name if len(ggufs) == 1 else "")
        finally:
            self._syncing = False
        self.sync(stage)
        if kind is None:
            self.say(f"Could not tell what kind of model {path} is; check the backend", False)
        return True


# ---------------------------------------------------------------- compute


def device_choices(plat: devices.Platform) -> list[tuple[str, str]]:
    """(device setting, label) for every device kind this machine has, "auto" first."""
    out = [("auto", "auto — the best this machine has")]
    found = devices.compute_devices(plat)
    gpus = [d for d in found if d["kind"].startswith("cuda")]
    for d in found:
        if d["kind"] == "cpu":
            out.append(("cpu", f"cpu — {d['name']}"))
        elif d["kind"] in ("mps", "mlx"):
            out.append((d["kind"], f"{d['kind']} — {d['name']}"))
    if gpus:
        out.append(("cuda", f"cuda — {gpus[0]['name']}" if len(gpus) == 1 else "cuda — GPU 0"))
    if len(gpus) > 1:
        out += [(d["kind"], f"{d['kind']} — {d['name']}") for d in gpus]
    return out


class ComputeTab(QWidget):
    def __init__(self, fields: Fields, plat: devices.Platform, parent=None):
        super().__init__(parent)
        self.fields = fields
        self.choices = device_choices(plat)
        # scrolls rather than squeezes: the NVIDIA group grows while it downloads, and wrapped
        # labels inside a tab get less height than their lines need
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        content = QWidget()
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)
        layout = QVBoxLayout(content)
        top = QFormLayout()
        self.global_box = QComboBox()
        for value, label in self.choices:
            self.global_box.addItem(label, value)
        fields.bind("device", self.global_box)
        top.addRow("Device for all stages:", self.global_box)
        layout.addLayout(top)

        per = QGroupBox("Per stage (a stage's own device wins over the one above)")
        form = QFormLayout(per)
        self.stage_boxes: dict[str, QComboBox] = {}
        for stage in STAGES:
            box = QComboBox()
            self.stage_boxes[stage] = box
            fields.bind(f"{stage}.device", box)
            form.addRow(f"{STAGE_NAMES[stage]}:", box)
        layout.addWidget(per)

        quant = QGroupBox("Precision")
        qform = QFormLayout(quant)
        self.compute_type = QComboBox()
        self.compute_type.setEditable(True)
        fields.bind("stt.compute_type", self.compute_type)
        qform.addRow("STT compute type:", self.compute_type)
        self.dtype = QComboBox()
        self.dtype.setEditable(True)
        fields.bind("llm.dtype", self.dtype)
        qform.addRow("LLM weights:", self.dtype)
        self.quant_note = QLabel("")
        self.quant_note.setWordWrap(True)
        qform.addRow("", self.quant_note)
        self.threads = QSpinBox()
        self.threads.setRange(0, 256)
        self.threads.setSpecialValueText("auto")
        fields.bind("llm.threads", self.threads)
        qform.addRow("LLM CPU threads:", self.threads)
        layout.addWidget(quant)
        self.cuda_libraries = CudaLibrariesBox(plat.cuda_count)
        layout.addWidget(self.cuda_libraries)
        layout.addStretch(1)

    def stage_choices(self, stage: str, backend: str) -> list[tuple[str, str]]:
        default = "Default (CPU)" if stage == "vad" else "Same as above"
        engine = registry.find(stage, backend)
        supported = engine.devices if engine is not None else ()
        if not supported:  # remote API, pass-through or unknown: nothing to pick
            return [("", f"{default} (this backend runs no local model)")]
        out = [("", default)]
        for value, label in self.choices:
            if value == "auto" or value.partition(":")[0] in supported:
                out.append((value, label))
        return out

    def backend_changed(self, stage: str, backend: str) -> None:
        """Offer only the devices `backend` can run on; a saved value stays visible."""
        box = self.stage_boxes[stage]
        current = box.currentData() or ""
        box.blockSignals(True)
        box.clear()
        for value, label in self.stage_choices(stage, backend):
            box.addItem(label, value)
        box.setCurrentIndex(max(0, box.findData(current)))  # unsupported now: back to default
        box.blockSignals(False)
        engine = registry.find(stage, backend)
        precisions = list(engine.compute_types) if engine is not None else []
        if stage == "stt":
            self._refill(self.compute_type, precisions or ["auto"])
        if stage == "llm":
            self._refill(self.dtype, precisions or ["auto"])
            self.quant_note.setText(engine.quant_note if engine is not None else "")
            self.dtype.setEnabled(bool(precisions))

    @staticmethod
    def _refill(box: QComboBox, values: list[str]) -> None:
        current = box.currentText() or "auto"
        box.blockSignals(True)
        box.clear()
        for v in values:
            box.addItem(v, v)
        box.setEditText(current) if box.findText(current) < 0 else box.setCurrentText(current)
        box.blockSignals(False)
