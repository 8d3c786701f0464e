"""The desktop app: one instance per user, the tray (or a floating window) at once, models
loading in the background, and everything wired to the one AppController.

`run_app(args)` is what `s2s-desktop` with no subcommand runs. `--profile` and `--set` apply
to this launch only; they are never written to the settings file.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from . import config
from .audio.microphone import Microphone
from .audio.speaker import SpeakerSink
from .controller import AppController
from .errors import AudioDeviceError, S2SError
from .history import Exchange, History
from .hotkey.client import HotkeyClient
from .ipc import CommandServer
from .pipeline.pipeline import Pipeline
from .pipeline.turns import Conversation

log = logging.getLogger(__name__)


class DesktopApp(QObject):
    """Owns the pipeline, audio, hotkey, IPC server and windows for one run."""

    notice_posted = Signal(str)  # from any thread; shown in the main thread

    def __init__(
        self,
        qapp,
        settings: config.Settings,
        warnings: list[str] | None = None,
        verbose: bool = False,
        use_tray: bool | None = None,
        mic=None,
        speaker=None,
        launch_profile: str | None = None,
        launch_overrides: dict | None = None,
    ):
        super().__init__()
        from PySide6.QtWidgets import QSystemTrayIcon

        from .ui.actions import AppActions
        from .ui.conversation_window import ConversationWindow

        self.qapp = qapp
        self.settings = settings
        self.verbose = verbose
        self.launch_profile = launch_profile  # this launch only: laid over saved settings
        self.launch_overrides = dict(launch_overrides or {})
        self.notice_posted.connect(self.show_notice, Qt.ConnectionType.QueuedConnection)

        self.history = History(enabled=settings.ui.history_enabled)
        earlier, problems = self.history.load()
        self.conversation = Conversation(
            [(e.user, e.assistant) for e in earlier if e.reason in ("ok", "interrupted")]
        )
        # mic / speaker are injectable so tests can run the whole app without sound hardware
        self.speaker = speaker or SpeakerSink(
            settings.audio.output_device, on_notice=self.notice_posted.emit
        )
        self.mic = mic or Microphone(
            settings.audio.input_device,
            settings.audio.preroll_ms,
            settings.audio.max_record_s,
            on_notice=self.notice_posted.emit,
        )
        self.pipeline = Pipeline(settings, self.speaker, self.conversation)
        self.controller = AppController(settings, self.pipeline, self.mic)
        self.hotkey = HotkeyClient(settings.hotkey, self)
        self.actions = AppActions(self)

        self.window = ConversationWindow(self.history, self.conversation, earlier)
        tray_ok = QSystemTrayIcon.isSystemTrayAvailable() if use_tray is None else use_tray
        self.tray = self.floating = None
        if tray_ok:
            from .ui.tray import TrayIcon

            self.tray = TrayIcon(self.actions)
        else:
            from .ui.floating_window import FloatingWindow

            self.floating = FloatingWindow(self.actions, level=lambda: self.mic.level)
            self.floating.talk_pressed.connect(self.controller.button_pressed)
            self.floating.talk_released.connect(self.controller.button_released)
        self._dialogs: dict[str, QObject] = {}
        self._wire()
        self.server = CommandServer(
            {
                "status": self._cmd_status,
                "toggle": self._cmd_talk,
                "talk-start": self._cmd_talk,
                "talk-stop": self._cmd_talk,
                "quit": self._cmd_quit,
                "launch": self._cmd_launch,
            },
            parent=self,
        )
        for text in list(warnings or []) + problems:
            self.show_notice(text)

    # ------------------------------------------------------------------ wiring
    def _wire(self) -> None:
        c, ev, a = self.controller, self.pipeline.events, self.actions
        c.state_changed.connect(self._state_changed)
        c.notice.connect(self.show_notice)
        ev.transcript.connect(self.window.on_transcript)
        ev.partial_transcript.connect(self.window.on_transcript)  # live, while the key is held
        ev.reply_delta.connect(self.window.on_reply_delta)
        ev.turn_finished.connect(self.window.on_turn_finished)
        ev.turn_finished.connect(self._remember_turn)
        ev.stage_state.connect(self._stage_state)
        self.hotkey.pressed.connect(c.hotkey_pressed)
        self.hotkey.released.connect(c.hotkey_released)
        self.hotkey.unavailable.connect(self.show_notice)
        self.hotkey.ready.connect(lambda combo: self._state_changed(c.state, c.detail))
        a.talk.triggered.connect(lambda: c.toggle("tray"))
        a.conversation.triggered.connect(self.show_conversation)
        a.settings.triggered.connect(self.open_settings)
        a.models.triggered.connect(self.open_models)
        a.pause_hotkey.toggled.connect(self._pause_hotkey)
        a.quit.triggered.connect(self.quit)

    def start(self) -> bool:
        """Show the tray at once, then load models in the background. False when another
        instance is already running (it was handed our arguments)."""
        if not self.server.listen():
            return False
        if self.tray is not None:
            self.tray.show()
        else:
            self.floating.show()
        if self.settings.ui.show_conversation:
            self.window.show()
        self.pipeline.start()  # each stage loads its model in its own thread
        try:
            self.mic.open()  # warm, so the pre-roll holds audio from before the first press
        except AudioDeviceError as exc:
            self.controller.report_error(str(exc))
            self.show_notice(str(exc), error=True)
        self.hotkey.start()
        self._first_run_help()
        return True

    def _first_run_help(self) -> None:
        try:  # macOS / Windows permissions, explained once
            from .ui.first_run import show_first_run_if_needed
        except ImportError:
            return
        dialog = show_first_run_if_needed(config.config_dir())
        if dialog is not None:
            self._dialogs["first_run"] = dialog  # kept alive while it is open

    def _state_changed(self, state: str, detail: str) -> None:
        self.controller.hotkey_info = self.hotkey.info()
        for view in (self.tray, self.floating, self.window):
            if view is not None:
                view.show_state(state, detail, self.controller.hotkey_info)

    def _stage_state(self, stage: str, state: str, detail: str) -> None:
        if stage == "tts" and state == "ready" and getattr(self.speaker, "rate", 1) == 0:
            engine = self.pipeline.tts.engine
            try:  # open the output now, not on the first reply
                self.speaker.open(int(getattr(engine, "sample_rate", 22050)))
            except AudioDeviceError as exc:
                self.show_notice(str(exc), error=True)

    def _remember_turn(self, rec: dict) -> None:
        exchange = Exchange.from_turn(rec)
        if exchange is not None:
            self.history.append(exchange)
        if self.verbose:
            log.debug(
                "turn %s: %r → %r (%s)",
                rec.get("turn"),
                rec.get("transcript"),
                rec.get("reply"),
                rec.get("reason"),
            )
        else:  # logs never hold what was said unless asked for (-v)
            log.info(
                "turn %s finished: %s, %s",
                rec.get("turn"),
                rec.get("reason"),
                rec.get("timings_ms", {}).get("release_to_first_audio"),
            )

    def show_notice(self, text: str, error: bool = False) -> None:
        for view in (self.tray, self.floating, self.window):
            if view is not None:
                view.show_notice(text, error)

    def _pause_hotkey(self, paused: bool) -> None:
        self.hotkey.set_paused(paused)
        self._state_changed(self.controller.state, self.controller.detail)

    # ------------------------------------------------------------------ windows
    def show_conversation(self) -> None:
        self.window.show()
        self.window.raise_()
        self.window.activateWindow()

    def open_settings(self) -> None:
        def make(module):
            # the dialog edits (and saves) the settings file; this launch's --profile / --set
            # are laid over what it applies, and never saved
            saved, _ = config.load()
            return module.SettingsDialog(
                saved, on_apply=self._apply_saved, events=self.pipeline.events
            )

        self._open_window("settings", "s2s_desktop.ui.settings_dialog", make, "The settings dialog")

    def open_models(self) -> None:
        def make(module):
            window = module.ModelManagerWindow(self.settings.copy())
            window.downloaded.connect(lambda model_id: self._retry_failed_stages())
            return window

        self._open_window("models", "s2s_desktop.ui.model_manager", make, "The model manager")

    def _open_window(self, key: str, module: str, make, what: str) -> None:
        import importlib

        from PySide6.QtWidgets import QMessageBox

        widget = self._dialogs.get(key)
        if widget is None:
            try:
                widget = make(importlib.import_module(module))
            except (ImportError, AttributeError) as exc:
                QMessageBox.information(
                    None, "s2s-desktop", f"{what} is not available in this build ({exc})."
                )
                return
            self._dialogs[key] = widget
        widget.show()
        widget.raise_()
        widget.activateWindow()

    def _apply_saved(self, saved: config.Settings) -> list[str]:
        effective = saved.copy()
        if self.launch_profile or self.launch_overrides:
            if self.launch_profile:
                config.apply_overrides(effective, config.profile_overrides(self.launch_profile))
            config.apply_overrides(effective, dict(self.launch_overrides))
            self.show_notice(
                "Settings saved. This launch's --profile / --set options still "
                "apply on top of them until s2s-desktop is started without them."
            )
        return self.apply_settings(effective)

    def _retry_failed_stages(self) -> None:
        """A model was downloaded: stages that could not load it try again."""
        from .pipeline.messages import Reload

        for name in list(self.controller.load_errors):
            stage = self.pipeline.stages[name]
            self.pipeline.events.stage_state.emit(
                name, "reloading", getattr(self.settings, name).backend
            )
            stage.ready.clear()
            stage.inbox.put(Reload(-1, settings=self.settings))

    def apply_settings(self, settings: config.Settings) -> list[str]:
        """Use new settings now (the caller saves them): reloads only the changed stages."""
        from .keychain import fill_api_keys

        fill_api_keys(settings)
        old = self.settings
        self.settings = settings
        reloaded = self.pipeline.reload(settings)
        self.controller.apply_settings(settings)
        if (settings.hotkey.combo, settings.hotkey.enabled) != (
            old.hotkey.combo,
            old.hotkey.enabled,
        ):
            self.hotkey.restart(settings.hotkey)
        else:
            self.hotkey.settings = settings.hotkey
        self.history.enabled = settings.ui.history_enabled
        if settings.audio.input_device != old.audio.input_device and isinstance(
            self.mic, Microphone
        ):
            self.mic.device_name = settings.audio.input_device
            try:
                self.mic.open()
            except AudioDeviceError as exc:
                self.controller.report_error(str(exc))
        if isinstance(self.mic, Microphone):
            self.mic.preroll_s = max(0.3, settings.audio.preroll_ms / 1000)
            self.mic.max_record_s = settings.audio.max_record_s
        if settings.audio.output_device != old.audio.output_device and isinstance(
            self.speaker, SpeakerSink
        ):
            self.speaker.device_name = settings.audio.output_device
            self.speaker.close()
            self.speaker.rate = 0  # reopened on the next reply
        return reloaded

    # ------------------------------------------------------------------ commands (IPC)
    def _cmd_status(self, req: dict) -> dict:
        self.controller.hotkey_info = self.hotkey.info()
        status = self.controller.status()
        status["pid"] = os.getpid()
        return {"status": status}

    def _cmd_talk(self, req: dict) -> dict:
        c = self.controller
        name = req["command"]
        before = c.state
        c.last_notice = ""
        if name == "toggle":
            c.toggle("cli")
        elif name == "talk-start":
            c.talk_start("cli")
        else:
            c.talk_stop("cli")
        if name != "talk-stop" and before != "listening" and c.state != "listening":
            return {
                "ok": False,
                "error": c.last_notice or c.error_now or f"cannot start listening while {c.state}",
                "state": c.state,
            }
        return {"state": c.state, "message": c.state}

    def _cmd_quit(self, req: dict) -> dict:
        QTimer.singleShot(0, self.quit)
        return {"message": "s2s-desktop is quitting"}

    def _cmd_launch(self, req: dict) -> dict:
        """A second `s2s-desktop` launch: show the window, apply its --profile/--set."""
        profile, overrides = req.get("profile"), req.get("overrides") or {}
        message = "s2s-desktop is already running"
        if profile or overrides:
            settings, _ = config.resolve(profile, overrides)
            self.launch_profile, self.launch_overrides = profile, dict(overrides)
            reloaded = self.apply_settings(settings)
            message += f"; applied the new settings (reloading {', '.join(reloaded) or 'none'})"
        self.show_conversation()
        return {"message": message}

    # ------------------------------------------------------------------ the end
    def quit(self) -> None:
        self.qapp.quit()

    def shutdown(self) -> None:
        self.server.close()
        self.hotkey.stop()
        self.mic.close()
        if not self.pipeline.shutdown(timeout_s=3.0):
            log.warning("some pipeline threads did not stop in time")
        if self.tray is not None:
            self.tray.hide()


def _no_display() -> str:
    """Why no window can be shown here ("" when one can)."""
    if os.environ.get("QT_QPA_PLATFORM") or not sys.platform.startswith("linux"):
        return ""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return ""
    return (
        "no display: the s2s-desktop app needs a desktop session "
        "(for headless use try `s2s-desktop run --input question.wav`)"
    )


def run_app(args) -> int:
    overrides = config.parse_overrides(getattr(args, "overrides", None) or [])
    profile = getattr(args, "profile", None)
    why = _no_display()
    if why:
        raise S2SError(why)
    settings, warnings = config.resolve(profile, overrides)  # this launch only: never saved
    from .keychain import fill_api_keys

    fill_api_keys(settings)

    from PySide6.QtWidgets import QApplication

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    qapp.setApplicationName(config.APP_NAME)
    qapp.setApplicationDisplayName("s2s-desktop")
    qapp.setQuitOnLastWindowClosed(False)

    from . import ipc

    try:  # another instance? hand it our arguments and leave
        reply = ipc.request("launch", {"profile": profile, "overrides": overrides})
    except (TimeoutError, ConnectionError, ValueError) as exc:
        reply = None
        log.warning("an earlier instance did not answer (%s); starting anyway", exc)
    if reply is not None:
        print(reply.get("message") or reply.get("error") or "s2s-desktop is already running")
        return 0 if reply.get("ok") else 1

    from .ui.icons import app_icon

    qapp.setWindowIcon(app_icon())
    app = DesktopApp(
        qapp,
        settings,
        warnings,
        verbose=bool(getattr(args, "verbose", False)),
        launch_profile=profile,
        launch_overrides=overrides,
    )
    if not app.start():
        print("s2s-desktop is already running")
        return 0
    # Python only runs signal handlers between bytecodes: a timer lets Ctrl+C / SIGTERM in
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: QTimer.singleShot(0, qapp.quit))
    tick = QTimer(interval=200)
    tick.timeout.connect(lambda: None)
    tick.start()
    qapp.aboutToQuit.connect(app.shutdown)
    return qapp.exec()
