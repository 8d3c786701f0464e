"""The app's state machine as one pure function: `transition(situation, event)` returns the
next situation and the effects to run, in order. No Qt, no clock, no I/O: AppController
(controller.py) turns inputs and pipeline news into events and runs the effects.

Each event has one rule below. Hands-free conversation is a flag on the situation: while it
is on (and the models are ready, and no key recording runs) the hands-free microphone listens;
`transition` itself adds the effect that starts or stops it whenever that changes, so the
push-to-talk microphone and the hands-free one are never open together.
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
    ASKED = "asked"  # the turn waits for the user's yes or no before a writing tool
    ANSWERED = "answered"  # that question is settled (voice, Allow / Deny, Stop, time out)
    IDLE_UNLOAD = "idle unload"  # ui.unload_after_minutes ran out
    MODELS_LOADING = "models loading"  # a stage started loading or reloading
    MODELS_READY = "models ready"  # no stage is loading and none failed
    MODELS_FAILED = "models failed"  # a stage failed to load
    HANDS_FREE_ON = "hands-free on"  # tray, floating window, CLI, double tap, settings
    HANDS_FREE_OFF = "hands-free off"
    HANDS_FREE_TIMED_OUT = "hands-free timed out"  # nothing said for listen.hands_free_timeout_s
    HANDS_FREE_LOST = "hands-free lost"  # its microphone or echo canceller failed
    SPEECH_STARTED = "speech started"  # hands-free heard the user start a turn
    VOICE_BARGE_IN = "voice barge-in"  # hands-free heard the user over the reply
    TURN_ENDED = "turn ended"  # hands-free: the end-of-turn model says the user finished
    # audio.input_device or how hands-free listens (listen.*) changed: it reopens with them
    LISTENING_CHANGED = "listening changed"


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
    START_HANDS_FREE = "start hands-free"  # open its microphone and listen (added by transition)
    STOP_HANDS_FREE = "stop hands-free"  # close its microphone (added by transition)
    OPEN_VOICE_TURN = "open voice turn"  # a live turn fed by the hands-free microphone
    SUBMIT_VOICE_TURN = "submit voice turn"  # its end: the speech so far is the question
    CANCEL_VOICE_TURN = "cancel voice turn"  # drop it, its turn closed as interrupted
    SOUND_HANDS_FREE_ON = "sound hands-free on"
    SOUND_HANDS_FREE_OFF = "sound hands-free off"
    HINT_HANDS_FREE_WAITS = "hint hands-free waits"  # on while loading: it starts when loaded
    HINT_HANDS_FREE_TIMED_OUT = "hint hands-free timed out"
    HINT_HANDS_FREE_LOST = "hint hands-free lost"  # what failed, and that the key still works
    START_ANSWER_RECORDING = "start answer recording"  # the key held to say yes or no
    SUBMIT_ANSWER = "submit answer"  # its recording is transcribed and read as yes / no
    CANCEL_ANSWER_RECORDING = "cancel answer recording"  # dropped; the question still waits
    HINT_SAY_YES_OR_NO = "hint say yes or no"  # a tap is no answer: hold the key and speak


@dataclass(frozen=True)
class Situation:
    """Where the app stands: what the transitions read and write."""

    state: AppState = LOADING
    models: Readiness = Readiness.LOADING
    error_shown: bool = False  # a device or turn error stays shown until the next press
    hands_free: bool = False  # the user turned hands-free conversation on
    by_voice: bool = False  # LISTENING: the turn was opened by the hands-free microphone
    asking: bool = False  # the turn waits for the user's yes or no before a writing tool
    for_answer: bool = False  # LISTENING: the key is held to answer that question (no new turn)

    @property
    def hands_free_listening(self) -> bool:
        """The hands-free microphone is open: the mode is on, the models are ready (its VAD
        is one), and no push-to-talk recording (which has the other microphone) runs."""
        ready = self.models is Readiness.READY
        return self.hands_free and ready and not self.recording_by_key

    @property
    def recording_by_key(self) -> bool:
        return self.state is LISTENING and not self.by_voice

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
    """The next situation and the effects to run, in order, for `event` in `now`. The
    hands-free microphone closes first (before a key recording opens the other one) and opens
    last (after a key recording closed)."""
    after, effects = _RULES[event](now)
    if now.hands_free_listening and not after.hands_free_listening:
        effects = (Effect.STOP_HANDS_FREE, *effects)
    elif after.hands_free_listening and not now.hands_free_listening:
        effects = (*effects, Effect.START_HANDS_FREE)
    return after, effects


def _go(now: Situation, state: AppState, *effects: Effect, **changes) -> Step:
    """Move to `state`; entering a rest state from a turn or loading closes the speaker."""
    closing = (Effect.CLOSE_SPEAKER,) if state.resting and not now.state.resting else ()
    if state is not LISTENING:
        changes.setdefault("by_voice", False)
        changes.setdefault("for_answer", False)
    if not state.busy:  # no turn runs: no question waits
        changes.setdefault("asking", False)
    return replace(now, state=state, **changes), (*effects, *closing)


def _stay(now: Situation, *effects: Effect) -> Step:
    return now, effects


def _drop_listening(now: Situation) -> Effects:
    """The recording now running, dropped: the key's, or the hands-free microphone's."""
    if now.state is not LISTENING:
        return ()
    if now.for_answer:
        return (Effect.CANCEL_ANSWER_RECORDING,)
    return (Effect.CANCEL_VOICE_TURN if now.by_voice else Effect.CANCEL_RECORDING,)


def _press(now: Situation) -> Step:
    if now.recording_by_key:
        return _stay(now)
    if now.asking and now.state.answering:  # the key answers the question: no barge-in
        return _go(now, LISTENING, Effect.START_ANSWER_RECORDING, for_answer=True)
    if now.state is LISTENING:  # over a hands-free turn: the key's explicit turn replaces it
        return _go(now, LISTENING, Effect.CANCEL_VOICE_TURN, Effect.START_RECORDING,
                   Effect.OPEN_SPEAKER, by_voice=False, error_shown=False)
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
    return _stay(now, Effect.START_RELEASE_GRACE) if now.recording_by_key else _stay(now)


def _release(now: Situation) -> Step:
    if not now.recording_by_key:
        return _stay(now)
    if now.for_answer:  # back to the turn, which waits until the answer is read
        return _go(now, THINKING, Effect.SUBMIT_ANSWER, Effect.SOUND_LISTEN_STOP)
    return _go(now, THINKING, Effect.SUBMIT_RECORDING, Effect.SOUND_LISTEN_STOP)


def _tap(now: Situation) -> Step:
    if not now.recording_by_key:
        return _stay(now)
    if now.for_answer:  # a tap is what an accident looks like: never a yes (docs/tools.md)
        return _go(now, THINKING, Effect.CANCEL_ANSWER_RECORDING, Effect.HINT_SAY_YES_OR_NO)
    return _go(now, now.rest, Effect.DISCARD_TAP, Effect.HINT_TAP)


def _cap(now: Situation) -> Step:
    if not now.recording_by_key:
        return _stay(now)
    if now.for_answer:
        return _release(now)
    return _go(now, THINKING, Effect.HINT_CAP, Effect.SUBMIT_RECORDING, Effect.SOUND_LISTEN_STOP)


def _ask(now: Situation) -> Step:
    drop = _drop_listening(now)
    # the output opens as the question is sent: a stream started by the reply itself lost
    # its first words through PulseAudio (issue 33)
    return _go(now, THINKING, *drop, Effect.OPEN_SPEAKER, Effect.SUBMIT_TEXT, error_shown=False,
               asking=False)


def _transcript(now: Situation) -> Step:
    return _stay(now)  # push to talk: the reply follows on its own (hands-free ends a turn here)


def _first_audio(now: Situation) -> Step:
    return _go(now, SPEAKING) if now.state is THINKING else _stay(now)


def _turn_closed(*effects: Effect, error: bool = False) -> Callable[[Situation], Step]:
    def rule(now: Situation) -> Step:
        if not (now.state.answering or now.for_answer):
            return _stay(now)  # stopped by hand, or the live turn was dropped
        after = replace(now, error_shown=now.error_shown or error)
        drop = _drop_listening(now)  # the key held to answer a question the turn no longer asks
        return _go(after, ERROR if error else after.rest, *drop, Effect.NOTE_REPLY_ENDED,
                   *effects)

    return rule


def _device_error(now: Situation) -> Step:
    if now.state is LOADING:
        return _stay(replace(now, error_shown=True))  # shown once loading ends
    drop = {
        LISTENING: (*_drop_listening(now), *_ends_turn(now)),
        THINKING: (Effect.INTERRUPT_REPLY,),  # the recording failed as it was submitted
        SPEAKING: (Effect.INTERRUPT_REPLY,),
    }.get(now.state, ())
    return _go(now, ERROR, *drop, Effect.SOUND_ERROR, error_shown=True)


def _problem(now: Situation) -> Step:
    after = replace(now, error_shown=True)
    return _go(after, ERROR) if now.state.resting else _stay(after)


def _ends_turn(now: Situation) -> Effects:
    """Dropping the answer's recording also ends the turn that asked (Stop is a no)."""
    return (Effect.INTERRUPT_REPLY, Effect.NOTE_REPLY_ENDED) if now.for_answer else ()


