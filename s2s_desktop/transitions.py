"""The app's state machine as one pure function: `transition(situation, event)` returns the
next situation and the effects to run, in order. No Qt, no clock, no I/O: AppController
(controller.py) turns inputs and pipeline news into events and runs the effects.

Each event has one rule below; a new mode (hands-free: the microphone open, the turn ended by
a model, a barge-in by voice) adds its states, events and rules without touching the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from .states import AppState

LOADING, IDLE, LISTENING, THINKING, SPEAKING, ERROR = AppState


class Readiness(StrEnum):
    """The stages' models taken together (controller._readiness sums up their reports)."""

    LOADING = "loading"  # a stage is loading or reloading
    READY = "ready"  # every stage loaded (or unloaded while idle: reloaded at the next turn)
    FAILED = "failed"  # a stage failed to load: no turn can run


class Event(StrEnum):
    PRESS = "press"  # talk: hotkey down (hold mode), Talk button, tray / CLI start
    KEY_UP = "key up"  # the hold key went up: the release grace starts
    RELEASE = "release"  # the recording ends and becomes the question
    TAP = "tap"  # the recording ended shorter than audio.min_press_ms
    CAP = "cap"  # the recording reached audio.max_record_s
    ASK = "ask"  # a typed question
    TRANSCRIPT = "transcript"  # the question was transcribed
    FIRST_AUDIO = "first audio"  # the reply's first sound reached the speaker
    TURN_END = "turn end"  # the turn closed: answered, or interrupted
    NO_SPEECH = "no speech"  # the turn closed: nothing was said
    TURN_ERROR = "turn error"  # the turn closed: a stage failed
    DEVICE_ERROR = "device error"  # the microphone failed to start, stop or deliver
    PROBLEM = "problem"  # an error found outside a turn (no microphone at start)
    STOP = "stop"  # Stop: whatever runs ends
    NEW_CONVERSATION = "new conversation"  # the assistant forgets the earlier exchanges
    IDLE_UNLOAD = "idle unload"  # ui.unload_after_minutes ran out
    MODELS_LOADING = "models loading"  # a stage started loading or reloading
    MODELS_READY = "models ready"  # no stage is loading and none failed
    MODELS_FAILED = "models failed"  # a stage failed to load


class Effect(StrEnum):
    BARGE_IN = "barge in"  # stop the reply before the new recording starts
    START_RECORDING = "start recording"  # a live turn: start sound, pre-roll, cap, watchdog
    START_RELEASE_GRACE = "start release grace"  # STT starts on the speech so far meanwhile
    SUBMIT_RECORDING = "submit recording"  # the recording becomes the turn's question
    DISCARD_TAP = "discard tap"  # drop the recording, its turn closed as "too short"
    CANCEL_RECORDING = "cancel recording"  # drop the recording, its turn closed as interrupted
    SUBMIT_TEXT = "submit text"  # the typed question goes to the LLM
    INTERRUPT_REPLY = "interrupt reply"  # the reply stops; kept as far as it was spoken
    SILENCE = "silence"  # no turn runs: stop what plays (a timer's announcement)
    NOTE_REPLY_ENDED = "note reply ended"  # the next pre-roll starts after the reply
    SOUND_LISTEN_STOP = "sound listen stop"
    SOUND_ERROR = "sound error"
    OPEN_SPEAKER = "open speaker"  # at the press, so the reply's first audio never waits
    CLOSE_SPEAKER = "close speaker"  # once what is queued has played (an open one costs CPU)
    HINT_LOADING = "hint loading"
    HINT_CANNOT_LISTEN = "hint cannot listen"
    HINT_TAP = "hint tap"
    HINT_CAP = "hint cap"
    HINT_NOTHING_HEARD = "hint nothing heard"
    FORGET_CONVERSATION = "forget conversation"
    UNLOAD_MODELS = "unload models"


@dataclass(frozen=True)
class Situation:
    """Where the app stands: what the transitions read and write."""

    state: AppState = LOADING
    models: Readiness = Readiness.LOADING
    error_shown: bool = False  # a device or turn error stays shown until the next press

    @property
    def rest(self) -> AppState:
        """The state between turns: loading, a problem, or ready."""
        if self.models is Readiness.LOADING:
            return LOADING
        if self.models is Readiness.FAILED or self.error_shown:
            return ERROR
        return IDLE


Effects = tuple[Effect, ...]
Step = tuple[Situation, Effects]


def transition(now: Situation, event: Event) -> Step:
    """The next situation and the effects to run, in order, for `event` in `now`."""
    return _RULES[event](now)


def _go(now: Situation, state: AppState, *effects: Effect, **changes) -> Step:
    """Move to `state`; entering a rest state from a turn or loading closes the speaker."""
    closing = (Effect.CLOSE_SPEAKER,) if state.resting and not now.state.resting else ()
    return replace(now, state=state, **changes), (*effects, *closing)


def _stay(now: Situation, *effects: Effect) -> Step:
    return now, effects


