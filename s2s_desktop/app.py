"""The desktop app: one instance per user, the tray (or a floating window) at once, models
loading in the background, and everything wired to the one AppController.

`run_app(args)` is what `s2s-desktop` with no subcommand runs. `--profile` and `--set` apply
to this launch only; they are never written to the settings file. With no settings file the
launch runs what is on disk (launch.py) and offers the recommended models once.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from . import config
from .audio.microphone import Microphone
from .audio.speaker import SpeakerSink
from .audio_format import TTS_DEFAULT_RATE
from .controller import LISTENING, AppController
from .errors import AudioDeviceError, S2SError
from .hands_free.build import HandsFreeBuilder
from .hands_free.session import EchoReferenceSpeaker
from .hands_free.words import PipelineWords
from .history import Exchange, History, current_conversation
from .hotkey.client import HotkeyClient
from .ipc import CommandServer
from .launch import Launch, resolve_launch
from .pipeline.pipeline import Pipeline
from .pipeline.turns import Conversation, FinishedTurn
from .states import TurnReason
from .ui.app_windows import AppWindows

log = logging.getLogger(__name__)

SECOND_LAUNCH_OPTIONS = (
    "s2s-desktop is already running: --profile and --set apply to a launch of their own, so "
    "nothing changed. Change the running app with `s2s-desktop set KEY=VALUE`, or quit it "
    "first (`s2s-desktop quit`)"
)
SPEAKER_LINGER_MS = 500  # the output stays open this long after a turn (its last sound ends)


class DesktopApp(AppWindows, QObject):
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
        launch: Launch | None = None,
    ):
        super().__init__()
        from PySide6.QtWidgets import QSystemTrayIcon

        from .ui.actions import AppActions
        from .ui.conversation_window import ConversationWindow

        self.qapp = qapp
        self.settings = settings
        self.verbose = verbose
        # what this launch runs and what the Settings dialog saves onto
        self.launch = launch or Launch(settings, settings.copy())
        self._session = f"{int(time.time() * 1000):x}"  # history ids: this run's turns
        self._asked: dict[int, str] = {}  # turn -> history id of its question line
        self.notice_posted.connect(self.show_notice, Qt.ConnectionType.QueuedConnection)

        self.history = History(enabled=settings.ui.history_enabled)
        earlier, problems = self.history.load()
        self.conversation = Conversation(current_conversation(earlier))
        # mic / speaker are injectable so tests can run the whole app without sound hardware
        # what it plays is the hands-free echo canceller's reference (nothing while it is off)
        self.speaker = speaker or EchoReferenceSpeaker(
            settings.audio.output_device, on_notice=self.notice_posted.emit
        )
        self.mic = mic or Microphone(
            settings.audio.input_device,
            settings.audio.preroll_ms,
            settings.audio.max_record_s,
            on_notice=self.notice_posted.emit,
            keep_open=settings.audio.keep_mic_open,
        )
        self.pipeline = Pipeline(settings, self.speaker, self.conversation)
        from .ui.tool_permission import ToolPermission

        self.tool_permission = ToolPermission(self)  # Allow / Deny before a writing tool
        self.pipeline.ask_tool = self.tool_permission.ask
        self.controller = AppController(settings, self.pipeline, self.mic)
        # while a question is up the talk key answers it by voice (docs/tools.md)
        self.tool_permission.asked.connect(self.controller.permission_asked)
        self.tool_permission.settled.connect(self.controller.permission_settled)
        self.controller.permission_answer.connect(self.tool_permission.answer)
        # a voice over a reply is transcribed on the STT stage's thread (the engine's only
        # user); a pause's words are the live transcript (hands_free/words.py)
        words = PipelineWords(self.pipeline)
        self.controller.hands_free_factory = HandsFreeBuilder(
            lambda: self.settings, self.speaker, on_notice=self.notice_posted.emit,
            transcript=words.transcript, words_so_far=words.so_far,
        )
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
                "hands-free": self._cmd_hands_free,
            },
            parent=self,
        )
        from .everyday import EverydayFeatures

        self.everyday = EverydayFeatures(self)  # typed questions, stop, copy, timers, sounds
        from .settings_commands import SettingsCommands

        self.settings_commands = SettingsCommands(self)  # `s2s-desktop set` / `get`
        from .ui.voice_offer import VoiceOffer

        self.voice_offer = VoiceOffer(self)  # "Download <voice>…" for a reply without a voice
        for text in list(warnings or []) + problems:
            self.show_notice(text)

    # ------------------------------------------------------------------ wiring
    def _wire(self) -> None:
        c, ev, a = self.controller, self.pipeline.events, self.actions
        c.state_changed.connect(self._state_changed)
        c.speaker_wanted.connect(self._speaker_follows)
        c.notice.connect(self.show_notice)
        ev.transcript.connect(self.window.on_transcript)
        ev.transcript.connect(self._question_heard)
        ev.partial_transcript.connect(self.window.on_transcript)  # live, while the key is held
        ev.reply_delta.connect(self.window.on_reply_delta)
        ev.turn_finished.connect(self.window.on_turn_finished)
        ev.turn_finished.connect(self._remember_turn)
        ev.turn_finished.connect(lambda _rec: self.speaker_used())  # announcements too
        self.hotkey.pressed.connect(c.hotkey_pressed)
        self.hotkey.released.connect(c.hotkey_released)
        self.hotkey.unavailable.connect(self.show_notice)
        self.hotkey.ready.connect(lambda combo: self._state_changed(c.state, c.detail))
        a.talk.triggered.connect(lambda: c.toggle("tray"))
        a.conversation.triggered.connect(self.show_conversation)
        a.new_conversation.triggered.connect(self.new_conversation)
        self.window.new_conversation_requested.connect(self.new_conversation)
        a.settings.triggered.connect(self.open_settings)
        a.models.triggered.connect(self.open_models)
        a.pause_hotkey.toggled.connect(self._pause_hotkey)
        a.hands_free.triggered.connect(self._hands_free_chosen)
        a.quit.triggered.connect(self.quit)

    def start(self) -> bool:
        """Show the tray at once, then load models in the background. False when another
        instance is already running (it was asked to show itself)."""
        if not self.server.listen():
            return False
        if self.tray is not None:
            self.tray.show()
        else:
            self.floating.show()
        if self.settings.ui.show_conversation:
            self.window.show()
        self.pipeline.start()  # each stage loads its model in its own thread
        # kept open: the pre-roll holds audio from before the first press; else opened once
        # and closed, so the first press opens as fast as every later one
        QTimer.singleShot(0, self._prepare_microphone)
        self.hotkey.start()
        if self.settings.listen.hands_free:  # on from the start: it listens once loaded
            self.controller.set_hands_free(True)
        self._first_run_help()
        self._first_run_models()
        return True

    def _prepare_microphone(self) -> None:
        if not self.settings.audio.keep_mic_open:
            if isinstance(self.mic, Microphone):  # off the GUI thread: it can take seconds
                threading.Thread(target=self._warm_up_microphone, daemon=True).start()
            return
        try:
            self.mic.open()
        except AudioDeviceError as exc:
            self.controller.report_error(str(exc))
            self.show_notice(str(exc), error=True)

    def _warm_up_microphone(self) -> None:
        try:
            self.mic.warm_up()
        except AudioDeviceError as exc:  # said again, with its fix, at the press
            log.info("microphone warm-up failed: %s", exc)

    def _state_changed(self, state: str, detail: str) -> None:
        self.controller.hotkey_info = self.hotkey.info()
        hands_free = self.controller.situation.hands_free
        self.actions.show_hands_free(hands_free)
        for view in (self.tray, self.floating):
            if view is not None:
                view.show_state(state, detail, self.controller.hotkey_info, hands_free)
        self.window.show_state(state, detail, self.controller.hotkey_info)

    def _speaker_follows(self, wanted: bool) -> None:
        """The output stream runs only around a turn (an open one costs CPU at idle): opened
        at the press, while the user speaks, or when a typed question is sent, so the reply
        never opens it (a stream just started lost the reply's first words through
        PulseAudio) nor waits for it; closed once the app is idle again (the controller's
        OPEN/CLOSE_SPEAKER effects)."""
        if not isinstance(self.speaker, SpeakerSink):
            return
        if wanted and not self.speaker.is_open:
            engine = self.pipeline.tts.engine
            try:
                self.speaker.open(int(getattr(engine, "sample_rate", TTS_DEFAULT_RATE)))
            except AudioDeviceError as exc:
                self.show_notice(str(exc), error=True)
        elif not wanted and self.speaker.is_open:
            # after what is still queued (an earcon) has played, if nothing started since
            wait_ms = int(self.speaker.queued_seconds() * 1000) + SPEAKER_LINGER_MS
            QTimer.singleShot(wait_ms, self._close_idle_speaker)

    def speaker_used(self) -> None:
        """Something played outside a turn's states (an earcon, a timer's announcement): the
        output closes again once it has been heard, if the app is still idle."""
        if self.controller.state.resting:
            self._speaker_follows(False)

    def _close_idle_speaker(self) -> None:
        if not (self.controller.state.resting and self.speaker.is_open):
            return
        left = self.speaker.queued_seconds()
        if left > 0:  # still playing: look again once it has been heard
            QTimer.singleShot(int(left * 1000) + SPEAKER_LINGER_MS, self._close_idle_speaker)
        else:
            self.speaker.close()

    def _question_heard(self, turn: int, text: str) -> None:
        """The question is saved as soon as it is transcribed: a crash mid-reply keeps it."""
        if not any(ch.isalnum() for ch in text):
            return
        self._asked[turn] = f"{self._session}-{turn}"
        self.history.append(
            Exchange(text.strip(), "", reason=TurnReason.UNANSWERED, id=self._asked[turn])
        )

    def _remember_turn(self, rec: FinishedTurn) -> None:
        exchange = Exchange.from_turn(rec, id=self._asked.pop(rec.turn, ""))
        if exchange is not None:
            self.history.append(exchange)
        if self.verbose:
            log.debug(
                "turn %s: %r → %r (%s)",
                rec.turn,
                rec.transcript,
                rec.reply,
                rec.reason,
            )
        else:  # logs never hold what was said unless asked for (-v)
            log.info(
                "turn %s finished: %s, %s",
                rec.turn,
                rec.reason,
                rec.timings_ms.get("release_to_first_audio"),
            )

    def show_notice(self, text: str, error: bool = False) -> None:
        for view in (self.tray, self.floating, self.window):
            if view is not None:
                view.show_notice(text, error)

    def new_conversation(self) -> None:
        """Start over: the assistant forgets the earlier exchanges (they stay in the window
        and the saved history, after a marker that a restart honours too)."""
        self.controller.new_conversation()
        self.history.append(Exchange("", "", reason=TurnReason.NEW_CONVERSATION))
        self.window.mark_new_conversation()
        self.show_notice("New conversation: the earlier questions are forgotten")

    def _pause_hotkey(self, paused: bool) -> None:
        self.hotkey.set_paused(paused)
        self._state_changed(self.controller.state, self.controller.detail)

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
            # a closed one too: it opens on the new device at the next press (or when
            # hands-free, which closed it, ends)
            self.mic.device_name = settings.audio.input_device
            if self.mic.is_open:
                try:
                    self.mic.open()
                except AudioDeviceError as exc:
                    self.controller.report_error(str(exc))
        if isinstance(self.mic, Microphone):
            self.mic.preroll_s = max(0.3, settings.audio.preroll_ms / 1000)
            self.mic.max_record_s = settings.audio.max_record_s
            self.mic.keep_open = settings.audio.keep_mic_open
            # hands-free listening has the microphone: one open at a time
            listening = self.controller.situation.hands_free_listening
            if self.mic.keep_open and not self.mic.is_open and not listening:
                try:
                    self.mic.open()
                except AudioDeviceError as exc:
                    self.controller.report_error(str(exc))
            elif not self.mic.stays_open and self.mic.is_open and not self.mic.recording:
                self.mic.close()
        if settings.audio.output_device != old.audio.output_device and isinstance(
            self.speaker, SpeakerSink
        ):
            self.speaker.device_name = settings.audio.output_device
            self.speaker.close()
            self.speaker.rate = 0  # reopened on the next reply
        models = self._dialogs.get("models")
        if models is not None:
            models.set_settings(settings.copy())  # "in use" follows what runs
        self.everyday.apply_settings(old, settings)
        if settings.listen.hands_free != old.listen.hands_free:  # `set listen.hands_free=…`
            self.controller.set_hands_free(settings.listen.hands_free)
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
        if name != "talk-stop" and before != LISTENING and c.state != LISTENING:
            return {
                "ok": False,
                "error": c.last_notice or c.error_now or f"cannot start listening while {c.state}",
                "state": c.state,
            }
        return {"state": c.state, "message": c.state}

    def _hands_free_chosen(self, on: bool) -> None:
        """The menu's checkable action: it checked itself; it shows what happened (a start that
        failed leaves it unchecked, with the notice saying why)."""
        self.controller.set_hands_free(on)
        self.actions.show_hands_free(self.controller.situation.hands_free)

    def _cmd_hands_free(self, req: dict) -> dict:
        c = self.controller
        c.last_notice = ""
        on = bool(req.get("on"))
        c.set_hands_free(on)
        if c.situation.hands_free is not on:
            return {"ok": False, "error": c.last_notice or c.last_error, "state": c.state}
        word = "on" if on else "off"
        waits = " (it listens once the models are loaded)" if on and c.state == "loading" else ""
        return {"state": c.state, "hands_free": on,
                "message": f"hands-free conversation {word}{waits}"}

    def _cmd_quit(self, req: dict) -> dict:
        QTimer.singleShot(0, self.quit)
        return {"message": "s2s-desktop is quitting"}

    def _cmd_launch(self, req: dict) -> dict:
        """A second `s2s-desktop` launch: show the window. Its --profile / --set are for a
        launch of its own: the running app keeps its settings."""
        self.show_conversation()
        if req.get("profile") or req.get("overrides"):
            return {"ok": False, "error": SECOND_LAUNCH_OPTIONS}
        return {"message": "s2s-desktop is already running"}

    # ------------------------------------------------------------------ the end
    def quit(self) -> None:
        self.qapp.quit()

    def shutdown(self) -> None:
        self.everyday.shutdown()
        self.server.close()
        self.hotkey.stop()
        self.controller.close_hands_free()  # its microphone closes with the app
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
    launch = resolve_launch(profile, overrides)  # --profile / --set: this launch only
    from .keychain import fill_api_keys

    fill_api_keys(launch.settings)

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
        if not reply.get("ok"):
            print(f"error: {reply.get('error')}", file=sys.stderr)
            return 1
        print(reply.get("message") or "s2s-desktop is already running")
        return 0

    from .ui.icons import app_icon

    qapp.setWindowIcon(app_icon())
    _alsa_messages_to_log()
    app = DesktopApp(
        qapp,
        launch.settings,
        launch.warnings,
        verbose=bool(getattr(args, "verbose", False)),
        launch=launch,
    )
    if not app.start():
        print("s2s-desktop is already running")
        return 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: QTimer.singleShot(0, qapp.quit))
    wakeup = _wake_on_signals(qapp)  # noqa: F841 (kept alive while the loop runs)
    qapp.aboutToQuit.connect(app.shutdown)
    return qapp.exec()


def _alsa_messages_to_log() -> None:
    try:  # PortAudio sets its own ALSA handler when sounddevice is imported: ours goes after
        import sounddevice  # noqa: F401
    except (ImportError, OSError):
        return  # no PortAudio: opening the microphone says so
    from .audio.alsa_log import route_alsa_messages_to_log

    route_alsa_messages_to_log()


def _wake_on_signals(qapp):
    """Python runs signal handlers only between bytecodes, and Qt's loop sleeps in C: the
    signal module writes to a socket Qt watches, so Ctrl+C / SIGTERM wake the loop at once
    (no timer ticking at idle)."""
    import socket

    from PySide6.QtCore import QSocketNotifier

    read_end, write_end = socket.socketpair()
    for end in (read_end, write_end):
        end.setblocking(False)
    signal.set_wakeup_fd(write_end.fileno())
    notifier = QSocketNotifier(read_end.fileno(), QSocketNotifier.Type.Read, qapp)

    def drain() -> None:
        try:
            read_end.recv(64)
        except OSError:
            pass

    notifier.activated.connect(drain)
    return read_end, write_end, notifier
