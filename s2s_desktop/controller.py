"""The one owner of the app's state: idle / listening / thinking / speaking / error / loading.

Every event goes through here — hotkey press and release, the tray's Talk, the CLI's toggle /
talk-start / talk-stop, typed questions, Stop, and the pipeline's news. What each event does
is decided by the pure `transitions.transition`; this is its thin Qt shell: it conditions the
key (debounce, release grace, a double tap), turns inputs into events, and runs the effects
(recording, earcons, timers, notices, the speaker; hands-free conversation's in
hands_free/effects.py). QtCore only: it runs headless in tests.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer, Signal

from .assistant.yes_no import Answer, classify
from .audio_format import SAMPLE_RATE
from .config import Settings
from .errors import AudioDeviceError
from .hands_free.effects import DOUBLE_TAP_S, HandsFreeEffects
from .pipeline.turns import FinishedTurn
from .states import ASKING_DETAIL, STAGES, AppState, StageState, TurnReason
from .transitions import Event, Readiness, Situation, transition

log = logging.getLogger(__name__)

LOADING, IDLE, LISTENING, THINKING, SPEAKING, ERROR = AppState
STATES = tuple(AppState)
TOO_SHORT = TurnReason.TOO_SHORT  # a tap's turn ends with this reason, not "interrupted"
_BUSY = (StageState.LOADING, StageState.RELOADING)  # a stage that is not ready yet
NOTHING_HEARD = "Nothing was heard: hold the key while you speak"
SAY_YES_OR_NO = "Hold the key and say yes or no, or click Allow / Deny"
UNCLEAR_ANSWERS = 2  # the second unclear spoken answer to a tool's question counts as no


class Recorder(Protocol):
    """What the controller needs from the microphone (audio.microphone.Microphone)."""

    def start_recording(self, since: float | None = None, on_chunk=None) -> None: ...
    def stop_recording(self) -> np.ndarray: ...
    def cancel_recording(self) -> None: ...
    def check(self) -> None: ...


class AppController(HandsFreeEffects, QObject):
    state_changed = Signal(str, str)  # state, one line saying what is happening / what failed
    notice = Signal(str)  # a hint the user should see (tap ignored, still loading, cap reached)
    speaker_wanted = Signal(bool)  # open the output now (True) / once what is queued played
    _audio_flowing = Signal(int)  # from the audio thread: the microphone delivers (turn)
    hands_free_event = Signal(object, object)  # from the listener's thread: (session, event)
    permission_answer = Signal(bool)  # the user's spoken yes / no to a tool's question
    _answer_heard = Signal(int, str)  # from the STT thread: (question, transcript)

    def __init__(self, settings: Settings, pipeline, recorder: Recorder, clock=time.monotonic):
        super().__init__()
        self.settings = settings
        self.pipeline = pipeline
        self.recorder = recorder
        self.clock = clock
        self.situation = Situation()
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
        # what the effects of the event being dispatched read
        self._press: tuple[str, float] = ("", 0.0)  # source and time of the press
        self._barge_in: dict = {}  # when the reply a press interrupted was stopped
        self._key_up_at = 0.0
        self._released_at = 0.0  # the end of the recording being submitted
        self._question = ""  # the typed question
        self._release_at: float | None = None  # release waiting out its grace
        self._speaking_ended = 0.0  # pre-roll never reaches back into the assistant's voice
        self._depth = 0  # dispatches running: the outermost one shows the state
        self._shown = (self.state, self.detail, False)  # what state_changed last said (and
        # whether hands-free was on: the views show it too)
        # earcons: play(name) -> monotonic time by which the sound has been heard (0: none)
        self.sounds = None

        self._grace = QTimer(self, singleShot=True)
        self._grace.timeout.connect(self._release_committed)
        self._cap = QTimer(self, singleShot=True)
        self._cap.timeout.connect(self._cap_reached)
        self._watchdog = QTimer(self, interval=250)
        self._watchdog.timeout.connect(self._check_microphone)
        # a tap's hint waits out the chance of a second tap (a double tap toggles hands-free)
        self._tap_hint = QTimer(self, singleShot=True)
        self._tap_hint.timeout.connect(lambda: self._hint(self._tap_text))
        self._tap_text = ""

        self._start_sound_due: tuple[int, float] | None = None  # (turn, press time)
        self._question_no = 0  # the tool question now waiting (a late transcript is dropped)
        self._unclear = 0  # unclear spoken answers to it so far
        self._answer_heard.connect(self._on_answer_heard, Qt.ConnectionType.QueuedConnection)
        self._audio_flowing.connect(self._play_start_sound, Qt.ConnectionType.QueuedConnection)
        self.hands_free_event.connect(
            self._on_hands_free_event, Qt.ConnectionType.QueuedConnection
        )

        ev = pipeline.events  # emitted from stage threads: default (queued) connections
        ev.stage_state.connect(self._on_stage_state)
        ev.transcript.connect(self._on_transcript)
        ev.first_audio.connect(self._on_first_audio)
        ev.turn_finished.connect(self._on_turn_finished)
        ev.error.connect(self._on_error)
        ev.notice.connect(self.notice)

    @property
    def state(self) -> AppState:
        return self.situation.state

    # ------------------------------------------------------------------ inputs
    def hotkey_pressed(self, at: float | None = None) -> None:
        at = self._now(at)
        # a double tap: the first press was a tap (its recording would be dropped as too
        # short), the second comes within DOUBLE_TAP_S of it. A key up still inside its grace
        # is key repeat or bounce, not a tap
        since, tap_s = at - self._last_press, self.settings.audio.min_press_ms / 1000
        if self.settings.hotkey.mode == "toggle":
            tapped = since < tap_s
        else:
            up = self._key_up_at - self._last_press
            tapped = 0 < up < tap_s and not self._grace.isActive()
        # while a tool's question waits, a tap then a hold is the user answering, not a toggle
        tapped = tapped and not self.situation.asking
        if tapped and self.settings.hotkey.debounce_ms / 1000 <= since < DOUBLE_TAP_S:
            # a double tap: the first tap's recording is dropped, hands-free turns on or off
            self._last_press = -1e9
            self._tap_hint.stop()
            self.toggle_hands_free()
            return
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
        if self.settings.hotkey.mode != "hold" or self._source not in ("hotkey", "button"):
            return  # a recording started from the tray or CLI ends the same way
        self._key_up_at = self._now(at)
        self._dispatch(Event.KEY_UP)

    def button_pressed(self) -> None:
        """The floating window's Talk button: held like the hotkey in hold mode."""
        if self.settings.hotkey.mode == "toggle":
            self.toggle("button")
        else:
            self.talk_start("button")

    def button_released(self) -> None:
        if self.settings.hotkey.mode == "hold" and self._source == "button":
            self._end_recording(self._now(None), "button")

    def toggle(self, source: str = "cli", at: float | None = None) -> None:
        if self.situation.recording_by_key:
            self.talk_stop(source, at)
        else:
            self.talk_start(source, at)

    def talk_start(self, source: str = "cli", at: float | None = None) -> bool:
        """Start listening (barge-in if the assistant is busy). False when it cannot."""
        self._press = (source, self._now(at))
        self._dispatch(Event.PRESS)
        return self.state == LISTENING

    def talk_stop(self, source: str = "cli", at: float | None = None) -> None:
        self._end_recording(self._now(at), source)

    def ask(self, text: str, source: str = "typed") -> int:
        """A typed question: answered, spoken and recorded like a spoken turn (barge-in on a
        reply the same way; a running recording is dropped). Returns the turn id."""
        self._question, self._source = text, source
        self._dispatch(Event.ASK)  # ValueError when empty
        return self.current_turn

    def interrupt(self) -> None:
        """Stop whatever runs (recording or reply) and go idle."""
        self._dispatch(Event.STOP)

    def new_conversation(self) -> None:
        self._dispatch(Event.NEW_CONVERSATION)

    def permission_asked(self) -> None:
        """A tool's yes/no question is up: the talk key now answers it (no barge-in)."""
        self._question_no += 1
        self._unclear = 0
        self._dispatch(Event.ASKED)

    def permission_settled(self) -> None:
        """The question was answered (by voice, a click, Stop or its time limit)."""
        self._question_no += 1  # a transcript still on its way answers nothing now
        self._dispatch(Event.ANSWERED)

    def unload_idle_models(self) -> None:
        """ui.unload_after_minutes ran out: free the models if the app is still idle."""
        self._dispatch(Event.IDLE_UNLOAD)

    def apply_settings(self, settings: Settings) -> None:
        old, self.settings = self.settings, settings
        heard = (settings.audio.input_device, settings.listen.turn_model,
                 settings.listen.hands_free_timeout_s)
        if heard != (old.audio.input_device, old.listen.turn_model,
                     old.listen.hands_free_timeout_s):
            self._dispatch(Event.LISTENING_CHANGED)  # hands-free listens with them at once

    def report_error(self, message: str) -> None:
        """An error found outside a turn (the microphone at start): shown once loading ends."""
        self.last_error = self.error_now = message
        self._dispatch(Event.PROBLEM)

    # ------------------------------------------------------------------ recording ends
    def _release_committed(self) -> None:
        at, self._release_at = self._release_at, None
        if at is not None:
            self._end_recording(at, self._source)

    def _end_recording(self, released_at: float, source: str) -> None:
        """A release, or a talk-stop: a tap shorter than audio.min_press_ms is dropped."""
        if self.state != LISTENING:
            return
        pressed_at = self._pressed_at if self._pressed_at is not None else released_at
        self._source, self._released_at = source, released_at
        tap = (released_at - pressed_at) * 1000 < self.settings.audio.min_press_ms
        self._dispatch(Event.TAP if tap else Event.RELEASE)

    def _cap_reached(self) -> None:
        if self.state != LISTENING:
            return
        self._released_at = self.clock()
        self._dispatch(Event.CAP)
        self.turn_info["capped"] = True

    def _check_microphone(self) -> None:
        if self.state != LISTENING:
            self._watchdog.stop()
            return
        try:
            self.recorder.check()
        except AudioDeviceError as exc:
            self._device_failed(exc)

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
        readiness = self._readiness()
        event = {
            Readiness.LOADING: Event.MODELS_LOADING,
            Readiness.FAILED: Event.MODELS_FAILED,
            Readiness.READY: Event.MODELS_READY,
        }[readiness]
        self._dispatch(event)

    def _readiness(self) -> Readiness:
        if any(s in _BUSY for s in self.stage_states.values()):
            return Readiness.LOADING
        return Readiness.FAILED if self.load_errors else Readiness.READY

    def _on_transcript(self, turn: int, text: str) -> None:
        if turn == self.current_turn:
            self._dispatch(Event.TRANSCRIPT)

    def _on_first_audio(self, turn: int) -> None:
        if turn == self.current_turn:
            self.turn_info["first_audio_at"] = self.clock()
            self._dispatch(Event.FIRST_AUDIO)

    def _on_turn_finished(self, rec: FinishedTurn) -> None:
        if rec.turn != self.current_turn:
            return
        self.turn_info.update(
            finished_at=self.clock(),
            reason=rec.reason,
            timings_ms=rec.timings_ms,
        )
        if self._depth:
            # closed by the effect running now (a barge-in, a dropped recording, a typed
            # question): the event behind that effect has decided the state already
            return
        if rec.reason == TurnReason.ERROR:
            if self.state.answering:
                self.last_error = self.error_now = rec.error or "the turn failed"
            self._dispatch(Event.TURN_ERROR)
        elif rec.reason == TurnReason.NO_SPEECH:
            self._dispatch(Event.NO_SPEECH)
        else:
            self._dispatch(Event.TURN_END)

    def _on_error(self, stage: str, message: str) -> None:
        self.last_error = message if message.startswith(stage) else f"{stage}: {message}"

    # ------------------------------------------------------------------ the machine
    def _dispatch(self, event: Event) -> None:
        """One transition: the new situation, its effects in order, then the state shown.

        An effect that fails (the microphone) returns False after dispatching its own event,
        which wins: the rest of the effects do not run. The state is shown once, when the
        outermost event is done."""
        before = self.situation
        after, effects = transition(before, event)
        self.situation = after
        if after.state != before.state or effects:
            log.debug("%s: %s → %s %s", event, before.state, after.state, list(effects))
        self._depth += 1
        try:
            for effect in effects:
                if getattr(self, "_do_" + effect.name.lower())() is False:
                    break
        except Exception:
            self.situation = before  # what ran stays done; the state does not move
            raise
        finally:
            self._depth -= 1
        if self._depth == 0:
            self._follow_reply()
            self._set(self.situation.state, self._detail(self.situation))

    def _detail(self, now: Situation) -> str:
        if now.state == LOADING:
            return self._loading_progress()
        if now.state == ERROR:
            if self.load_errors:
                self.last_error = self._load_error_line()
                return self.last_error
            return self.error_now
        if now.state == IDLE and now.hands_free_listening:
            return "Just speak: no key needed"
        if now.for_answer:
            return "Listening for yes or no… (release to answer)"
        if now.asking:
            return f"{ASKING_DETAIL}: {SAY_YES_OR_NO[0].lower()}{SAY_YES_OR_NO[1:]}"
        return {IDLE: "Ready", LISTENING: "Listening…", THINKING: "Thinking…",
                SPEAKING: "Speaking…"}[now.state]

    def _device_failed(self, exc: AudioDeviceError) -> bool:
        """The microphone failed: its event moves the machine on. False: the effect failed."""
        self.last_error = self.error_now = str(exc)
        self._dispatch(Event.DEVICE_ERROR)
        return False

    # ------------------------------------------------------------------ effects
    def _do_barge_in(self) -> None:
        self._barge_in = {"interrupt_pressed_at": self._press[1]}
        self.pipeline.interrupt()  # barge-in: playback stops before we start recording
        self._barge_in["interrupted_at"] = self.clock()

    def _do_start_recording(self) -> bool:
        source, at = self._press
        info, self._barge_in = self._barge_in, {}
        # no pre-roll after a barge-in: it holds the assistant's own voice
        since = info["interrupted_at"] if info else self._speaking_ended
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

        self.current_turn = turn
        try:
            self.recorder.start_recording(since=since, on_chunk=on_chunk)
        except AudioDeviceError as exc:
            return self._device_failed(exc)
        self.turn_info = {"id": turn, "source": source, "pressed_at": at, **info}
        self._pressed_at, self._source = at, source
        self.error_now = ""
        self._cap.start(int(self.settings.audio.max_record_s * 1000))
        self._watchdog.start()
        if live[0]:  # a warm microphone: heard from the press on
            self._start_sound_now()
        return True

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

    def _do_start_release_grace(self) -> None:
        self._release_at = self._key_up_at
        self._grace.start(max(0, self.settings.hotkey.release_grace_ms))
        if not self.situation.for_answer:
            self.pipeline.key_up(self.current_turn)  # STT need not wait out the grace

    def _do_submit_recording(self) -> bool:
        self._stop_timers()
        self._pressed_at = None
        try:
            audio = self.recorder.stop_recording()
        except AudioDeviceError as exc:
            return self._device_failed(exc)
        released_at = self._released_at
        self.pipeline.end_turn(self.current_turn, released_at=released_at)
        self.turn_info.update(
            source=self._source,
            released_at=released_at,
            submitted_at=self.clock(),
            audio_s=round(len(audio) / SAMPLE_RATE, 2),
        )
        return True

    def _drop_recording(self, reason: str) -> None:
        """A recording that will not become a turn (tap, cancel, lost device)."""
        self._stop_timers()
        self._pressed_at = None
        self.recorder.cancel_recording()
        self.pipeline.interrupt(reason=reason)  # closes the live turn

    def _do_discard_tap(self) -> None:
        self._drop_recording(TOO_SHORT)

    def _do_cancel_recording(self) -> None:
        self._drop_recording(TurnReason.INTERRUPTED)

    def _do_submit_text(self) -> None:
        turn = self.pipeline.submit_text(self._question, source=self._source)
        self.current_turn = turn
        self.turn_info = {"id": turn, "source": self._source, "pressed_at": self.clock()}
        self.error_now = ""

    def _do_start_answer_recording(self) -> bool:
        """The key held while a tool's question waits: record the answer; the turn goes on."""
        source, at = self._press
        # the question, if it still plays, would be heard under the answer
        self.pipeline.hush(self.current_turn)
        try:  # nothing from before the press: that is the question's own voice
            self.recorder.start_recording(since=at)
        except AudioDeviceError as exc:
            return self._device_failed(exc)
        self._pressed_at, self._source = at, source
        self._cap.start(int(self.settings.audio.max_record_s * 1000))
        self._watchdog.start()
        self._sound("listen-start")
        return True

    def _do_submit_answer(self) -> bool:
        self._stop_timers()
        self._pressed_at = None
        self.pipeline.hush(self.current_turn, on=False)
        try:
            audio = self.recorder.stop_recording()
        except AudioDeviceError as exc:
            return self._device_failed(exc)
        question = self._question_no
        self.pipeline.hear_answer(audio, lambda text: self._answer_heard.emit(question, text))
        return True

    def _do_cancel_answer_recording(self) -> None:
        self._stop_timers()
        self._pressed_at = None
        self.pipeline.hush(self.current_turn, on=False)
        self.recorder.cancel_recording()

    def _do_hint_say_yes_or_no(self) -> None:
        self._hint(SAY_YES_OR_NO)

    def _on_answer_heard(self, question: int, text: str) -> None:
        """The spoken answer's transcript: yes or no answers the question; the first unclear
        one asks again (a hint and the error sound), the second is a no."""
        if question != self._question_no or not self.situation.asking:
            return
        answer = classify(text)
        log.info("tool question: the spoken answer reads as %s", answer)
        if answer is Answer.UNCLEAR:
            self._unclear += 1
            if self._unclear < UNCLEAR_ANSWERS:
                self._sound("error")
                self._hint(f"Not understood: {SAY_YES_OR_NO[0].lower()}{SAY_YES_OR_NO[1:]}")
                return
        self.permission_answer.emit(answer is Answer.YES)

    def _do_interrupt_reply(self) -> None:
        self.pipeline.interrupt()
        self.turn_info["interrupted_at"] = self.clock()

    def _do_silence(self) -> None:
        self.pipeline.interrupt()  # a timer's announcement, say (no turn runs)

    def _do_note_reply_ended(self) -> None:
        self._speaking_ended = self.clock()

    def _do_sound_listen_stop(self) -> None:
        self._sound("listen-stop")

    def _do_sound_error(self) -> None:
        self._sound("error")

    def _do_open_speaker(self) -> None:
        self.speaker_wanted.emit(True)

    def _do_close_speaker(self) -> None:
        self.speaker_wanted.emit(False)

    def _do_hint_loading(self) -> None:
        self._hint(f"Models are still loading ({self._loading_progress()}): try again in a moment")

    def _do_hint_cannot_listen(self) -> None:
        self._hint(f"Cannot listen: {self._load_error_line()}")

    def _do_hint_tap(self) -> None:
        what = (
            "Hold the key while you speak"
            if self.settings.hotkey.mode == "hold" and self._source in ("hotkey", "button")
            else "Speak a little longer"
        )
        self._tap_text = f"{what}: presses under {self.settings.audio.min_press_ms} ms are ignored"
        left = DOUBLE_TAP_S - (self.clock() - self._last_press)
        if left > 0:
            self._tap_hint.start(int(left * 1000))
        else:
            self._hint(self._tap_text)

    def _do_hint_cap(self) -> None:
        limit = self.settings.audio.max_record_s
        self._hint(f"Recording stopped at the {limit:g} s limit (audio.max_record_s)")

    def _do_hint_nothing_heard(self) -> None:
        self._hint(NOTHING_HEARD)

    def _do_forget_conversation(self) -> None:
        self.pipeline.new_conversation()

    def _do_unload_models(self) -> None:
        freed = self.pipeline.unload_models()
        if freed:
            log.info("idle: freed the %s models", ", ".join(freed))

    # ------------------------------------------------------------------ state
    def _set(self, state: str, detail: str) -> None:
        shown = (state, detail, self.situation.hands_free)
        changed, self._shown = shown != self._shown, shown
        self.detail = detail
        if changed:
            log.info("state: %s", state)
            self.state_changed.emit(state, detail)

    def _sound(self, name: str) -> float:
        return self.sounds(name) if self.sounds is not None else 0.0

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
            "hands_free": self.situation.hands_free,
            "asking": self.situation.asking,
            "hotkey": dict(self.hotkey_info),
            "turn": dict(self.turn_info),
            "clock": self.clock(),
        }