def _stop(now: Situation) -> Step:
    if now.state is LISTENING:  # hands-free stays on: Stop ends what runs, not the mode
        return _go(now, now.rest, *_drop_listening(now), *_ends_turn(now))
    if now.state.answering:
        return _go(now, now.rest, Effect.INTERRUPT_REPLY, Effect.NOTE_REPLY_ENDED)
    return _stay(now, Effect.SILENCE)


def _new_conversation(now: Situation) -> Step:
    return _stay(now, Effect.FORGET_CONVERSATION)  # a running reply goes on


def _asked(now: Situation) -> Step:
    return _stay(replace(now, asking=True)) if now.state.answering else _stay(now)


def _answered(now: Situation) -> Step:
    """Settled by a click, Stop or the time limit while the key may be held to answer."""
    after = replace(now, asking=False)
    if now.for_answer:
        return _go(after, THINKING, Effect.CANCEL_ANSWER_RECORDING)
    return _stay(after)


def _idle_unload(now: Situation) -> Step:
    # the hands-free microphone's VAD and the next answer need the models: kept while it is on
    idle = now.state is IDLE and not now.hands_free
    return _stay(now, Effect.UNLOAD_MODELS) if idle else _stay(now)


def _models(readiness: Readiness) -> Callable[[Situation], Step]:
    def rule(now: Situation) -> Step:
        after = replace(now, models=readiness)
        if now.by_voice and now.state is LISTENING and readiness is not Readiness.READY:
            # its microphone closes while the stage reloads: the turn it was hearing is dropped
            return _go(after, after.rest, Effect.CANCEL_VOICE_TURN)
        if now.state.busy:
            return _stay(after)  # a turn is running; the state settles when it ends
        return _go(after, after.rest)

    return rule


