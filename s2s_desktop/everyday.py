"""The everyday features wired into the running app: typed questions (the conversation
window's box, `s2s-desktop ask`), Stop (tray, window button, Esc, `s2s-desktop stop`), Copy
last answer, running timers in the tray menu and their ring, and earcons.

The engines stay Qt-free (assistant/); this is their Qt side, attached to a DesktopApp.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import QMenu

from .assistant.autostart import Autostart
from .assistant.autostart import for_platform as autostart_for_platform
from .assistant.autostart import sync as sync_autostart
from .assistant.earcons import Earcon, EarconPlayer
from .assistant.timers import Timer
from .controller import IDLE, LISTENING
from .dictation_key import DictationKey
from .pipeline.turns import FinishedTurn
from .states import AppState

log = logging.getLogger(__name__)

KEEP_RECORDS = 32  # finished turns kept for `s2s-desktop ask` to collect


def clock_left(seconds: float) -> str:
    """'4:05' or '1:02:03' left."""
    s = int(seconds + 0.999)
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class EarconsAtIdle(EarconPlayer):
    """Earcons on the app's speaker; one played while the app is idle (the dictation key's)
    closes the output again once heard."""

    def __init__(self, app, audio_settings):
        super().__init__(app.speaker, audio_settings)
        self.app = app

    def play(self, earcon: Earcon) -> float:
        heard_by = super().play(earcon)
        self.app.speaker_used()
        return heard_by


class EverydayFeatures(QObject):
    timer_rang = Signal(object)  # a Timer, from its own thread
    timers_changed = Signal()  # from any thread

    def __init__(self, app, autostart: Autostart | None = None):
        super().__init__(app)
        self.app = app
        self.pipeline = app.pipeline
        self.controller = app.controller
        self.records: dict[int, FinishedTurn] = {}  # finished turns, for `ask` to collect
        self._announce_waiting: list[str] = []  # timers due during a turn: said after it

        self.earcons = EarconsAtIdle(app, lambda: app.settings.audio)
        self.controller.sounds = lambda name: self.earcons.play(Earcon(name))

        self.stop_speaking = QAction("Stop Speaking", self)
        self.stop_speaking.setToolTip("Stop the reply; it is kept as far as it was spoken")
        self.stop_speaking.setEnabled(False)
        self.stop_speaking.triggered.connect(self.stop)
        self.copy_answer = QAction("Copy Last Answer", self)
        self.copy_answer.setToolTip("Put the assistant's last answer on the clipboard")
        self.copy_answer.triggered.connect(self.copy_last_answer)
        self.timers_menu = QMenu("Timers")
        self.timers_action = self.timers_menu.menuAction()
        self.timers_action.setVisible(False)
        self._add_to_menus()

        self.pipeline.timers.on_due = self.timer_rang.emit
        self.pipeline.timers.listeners.append(self.timers_changed.emit)
        queued = Qt.ConnectionType.QueuedConnection
        self.timer_rang.connect(self._timer_due, queued)
        self.timers_changed.connect(self._show_timers, queued)
        self.pipeline.events.turn_finished.connect(self._keep_record)
        self.controller.state_changed.connect(self._state_changed)
        app.window.ask_bar.asked.connect(self.ask)
        app.window.ask_bar.stop_requested.connect(self.stop)
        app.server.handlers.update(ask=self._cmd_ask, stop=self._cmd_stop, turn=self._cmd_turn)
        self._idle = QTimer(self, singleShot=True)  # ui.unload_after_minutes
        self._idle.timeout.connect(self._unload_idle_models)
        self.dictation = DictationKey(app, earcons=self.earcons)
        QTimer.singleShot(0, self.dictation.start)  # its own key helper, when a combo is set
        self.autostart = autostart or autostart_for_platform()
        self.sync_autostart(app.settings.ui.start_at_login)  # the OS follows the setting

    def apply_settings(self, old, new) -> None:
        self.dictation.apply_settings(old, new)
        if new.ui.unload_after_minutes != old.ui.unload_after_minutes:
            self._state_changed(self.controller.state, self.controller.detail)
        if new.ui.start_at_login != old.ui.start_at_login:
            self.sync_autostart(new.ui.start_at_login)

    def sync_autostart(self, start_at_login: bool) -> None:
        try:
            changed = sync_autostart(start_at_login, self.autostart)
        except OSError as exc:
            self.app.show_notice(str(exc), error=True)
            return
        if changed:
            log.info("%s", changed)

    def _add_to_menus(self) -> None:
        """After Talk in the tray's menu, or where there is no tray, in the floating window."""
        extras = [self.stop_speaking, self.copy_answer, self.timers_action]
        tray, floating = self.app.tray, self.app.floating
        if tray is not None:
            self.app.actions.insert_after_talk(tray.menu, extras)
            tray.menu.aboutToShow.connect(self._show_timers)  # the time left, fresh each time
        if floating is not None:
            floating.add_extras(extras)
            floating.menu.aboutToShow.connect(self._show_timers)
            self.timers_menu.aboutToShow.connect(self._show_timers)

    def shutdown(self) -> None:
        self.dictation.stop()

    # ------------------------------------------------------------------ actions
    def ask(self, text: str) -> int:
        """A typed question: shown, answered and spoken like a spoken turn."""
        return self.controller.ask(text)

    def stop(self) -> None:
        """Silence the reply (or a timer's announcement); kept as far as it was spoken. A
        recording goes on: Stop is for what the assistant says."""
        if self.controller.state != LISTENING:
            self.controller.interrupt()

    def copy_last_answer(self) -> str:
        answer = self.app.conversation.last_reply()
        if answer:
            QGuiApplication.clipboard().setText(answer)
            self.app.show_notice("Copied the last answer")
        else:
            self.app.show_notice("There is no answer to copy yet")
        return answer

    def _state_changed(self, state: str, detail: str) -> None:
        self.stop_speaking.setEnabled(AppState(state).answering)
        minutes = self.app.settings.ui.unload_after_minutes
        if state == IDLE and minutes > 0:
            self._idle.start(int(minutes * 60_000))
        else:
            self._idle.stop()
        if not AppState(state).busy and self._announce_waiting:
            for text in self._announce_waiting:
                self._announce(text)
            self._announce_waiting.clear()

    def _unload_idle_models(self) -> None:
        if not self.dictation.recording:
            self.controller.unload_idle_models()

    # ------------------------------------------------------------------ timers
    def _timer_due(self, timer: Timer) -> None:
        text = self.pipeline.local.timer_done_text(timer.label)
        self.app.show_notice(text)
        if self.controller.state.busy:
            self._announce_waiting.append(text)  # said once the turn is over, not over it
        else:
            self._announce(text)

    def _announce(self, text: str) -> None:
        # the timer's chime plays even with earcons off: it is the timer, not a cue
        volume = max(0.5, self.app.settings.audio.earcon_volume)
        chime = EarconPlayer(self.app.speaker, lambda: SimpleNamespace(
            earcons=True, earcon_volume=volume))
        self.pipeline.say(text, chime=chime.samples(Earcon.TIMER))

    def _show_timers(self) -> None:
        running = self.pipeline.timers.running()
        self.timers_menu.clear()
        for timer in running:
            action = self.timers_menu.addAction(
                f"Cancel {timer.label} timer ({clock_left(timer.left_s())} left)"
            )
            action.triggered.connect(lambda _=False, i=timer.id: self.pipeline.timers.cancel(i))
        if len(running) > 1:
            self.timers_menu.addSeparator()
            self.timers_menu.addAction("Cancel All").triggered.connect(
                lambda: self.pipeline.timers.cancel()
            )
        self.timers_action.setText(f"Timers ({len(running)})")
        self.timers_action.setVisible(bool(running))

    # ------------------------------------------------------------------ commands (IPC)
    def _keep_record(self, rec: FinishedTurn) -> None:
        self.records[rec.turn] = rec
        for old in sorted(self.records)[:-KEEP_RECORDS]:
            del self.records[old]

    def _cmd_ask(self, req: dict) -> dict:
        text = req.get("text")
        if not isinstance(text, str) or not text.strip():
            return {"ok": False, "error": 'the question is empty: s2s-desktop ask "TEXT"'}
        return {"turn": self.ask(text), "message": "asked"}

    def _cmd_turn(self, req: dict) -> dict:
        rec = self.records.get(req.get("turn"))
        return {"record": rec.to_dict() if rec is not None else None}

    def _cmd_stop(self, req: dict) -> dict:
        before = self.controller.state
        self.stop()
        return {"message": "stopped" if before.answering else "nothing to stop"}

