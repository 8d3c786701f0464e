"""The one owner of the app's state: idle / listening / thinking / speaking / error / loading.

Every event goes through here — hotkey press and release, the tray's Talk, the CLI's toggle /
talk-start / talk-stop, and the pipeline's news — so debounce, release grace, taps, the
recording cap and barge-in live in one place. QtCore only: it runs headless in tests.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer, Signal

from .config import STAGES, Settings
from .errors import AudioDeviceError
from .pipeline.turns import FinishedTurn
from .states import AppState, StageState, TurnReason

log = logging.getLogger(__name__)

LOADING, IDLE, LISTENING, THINKING, SPEAKING, ERROR = AppState
STATES = tuple(AppState)
TOO_SHORT = TurnReason.TOO_SHORT  # a tap's turn ends with this reason, not "interrupted"
_BUSY = (StageState.LOADING, StageState.RELOADING)  # a stage that is not ready yet
NOTHING_HEARD = "Nothing was heard: hold the key while you speak"


class Recorder(Protocol):
    """What the controller needs from the microphone (audio.microphone.Microphone)."""

    def start_recording(self, since: float | None = None, on_chunk=None) -> None: ...
    def stop_recording(self) -> np.ndarray: ...
    def cancel_recording(self) -> None: ...
    def check(self) -> None: ...


class AppController(QObject):
    state_changed = Signal(str, str)  # state, one line saying what is happening / what failed
    notice = Signal(str)  # a hint the user should see (tap ignored, still loading, cap reached)
    turn_submitted = Signal(int)
    _audio_flowing = Signal(int)  # from the audio thread: the microphone delivers (turn)

    def __init__(self, settings: Settings, pipeline, recorder: Recorder, clock=time.monotonic):
        super().__init__()
        self.settings = settings
        self.pipeline = pipeline
        self.recorder = recorder
        self.clock = clock
        self.state = LOADING
        self.detail = "0 of 4 ready, loading vad, stt, llm, tts"
        self.last_notice = ""
        self.last_error = ""  # the last error seen, kept for `status`
        self.error_now = ""  # what put the app in the error state (cleared by the next press)
        self.load_errors: dict[str, str] = {}
        self.stage_states: dict[str, str] = {s: StageState.LOADING for s in STAGES}
        self.hotkey_info: dict = {}
        self.current_turn = 0
        self.turn_info: dict = {}
        self._pressed_at: float | None = None  # start of the recording now running
        self._source = ""
        self._last_press = -1e9
        self._release_at: float | None = None  # release waiting out its grace
        self._speaking_ended = 0.0  # pre-roll never reaches back into the assistant's voice
        # earcons: play(name) -> monotonic time by which the sound has been heard (0: none)
        self.sounds = None

        self._grace = QTimer(self, singleShot=True)
        self._grace.timeout.connect(self._release_committed)
        self._cap = QTimer(self, singleShot=True)
        self._cap.timeout.connect(self._cap_reached)
        self._watchdog = QTimer(self, interval=250)
        self._watchdog.timeout.connect(self._check_microphone)

        self._start_sound_due: tuple[int, float] | None = None  # (turn, press time)
        self._audio_flowing.connect(self._play_start_sound, Qt.ConnectionType.QueuedConnection)

        ev = pipeline.events  # emitted from stage threads: default (queued) connections
        ev.stage_state.connect(self._on_stage_state)
        ev.first_audio.connect(self._on_first_audio)
        ev.turn_finished.connect(self._on_turn_finished)
        ev.error.connect(self._on_error)
        ev.notice.connect(self.notice)

    # ------------------------------------------------------------------ inputs
    def hotkey_pressed(self, at: float | None = None) -> None:
        at = self._now(at)
        if self._grace.isActive():  # key bounce / auto-repeat inside the release grace
            self._grace.stop()
            self._release_at = None
            return
        if at - self._last_press < self.settings.hotkey.debounce_ms / 1000:
            return
        self._last_press = at
        if self.settings.hotkey.mode == "toggle":
            self.toggle("hotkey", at)
        else:
            self.talk_start("hotkey", at)

    def hotkey_released(self, at: float | None = None) -> None:
        if self.settings.hotkey.mode != "hold" or self.state != LISTENING:
            return
        if self._source not in ("hotkey", "button"):
            return  # a recording started from the tray or CLI ends the same way
        self._release_at = self._now(at)
        self._grace.start(max(0, self.settings.hotkey.release_grace_ms))
        self.pipeline.key_up(self.current_turn)  # STT need not wait out the grace

    def button_pressed(self) -> None:
        """The floating window's Talk button: held like the hotkey in hold mode."""
        if self.settings.hotkey.mode == "toggle":
            self.toggle("button")
        else:
            self.talk_start("button")

    def button_released(self) -> None:
        if (
            self.settings.hotkey.mode == "hold"
            and self.state == LISTENING
            and self._source == "button"
        ):
            self._finish(self._now(None), "button")

    def toggle(self, source: str = "cli", at: float | None = None) -> None:
        if self.state == LISTENING:
            self.talk_stop(source, at)
        else:
            self.talk_start(source, at)

    def talk_start(self, source: str = "cli", at: float | None = None) -> bool:
        """Start listening (barge-in if the assistant is busy). False when it cannot."""
        at = self._now(at)
        if self.state == LISTENING:
            return True
        if self.state == LOADING:
            self._hint(self._loading_hint())
            return False
        if self.load_errors:
            self._hint(f"Cannot listen: {self._load_error_line()}")
            return False
        since = self._speaking_ended
        info = {}
        if self.state in (THINKING, SPEAKING):
            info["interrupt_pressed_at"] = at
            self.pipeline.interrupt()  # barge-in: playback stops before we start recording
            info["interrupted_at"] = self.clock()
            since = self.clock()  # no pre-roll: it holds the assistant's own voice
        # a live turn: the recording is fed to the pipeline as it grows, so speech-to-text
        # runs while the key is held and little is left to do at release
        turn = self.pipeline.begin_turn(source=source)
        # the start sound plays once the microphone really delivers audio (a device may take
        # a second to start), so a user who waits for it loses nothing. Nothing heard after
        # the press is dropped, the sound included: dropping even its 120 ms took the first
        # word of a question said at once ("What is…" heard as "But is…", issue 33)
        live, press_thread = [False], threading.get_ident()
        self._start_sound_due = (turn, time.monotonic())

        def on_chunk(pcm, t=turn):
            if threading.get_ident() == press_thread:  # the pre-roll: audio already flows
                live[0] = True
            elif not live[0]:  # the first block of a stream just opened
                live[0] = True
                self._audio_flowing.emit(t)
            self.pipeline.feed(t, pcm)

        try:
            self.recorder.start_recording(since=since, on_chunk=on_chunk)
        except AudioDeviceError as exc:
            self.pipeline.interrupt()
            self._fail(str(exc))
            return False
        self.current_turn = turn
        self.turn_info = {"id": turn, "source": source, "pressed_at": at, **info}
        self._pressed_at, self._source = at, source
        self.error_now = ""
        self._cap.start(int(self.settings.audio.max_record_s * 1000))
        self._watchdog.start()
        if live[0]:  # a warm microphone: heard from the press on
            self._start_sound_now()
        self._set(LISTENING, "Listening…")
        return True

    def talk_stop(self, source: str = "cli", at: float | None = None) -> None:
        if self.state == LISTENING:
            self._finish(self._now(at), source)

    def ask(self, text: str, source: str = "typed") -> int:
        """A typed question: answered, spoken and recorded like a spoken turn (barge-in on a
        reply the same way; a running recording is dropped). Returns the turn id."""
        if self.state == LISTENING:
            self._drop_recording()
        turn = self.pipeline.submit_text(text, source=source)  # ValueError when empty
        self.current_turn = turn
        self.turn_info = {"id": turn, "source": source, "pressed_at": self.clock()}
        self.error_now = ""
        self._set(THINKING, "Thinking…")
        self.turn_submitted.emit(turn)
        return turn

    def interrupt(self) -> None:
        """Stop whatever runs (recording or reply) and go idle."""
        if self.state == LISTENING:
            self._drop_recording()
            self._settle()
        elif self.state in (THINKING, SPEAKING):
            self.pipeline.interrupt()
            self.turn_info["interrupted_at"] = self.clock()
            self._speaking_ended = self.clock()
            self._settle()

    def apply_settings(self, settings: Settings) -> None:
        self.settings = settings

    def _play_start_sound(self, turn: int) -> None:
        """A microphone opened on the press delivers its first audio (queued from the audio
        thread): the start sound says "listening" now, when nothing said is lost any more."""
        due = self._start_sound_due
        if due is not None and due[0] == turn and self.state == LISTENING:
            log.info("listening: the microphone delivered %.0f ms after the press",
                     (time.monotonic() - due[1]) * 1000)
            self._start_sound_now()

    def _start_sound_now(self) -> None:
        """Play the start sound, once per turn."""
        if self._start_sound_due is not None:
            self._start_sound_due = None
            self._sound("listen-start")

    # ------------------------------------------------------------------ recording ends
    def _release_committed(self) -> None:
        at, self._release_at = self._release_at, None
        if self.state == LISTENING and at is not None:
            self._finish(at, self._source)

    def _cap_reached(self) -> None:
        if self.state != LISTENING:
            return
        limit = self.settings.audio.max_record_s
        self._hint(f"Recording stopped at the {limit:g} s limit (audio.max_record_s)")
        self._finish(self.clock(), self._source, check_tap=False)
        self.turn_info["capped"] = True

    def _finish(self, released_at: float, source: str, check_tap: bool = True) -> None:
        pressed_at = self._pressed_at if self._pressed_at is not None else released_at
        self._stop_timers()
        self._pressed_at = None
        held_ms = (released_at - pressed_at) * 1000
        if check_tap and held_ms < self.settings.audio.min_press_ms:
            self._drop_recording(TOO_SHORT)
            self._settle()
            what = (
                "Hold the key while you speak"
                if self.settings.hotkey.mode == "hold" and source in ("hotkey", "button")
                else "Speak a little longer"
            )
            self._hint(f"{what}: presses under {self.settings.audio.min_press_ms} ms are ignored")
            return
        try:
            audio = self.recorder.stop_recording()
        except AudioDeviceError as exc:
            self.pipeline.interrupt()
            self._fail(str(exc))
            return
        turn = self.current_turn
        self.pipeline.end_turn(turn, released_at=released_at)
        self._sound("listen-stop")
        self.turn_info.update(
            source=source,
            released_at=released_at,
            submitted_at=self.clock(),
            audio_s=round(len(audio) / 16000, 2),
        )
        self._set(THINKING, "Thinking…")
        self.turn_submitted.emit(turn)

    def _drop_recording(self, reason: str = TurnReason.INTERRUPTED) -> None:
        """A recording that will not become a turn (tap, cancel, lost device)."""
        self._stop_timers()
        self._pressed_at = None
        self.recorder.cancel_recording()
        self.pipeline.interrupt(reason=reason)  # closes the live turn

    def _check_microphone(self) -> None:
        if self.state != LISTENING:
            self._watchdog.stop()
            return
        try:
            self.recorder.check()
        except AudioDeviceError as exc:
            self._drop_recording()
            self._fail(str(exc))

    def _stop_timers(self) -> None:
        self._grace.stop()
        self._cap.stop()
        self._watchdog.stop()
        self._release_at = None

    # ------------------------------------------------------------------ pipeline news
    def _on_stage_state(self, stage: str, state: str, detail: str) -> None:
        if stage not in self.stage_states:
            return
        self.stage_states[stage] = state
        if state == StageState.FAILED:
            self.load_errors[stage] = detail
        elif state in (StageState.READY, StageState.LOADING, StageState.RELOADING):
            self.load_errors.pop(stage, None)
        if self.state in (LISTENING, THINKING, SPEAKING):
            return  # a turn is running; the state settles when it ends
        self._settle()

    def _settle(self) -> None:
        """Loading, error or idle, from what the stages report (between turns)."""
        if any(s in _BUSY for s in self.stage_states.values()):
            self._set(LOADING, self._loading_progress())
        elif self.load_errors:
            self.last_error = self._load_error_line()
            self._set(ERROR, self.last_error)
        elif self.error_now:  # a device or turn error stays shown until the next press
            self._set(ERROR, self.error_now)
        else:
            self._set(IDLE, "Ready")

    def _on_first_audio(self, turn: int) -> None:
        if turn == self.current_turn:
            self.turn_info["first_audio_at"] = self.clock()
            if self.state == THINKING:
                self._set(SPEAKING, "Speaking…")

    def _on_turn_finished(self, rec: FinishedTurn) -> None:
        if rec.turn != self.current_turn:
            return
        self.turn_info.update(
            finished_at=self.clock(),
            reason=rec.reason,
            timings_ms=rec.timings_ms,
        )
        if self.state not in (THINKING, SPEAKING):
            return  # stopped by hand, or the live turn was dropped
        self._speaking_ended = self.clock()
        if rec.reason == TurnReason.ERROR:
            self._fail(rec.error or "the turn failed")
            return
        if rec.reason == TurnReason.NO_SPEECH:
            self._hint(NOTHING_HEARD)
        self._settle()

    def _on_error(self, stage: str, message: str) -> None:
        self.last_error = message if message.startswith(stage) else f"{stage}: {message}"

    # ------------------------------------------------------------------ state
    def _set(self, state: str, detail: str) -> None:
        changed = (state, detail) != (self.state, self.detail)
        self.state, self.detail = state, detail
        if changed:
            log.info("state: %s", state)
            self.state_changed.emit(state, detail)

    def _sound(self, name: str) -> float:
        return self.sounds(name) if self.sounds is not None else 0.0

    def _fail(self, message: str) -> None:
        self._sound("error")
        self.last_error = self.error_now = message
        self._set(ERROR, message)

    def report_error(self, message: str) -> None:
        """An error found outside a turn (the microphone at start): shown once loading ends."""
        self.last_error = self.error_now = message
        if self.state in (IDLE, ERROR):
            self._set(ERROR, message)

    def _hint(self, text: str) -> None:
        log.info("notice: %s", text)
        self.last_notice = text
        self.notice.emit(text)

    def _now(self, at: float | None) -> float:
        now = self.clock()
        # a helper process's timestamp is used when it is on our clock and plausible
        return at if at is not None and now - 2.0 <= at <= now + 0.01 else now

    def _loading_progress(self) -> str:
        ready = sum(1 for s in self.stage_states.values() if s == StageState.READY)
        waiting = [s for s, st in self.stage_states.items() if st in _BUSY]
        return f"{ready} of {len(self.stage_states)} ready, loading {', '.join(waiting)}"

    def _loading_hint(self) -> str:
        return f"Models are still loading ({self._loading_progress()}): try again in a moment"

    def _load_error_line(self) -> str:
        """Every stage that failed, each with its fix, in one line."""
        return "; ".join(
            message if message.startswith(stage) else f"{stage} failed to load: {message}"
            for stage, message in self.load_errors.items()
        )

    def status(self) -> dict:
        return {
            "state": self.state,
            "detail": self.detail,
            "models": self.pipeline.loaded(),
            "stages": dict(self.stage_states),
            "last_error": self.last_error,
            "hotkey": dict(self.hotkey_info),
            "turn": dict(self.turn_info),
            "clock": self.clock(),
        }
