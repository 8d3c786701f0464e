"""The Settings dialog: General, Audio, Models, Compute, Assistant.

The dialog shows what this launch runs. Apply/OK checks everything first (config.validate,
the devices this machine can run, that a local model path exists, that the language suits the
speech-to-text model) and refuses with the reasons, saving nothing. Given `saved` (the settings
file, which this launch's --profile/--set may differ from), only the keys the user changed are
saved onto it. Valid settings are saved atomically, handed to `on_apply` (which reloads only the stages whose settings changed and
returns their names) and announced with `applied`; the dialog then shows those stages reloading
and, given the pipeline's events, when each is ready again or why it failed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from .. import config, devices
from ..errors import S2SError, SettingsError
from ..launch import changed_keys, with_changes
from ..states import STAGES, StageState
from .audio_settings import AudioTab
from .dictation_settings import add_dictation_rows
from .form_fields import Fields
from .hotkey_edit import HotkeyEdit, taken_by_desktop
from .idle_settings import add_unload_row
from .language_check import voice_label
from .model_settings import STAGE_NAMES, ComputeTab, ModelsTab
from .server_settings import ServerTab
from .settings_checks import known_models, settings_problems
from .tasks import ERROR_STYLE
from .tools_settings import ToolsTab

SHORT = {"vad": "VAD", "stt": "Speech to text", "llm": "Language model", "tts": "Voice"}
LANGUAGES = [
    ("Detect automatically", ""),
    ("English", "en"),
    ("German", "de"),
    ("French", "fr"),
    ("Spanish", "es"),
    ("Italian", "it"),
    ("Portuguese", "pt"),
    ("Dutch", "nl"),
    ("Polish", "pl"),
    ("Swedish", "sv"),
    ("Turkish", "tr"),
    ("Russian", "ru"),
    ("Ukrainian", "uk"),
    ("Arabic", "ar"),
    ("Hindi", "hi"),
    ("Chinese", "zh"),
    ("Japanese", "ja"),
    ("Korean", "ko"),
]


class SettingsDialog(QDialog):
    applied = Signal(object)  # the new Settings, after they were saved
    saved_changed = Signal(object)  # what the settings file now holds

    def __init__(
        self,
        settings: config.Settings,
        on_apply: Callable[[config.Settings], list[str] | None] | None = None,
        parent=None,
        *,
        events=None,
        sd=None,
        platform: devices.Platform | None = None,
        manager=None,
        path: Path | None = None,
        saved: config.Settings | None = None,
        launch_note: str = "",
        tools=None,
        mcp_servers=None,
    ):
        super().__init__(parent)
        self.setWindowTitle("Settings")  # Qt appends the app name
        self.resize(740, 640)  # the Models tab needs ~740 wide; Compute grows during a download
        self.on_apply = on_apply
        self.path = path
        self.platform = platform or devices.detect_platform()
        self.settings = settings.copy()
        self.saved = saved.copy() if saved is not None else None  # None: save what is shown
        self.stage_states: dict[str, tuple[str, str]] = {}  # stage → (state, detail)
        self.fields = Fields()

        self.tabs = QTabWidget()
        self.launch_note = QLabel()
        self.launch_note.setWordWrap(True)
        self.launch_note.setStyleSheet("background: #fff4ce; color: #3b2f00; padding: 6px")
        self.set_launch_note(launch_note)
        self.tabs.addTab(self._general_tab(), "General")
        self.audio = AudioTab(self.fields, sd=sd)
        self.tabs.addTab(self.audio, "Audio")
        models = known_models(settings, manager)
        self.known_models = models
        self.models = ModelsTab(self.fields, models, self.say)
        self.tabs.addTab(self.models, "Models")
        self.compute = ComputeTab(self.fields, self.platform)
        self.tabs.addTab(self.compute, "Compute")
        self.tabs.addTab(self._assistant_tab(models), "Assistant")
        self.server = ServerTab(self.fields)
        self.tabs.addTab(self.server, "Server")
        self.tools = ToolsTab(self.fields, tools, servers=mcp_servers)
        self.tabs.addTab(self.tools, "Tools")
        self.models.backend_changed.connect(self.compute.backend_changed)

        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Apply
            | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Apply).clicked.connect(self.apply)
        self.buttons.accepted.connect(self._ok)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.launch_note)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.message)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)

        self.load_settings(self.settings)
        if events is not None:
            events.stage_state.connect(self._stage_state)  # queued: stages run in threads

    # ------------------------------------------------------------------ tabs
    def _general_tab(self) -> QWidget:
        tab = QWidget()
        form = QFormLayout(tab)
        self.hotkey_edit = self.fields.bind("hotkey.combo", HotkeyEdit())
        form.addRow("Talk shortcut:", self.hotkey_edit)
        self.hotkey_warning = QLabel("")
        self.hotkey_warning.setWordWrap(True)
        self.hotkey_warning.setStyleSheet(ERROR_STYLE)
        self.hotkey_edit.combo_changed.connect(self._check_hotkey)
        form.addRow("", self.hotkey_warning)
        mode = QComboBox()
        mode.addItem("Hold the keys while you talk", "hold")
        mode.addItem("Press once to start, again to send", "toggle")
        form.addRow("Mode:", self.fields.bind("hotkey.mode", mode))
        form.addRow("", self.fields.bind("hotkey.enabled", QCheckBox("Use the global shortcut")))
        self.dictation_edit = add_dictation_rows(form, self.fields)
        self.unload_box = add_unload_row(form, self.fields)
        form.addRow(
            "", self.fields.bind("ui.start_at_login", QCheckBox("Start s2s-desktop when I log in"))
        )
        form.addRow(
            "",
            self.fields.bind(
                "ui.show_conversation", QCheckBox("Show the conversation window at start")
            ),
        )
        hint = QLabel(
            "Click the shortcut field, then press the keys. Esc keeps the old one. "
            "On Wayland, bind `s2s-desktop toggle` to a shortcut in your desktop's "
            "settings instead."
        )
        hint.setWordWrap(True)
        hint.setStyleSheet("color: palette(mid)")
        form.addRow(hint)
        return tab

    def _assistant_tab(self, models) -> QWidget:
        tab = QWidget()
        form = QFormLayout(tab)
        prompt = QPlainTextEdit()
        prompt.setMinimumHeight(110)
        form.addRow("System prompt:", self.fields.bind("llm.system_prompt", prompt))
        voice = QComboBox()
        voice.setEditable(True)
        voice.addItem("The model's default voice", "")
        for m in models:
            name = (m.entry.settings.get("tts.voice") if m.entry else "") or ""
            if name and voice.findData(name) < 0:
                voice.addItem(voice_label(name), name)
        voice.setToolTip(
            "A voice of the TTS model: a Kokoro name (af_heart), or the .onnx file "
            "inside a Piper voices repo"
        )
        form.addRow("Voice:", self.fields.bind("tts.voice", voice))
        language = QComboBox()
        language.setEditable(True)
        for label, code in LANGUAGES:
            language.addItem(f"{label} ({code})" if code else label, code)
        language.setToolTip("The language you speak; any Whisper language code can be typed")
        form.addRow("Language:", self.fields.bind("stt.language", language))
        spoken = QLineEdit()
        spoken.setPlaceholderText("any (e.g. en, de)")
        spoken.setToolTip(
            "With Language on detect: the languages you speak, your usual one first. Only "
            "these are detected, and an unsure detection keeps your usual language"
        )
        form.addRow("Languages I speak:", self.fields.bind("stt.languages", spoken))
        tokens = QSpinBox()
        tokens.setRange(1, 8192)
        tokens.setSingleStep(20)
        tokens.setSuffix(" tokens")
        form.addRow("Reply length (at most):", self.fields.bind("llm.max_new_tokens", tokens))
        temperature = QDoubleSpinBox()
        temperature.setRange(0.0, 2.0)
        temperature.setSingleStep(0.1)
        temperature.setToolTip("0: the same question gets the same answer; higher: more varied")
        form.addRow("Temperature:", self.fields.bind("llm.temperature", temperature))
        turns = QSpinBox()
        turns.setRange(0, 200)
        turns.setSuffix(" exchanges")
        turns.setSpecialValueText("none: each question stands alone")
        form.addRow("History the model sees:", self.fields.bind("llm.history_turns", turns))
        speed = QDoubleSpinBox()
        speed.setRange(0.25, 4.0)
        speed.setSingleStep(0.05)
        speed.setSuffix(" ×")
        form.addRow("Speaking speed:", self.fields.bind("tts.speed", speed))
        form.addRow(
            "",
            self.fields.bind(
                "ui.history_enabled", QCheckBox("Keep the conversation history on this computer")
            ),
        )
        return tab

    # ------------------------------------------------------------------ settings in, out
    def load_settings(self, settings: config.Settings) -> None:
        """Show `settings` (the app calls this when they changed elsewhere)."""
        self.settings = settings.copy()
        for stage in STAGES:  # device choices depend on the backend
            self.compute.backend_changed(stage, getattr(settings, stage).backend)
        self.fields.load(self.settings)
        self.models.sync_all()
        self.server.load(self.settings)
        self.tools.load(self.settings)
        self._check_hotkey(self.settings.hotkey.combo)

    def set_launch_note(self, text: str) -> None:
        """The banner over the tabs: what this launch runs, if not the saved settings."""
        self.launch_note.setText(text)
        self.launch_note.setVisible(bool(text))

    def _check_hotkey(self, combo: str) -> None:
        why = taken_by_desktop(combo)
        self.hotkey_warning.setText(why)
        self.hotkey_warning.setVisible(bool(why))

    def collect(self) -> config.Settings:
        """The settings as the dialog shows them (SettingsError for a value of the wrong type)."""
        new = self.settings.copy()
        self.fields.store(new)
        self.tools.store(new)
        return new

    def problems(self, new: config.Settings) -> tuple[list[str], list[str]]:
        """(reasons to refuse, notes to show) for `new`."""
        return settings_problems(new, self.settings, self.platform, self.known_models)

    def apply(self) -> bool:
        try:
            new = self.collect()
        except SettingsError as exc:
            return self._refuse([str(exc)])
        refusals, notes = self.problems(new)
        if refusals:
            return self._refuse(refusals)
        try:
            self.server.store_key(new)
        except S2SError as exc:
            return self._refuse([str(exc)])
        try:
            to_save = new
            if self.saved is not None:  # only what the user changed, onto the settings file
                to_save = with_changes(self.saved, changed_keys(self.settings, new))
            config.save(to_save, self.path)
        except (OSError, SettingsError) as exc:
            return self._refuse([f"the settings could not be saved ({exc})"])
        if self.saved is not None:
            self.saved = to_save.copy()
        self.saved_changed.emit(to_save.copy())
        old, self.settings = self.settings, new.copy()
        reloading = config.changed_stages(old, new)
        if self.on_apply is not None:
            try:
                result = self.on_apply(new.copy())
                reloading = list(result) if result is not None else reloading
            except S2SError as exc:
                notes.append(str(exc))
        self.applied.emit(new.copy())
        self.say("\n".join(notes), error=False)
        self._show_reloading(reloading)
        return True

    def _ok(self) -> None:
        if self.apply():
            self.accept()

    def _refuse(self, reasons: list[str]) -> bool:
        self.say("Not saved:\n" + "\n".join(f"• {r}" for r in reasons), error=True)
        return False

    def say(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else "")

    # ------------------------------------------------------------------ reload news
    def _show_reloading(self, stages: list[str]) -> None:
        self.stage_states = {s: (StageState.RELOADING, "") for s in stages if s in STAGE_NAMES}
        if not self.stage_states:
            self.status.setText(
                "Saved. No model needs reloading: the changes apply from the next question."
            )
            self.status.setStyleSheet("")
            return
        self._render_status()

    def _stage_state(self, stage: str, state: str, detail: str) -> None:
        if stage in self.stage_states:
            self.stage_states[stage] = (state, detail)
            self._render_status()

    def _render_status(self) -> None:
        parts, failed = [], False
        for stage, (state, detail) in self.stage_states.items():
            name = SHORT[stage]
            if state in (StageState.RELOADING, StageState.LOADING):
                parts.append(f"{name}: reloading…")
            elif state == StageState.READY:
                parts.append(f"{name}: ready" + (f" ({detail})" if detail else ""))
            else:
                failed = True
                parts.append(f"{name}: failed: {detail}")
        self.status.setText("Saved. " + " · ".join(parts))
        self.status.setStyleSheet(ERROR_STYLE if failed else "")

    # ------------------------------------------------------------------ closing
    def done(self, result: int) -> None:
        self.audio.close_devices()
        self.compute.cuda_libraries.stop()
        super().done(result)

    def closeEvent(self, event) -> None:
        self.audio.close_devices()
        self.compute.cuda_libraries.stop()
        super().closeEvent(event)
