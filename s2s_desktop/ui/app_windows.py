"""The app's windows: the conversation, Settings, the model manager (opened on demand, one of
each) and the first-run help and model offer. A mixin of DesktopApp: it reads the app's
settings, launch and pipeline, and applies what the windows choose."""

from __future__ import annotations

import importlib
import logging

from .. import config
from ..errors import S2SError
from ..launch import first_run_choice, first_run_settings, with_changes

log = logging.getLogger(__name__)

MODELS_OFFERED = "recommended-models-offered"  # marker: the first-run offer was shown once

class AppWindows:
    """Needs: settings, launch, pipeline, controller, _dialogs, show_notice, apply_settings."""

    def _first_run_models(self) -> None:
        """No settings file: say which models run, and offer the recommended ones once."""
        first = self.launch.first_run
        if first is None:
            return
        self.show_notice(first.summary(), error=bool(first.missing_lines()))
        marker = config.config_dir() / MODELS_OFFERED
        if first.to_download and not marker.exists():
            self.open_models(offer=[c.auto_id for c in first.to_download])
            try:
                config.atomic_write_text(marker, "offered\n")
            except OSError as exc:
                log.warning("could not write %s (%s)", marker, exc)

    def _first_run_help(self) -> None:
        try:  # macOS / Windows permissions, explained once
            from .first_run import show_first_run_if_needed
        except ImportError:
            return
        dialog = show_first_run_if_needed(config.config_dir())
        if dialog is not None:
            self._dialogs["first_run"] = dialog  # kept alive while it is open

    def show_conversation(self) -> None:
        self.window.show()
        self.window.raise_()
        self.window.activateWindow()

    def open_settings(self) -> None:
        def make(module):
            # the dialog shows what this launch runs; it saves only what the user changes,
            # onto the settings file (this launch's --profile / --set are never saved)
            dialog = module.SettingsDialog(
                self.settings.copy(),
                on_apply=self.apply_settings,
                events=self.pipeline.events,
                saved=self.launch.base(),
                launch_note=self._launch_note(),
                tools=self.pipeline.tools,
                mcp_servers=self.pipeline.mcp,
            )
            dialog.saved_changed.connect(self.settings_saved)
            return dialog

        widget = self._open_window(
            "settings", "s2s_desktop.ui.settings_dialog", make, "The settings dialog"
        )
        if widget is not None and not widget.isVisible():
            widget.load_settings(self.settings)

    def _launch_note(self) -> str:
        if self.launch.layered:
            return (
                f"This launch runs with {self.launch.options_text()}: shown here is what it "
                "runs. Apply saves only what you change; those options are never saved."
            )
        if self.launch.first_run is not None:
            return f"No settings saved yet. {self.launch.first_run.summary()}"
        return ""

    def settings_saved(self, saved: config.Settings) -> None:
        self.launch.saved = saved.copy()
        self.launch.first_run = None  # a settings file now says which models run
        dialog = self._dialogs.get("settings")
        if dialog is not None:  # "No settings saved yet" is no longer true
            dialog.set_launch_note(self._launch_note())

    def open_models(self, offer: list[str] | None = None,
                    intro: str = "Recommended for this computer, not downloaded yet:",
                    after: str = ""):
        """The model manager (None when this build lacks it); `offer`: models to select,
        ready to download, with `intro` (and `after`) saying why."""
        def make(module):
            window = module.ModelManagerWindow(self.settings.copy())
            window.downloaded.connect(self._model_downloaded)
            window.use_model.connect(self.use_model)
            return window

        window = self._open_window(
            "models", "s2s_desktop.ui.model_manager", make, "The model manager"
        )
        if window is not None and offer:
            window.offer(offer, intro, *([after] if after else []))
        return window

    def use_model(self, keys: dict) -> None:
        """The model manager's "Use this model": saved, and loaded now."""
        try:
            saved = with_changes(self.launch.base(), keys)
            config.save(saved)
            settings = with_changes(self.settings, keys)
        except (OSError, S2SError) as exc:
            self.show_notice(f"Could not switch models: {exc}", error=True)
            return
        self.settings_saved(saved)
        reloading = self.apply_settings(settings)
        self.show_notice(
            f"Saved; loading {', '.join(reloading)}…" if reloading else "Already in use"
        )

    def _model_downloaded(self, model_id: str) -> None:
        self.pipeline.tts.voices.catalog_changed()  # a voice for a reply's language, maybe
        first = self.launch.first_run
        if first is not None and not config.settings_path().exists():
            # first run: a recommended model arrived, so its stage switches to it
            choice = first_run_choice()
            new = first_run_settings(choice)
            self.launch.first_run, self.launch.saved = choice, new.copy()
            if config.changed_stages(self.settings, new):
                self.apply_settings(new)
                self.show_notice(choice.summary())
                return
        self.pipeline.retry()  # stages that could not load it try again

    def _open_window(self, key: str, module: str, make, what: str):
        from PySide6.QtWidgets import QMessageBox

        widget = self._dialogs.get(key)
        if widget is None:
            try:
                widget = make(importlib.import_module(module))
            except (ImportError, AttributeError) as exc:
                QMessageBox.information(
                    None, "s2s-desktop", f"{what} is not available in this build ({exc})."
                )
                return None
            self._dialogs[key] = widget
        widget.show()
        widget.raise_()
        widget.activateWindow()
        return widget