def _press(now: Situation) -> Step:
    if now.state is LISTENING:
        return _stay(now)
    if now.state is LOADING:
        return _stay(now, Effect.HINT_LOADING)
    if now.models is Readiness.FAILED:
        return _stay(now, Effect.HINT_CANNOT_LISTEN)
    # barge-in: the reply stops first, and the new recording's pre-roll starts after it
    barge_in = (Effect.BARGE_IN, Effect.NOTE_REPLY_ENDED) if now.state.answering else ()
    return _go(
        now, LISTENING, *barge_in, Effect.START_RECORDING, Effect.OPEN_SPEAKER, error_shown=False
    )


def _key_up(now: Situation) -> Step:
    return _stay(now, Effect.START_RELEASE_GRACE) if now.state is LISTENING else _stay(now)


def _release(now: Situation) -> Step:
    if now.state is not LISTENING:
        return _stay(now)
    return _go(now, THINKING, Effect.SUBMIT_RECORDING, Effect.SOUND_LISTEN_STOP)


def _tap(now: Situation) -> Step:
    if now.state is not LISTENING:
        return _stay(now)
    return _go(now, now.rest, Effect.DISCARD_TAP, Effect.HINT_TAP)


def _cap(now: Situation) -> Step:
    if now.state is not LISTENING:
        return _stay(now)
    return _go(now, THINKING, Effect.HINT_CAP, Effect.SUBMIT_RECORDING, Effect.SOUND_LISTEN_STOP)


def _ask(now: Situation) -> Step:
    drop = (Effect.CANCEL_RECORDING,) if now.state is LISTENING else ()
    # the output opens as the question is sent: a stream started by the reply itself lost
    # its first words through PulseAudio (issue 33)
    return _go(now, THINKING, *drop, Effect.OPEN_SPEAKER, Effect.SUBMIT_TEXT, error_shown=False)


def _transcript(now: Situation) -> Step:
    return _stay(now)  # push to talk: the reply follows on its own (hands-free ends a turn here)


def _first_audio(now: Situation) -> Step:
    return _go(now, SPEAKING) if now.state is THINKING else _stay(now)


def _turn_closed(*effects: Effect, error: bool = False) -> Callable[[Situation], Step]:
    def rule(now: Situation) -> Step:
        if not now.state.answering:
            return _stay(now)  # stopped by hand, or the live turn was dropped
        after = replace(now, error_shown=now.error_shown or error)
        return _go(after, ERROR if error else after.rest, Effect.NOTE_REPLY_ENDED, *effects)

    return rule


def _device_error(now: Situation) -> Step:
    if now.state is LOADING:
        return _stay(replace(now, error_shown=True))  # shown once loading ends
    drop = {
        LISTENING: (Effect.CANCEL_RECORDING,),
        THINKING: (Effect.INTERRUPT_REPLY,),  # the recording failed as it was submitted
        SPEAKING: (Effect.INTERRUPT_REPLY,),
    }.get(now.state, ())
    return _go(now, ERROR, *drop, Effect.SOUND_ERROR, error_shown=True)


def _problem(now: Situation) -> Step:
    after = replace(now, error_shown=True)
    return _go(after, ERROR) if now.state.resting else _stay(after)


def _stop(now: Situation) -> Step:
    if now.state is LISTENING:
        return _go(now, now.rest, Effect.CANCEL_RECORDING)
    if now.state.answering:
        return _go(now, now.rest, Effect.INTERRUPT_REPLY, Effect.NOTE_REPLY_ENDED)
    return _stay(now, Effect.SILENCE)


def _new_conversation(now: Situation) -> Step:
    return _stay(now, Effect.FORGET_CONVERSATION)  # a running reply goes on


def _idle_unload(now: Situation) -> Step:
    return _stay(now, Effect.UNLOAD_MODELS) if now.state is IDLE else _stay(now)


def _models(readiness: Readiness) -> Callable[[Situation], Step]:
    def rule(now: Situation) -> Step:
        after = replace(now, models=readiness)
        if now.state.busy:
            return _stay(after)  # a turn is running; the state settles when it ends
        return _go(after, after.rest)

    return rule


_RULES: dict[Event, Callable[[Situation], Step]] = {
    Event.PRESS: _press,
    Event.KEY_UP: _key_up,
    Event.RELEASE: _release,
    Event.TAP: _tap,
    Event.CAP: _cap,
    Event.ASK: _ask,
    Event.TRANSCRIPT: _transcript,
    Event.FIRST_AUDIO: _first_audio,
    Event.TURN_END: _turn_closed(),
    Event.NO_SPEECH: _turn_closed(Effect.HINT_NOTHING_HEARD),
    Event.TURN_ERROR: _turn_closed(Effect.SOUND_ERROR, error=True),
    Event.DEVICE_ERROR: _device_error,
    Event.PROBLEM: _problem,
    Event.STOP: _stop,
    Event.NEW_CONVERSATION: _new_conversation,
    Event.IDLE_UNLOAD: _idle_unload,
    Event.MODELS_LOADING: _models(Readiness.LOADING),
    Event.MODELS_READY: _models(Readiness.READY),
    Event.MODELS_FAILED: _models(Readiness.FAILED),
}