def _hands_free_on(now: Situation) -> Step:
    if now.hands_free:
        return _stay(now)
    if now.models is Readiness.FAILED:
        return _stay(now, Effect.HINT_CANNOT_LISTEN)
    waits = (Effect.HINT_HANDS_FREE_WAITS,) if now.models is Readiness.LOADING else ()
    on = replace(now, hands_free=True)
    if now.for_answer:  # the turn that asks goes on
        return _go(on, THINKING, *_drop_listening(now), Effect.SOUND_HANDS_FREE_ON)
    if now.state is LISTENING:  # a key recording (or the first tap of a double tap) is dropped
        return _go(on, now.rest, *_drop_listening(now), Effect.SOUND_HANDS_FREE_ON)
    return _stay(on, Effect.SOUND_HANDS_FREE_ON, *waits)


def _hands_free_ends(*effects: Effect) -> Callable[[Situation], Step]:
    """Off by hand, timed out or lost: a turn still being heard is dropped; a reply that is
    being written or spoken goes on (only the microphone closes)."""

    def rule(now: Situation) -> Step:
        if not now.hands_free:
            return _stay(now)
        off = replace(now, hands_free=False)
        if now.state is LISTENING and not now.for_answer:
            return _go(off, now.rest, *_drop_listening(now), *effects)
        return _stay(off, *effects)

    return rule


def _speech_started(now: Situation) -> Step:
    """Hands-free heard the user begin: a live turn, over a reply too (a barge-in by voice)."""
    if not now.hands_free_listening or now.state is LISTENING:
        return _stay(now)  # an event from a session already stopped, or a turn already open
    barge_in = (Effect.BARGE_IN, Effect.NOTE_REPLY_ENDED) if now.state.answering else ()
    return _go(now, LISTENING, *barge_in, Effect.OPEN_VOICE_TURN, Effect.OPEN_SPEAKER,
               by_voice=True, error_shown=False, asking=False)


def _listening_changed(now: Situation) -> Step:
    """A new audio.input_device (or listen.turn_model…): a listening hands-free microphone
    reopens with it at once (a key recording keeps its device to the release; hands-free
    opens the new one after it)."""
    if not now.hands_free_listening:
        return _stay(now)
    move = (Effect.STOP_HANDS_FREE, *_drop_listening(now))  # a turn being heard is dropped
    if now.state is LISTENING:
        after, effects = _go(now, now.rest, *move)
        return after, (*effects, Effect.START_HANDS_FREE)
    return _stay(now, *move, Effect.START_HANDS_FREE)


def _turn_ended(now: Situation) -> Step:
    if not (now.state is LISTENING and now.by_voice):
        return _stay(now)
    return _go(now, THINKING, Effect.SUBMIT_VOICE_TURN)


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
    Event.ASKED: _asked,
    Event.ANSWERED: _answered,
    Event.IDLE_UNLOAD: _idle_unload,
    Event.MODELS_LOADING: _models(Readiness.LOADING),
    Event.MODELS_READY: _models(Readiness.READY),
    Event.MODELS_FAILED: _models(Readiness.FAILED),
    Event.HANDS_FREE_ON: _hands_free_on,
    Event.HANDS_FREE_OFF: _hands_free_ends(Effect.SOUND_HANDS_FREE_OFF),
    Event.HANDS_FREE_TIMED_OUT: _hands_free_ends(
        Effect.SOUND_HANDS_FREE_OFF, Effect.HINT_HANDS_FREE_TIMED_OUT
    ),
    Event.HANDS_FREE_LOST: _hands_free_ends(Effect.SOUND_ERROR, Effect.HINT_HANDS_FREE_LOST),
    Event.SPEECH_STARTED: _speech_started,
    Event.VOICE_BARGE_IN: _speech_started,  # the listener already judged it was the user
    Event.TURN_ENDED: _turn_ended,
    Event.LISTENING_CHANGED: _listening_changed,
}
