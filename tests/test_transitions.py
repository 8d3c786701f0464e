"""The app's state machine by table: every state × event, with the models ready, and the cases
where the models are loading or failed or an error is shown. Pure: no Qt, no clock."""

from __future__ import annotations

import pytest

from s2s_desktop.controller import AppController
from s2s_desktop.states import AppState
from s2s_desktop.transitions import Effect, Event, Readiness, Situation, transition

LOADING, IDLE, LISTENING, THINKING, SPEAKING, ERROR = AppState
E = Effect
CLOSE = E.CLOSE_SPEAKER
START = (E.START_RECORDING, E.OPEN_SPEAKER)
SUBMIT = (E.SUBMIT_RECORDING, E.SOUND_LISTEN_STOP)


def at(state: AppState) -> Situation:
    """`state` as the app reaches it: loading with the models loading, an error shown in
    ERROR, the models ready otherwise."""
    models = Readiness.LOADING if state is LOADING else Readiness.READY
    return Situation(state, models, error_shown=state is ERROR)


# (state, event) -> (next state, effects); every pair not listed keeps its state, no effects
TABLE = {
    # a press: refused while loading, barge-in on a reply, nothing new while listening
    (LOADING, Event.PRESS): (LOADING, (E.HINT_LOADING,)),
    (IDLE, Event.PRESS): (LISTENING, START),
    (ERROR, Event.PRESS): (LISTENING, START),
    (THINKING, Event.PRESS): (LISTENING, (E.BARGE_IN, E.NOTE_REPLY_ENDED, *START)),
    (SPEAKING, Event.PRESS): (LISTENING, (E.BARGE_IN, E.NOTE_REPLY_ENDED, *START)),
    (LISTENING, Event.KEY_UP): (LISTENING, (E.START_RELEASE_GRACE,)),
    (LISTENING, Event.RELEASE): (THINKING, SUBMIT),
    (LISTENING, Event.TAP): (IDLE, (E.DISCARD_TAP, E.HINT_TAP, CLOSE)),
    (LISTENING, Event.CAP): (THINKING, (E.HINT_CAP, *SUBMIT)),
    # a typed question, from anywhere: a running recording is dropped
    (LOADING, Event.ASK): (THINKING, (E.OPEN_SPEAKER, E.SUBMIT_TEXT,)),
    (IDLE, Event.ASK): (THINKING, (E.OPEN_SPEAKER, E.SUBMIT_TEXT,)),
    (ERROR, Event.ASK): (THINKING, (E.OPEN_SPEAKER, E.SUBMIT_TEXT,)),
    (LISTENING, Event.ASK): (THINKING, (E.CANCEL_RECORDING, E.OPEN_SPEAKER, E.SUBMIT_TEXT)),
    (THINKING, Event.ASK): (THINKING, (E.OPEN_SPEAKER, E.SUBMIT_TEXT,)),
    (SPEAKING, Event.ASK): (THINKING, (E.OPEN_SPEAKER, E.SUBMIT_TEXT,)),
    (THINKING, Event.FIRST_AUDIO): (SPEAKING, ()),
    # a turn's end moves only a turn that is answering
    (THINKING, Event.TURN_END): (IDLE, (E.NOTE_REPLY_ENDED, CLOSE)),
    (SPEAKING, Event.TURN_END): (IDLE, (E.NOTE_REPLY_ENDED, CLOSE)),
    (THINKING, Event.NO_SPEECH): (IDLE, (E.NOTE_REPLY_ENDED, E.HINT_NOTHING_HEARD, CLOSE)),
    (SPEAKING, Event.NO_SPEECH): (IDLE, (E.NOTE_REPLY_ENDED, E.HINT_NOTHING_HEARD, CLOSE)),
    (THINKING, Event.TURN_ERROR): (ERROR, (E.NOTE_REPLY_ENDED, E.SOUND_ERROR, CLOSE)),
    (SPEAKING, Event.TURN_ERROR): (ERROR, (E.NOTE_REPLY_ENDED, E.SOUND_ERROR, CLOSE)),
    # the microphone failing: the recording or the turn it became is dropped
    (IDLE, Event.DEVICE_ERROR): (ERROR, (E.SOUND_ERROR,)),
    (ERROR, Event.DEVICE_ERROR): (ERROR, (E.SOUND_ERROR,)),
    (LISTENING, Event.DEVICE_ERROR): (ERROR, (E.CANCEL_RECORDING, E.SOUND_ERROR, CLOSE)),
    (THINKING, Event.DEVICE_ERROR): (ERROR, (E.INTERRUPT_REPLY, E.SOUND_ERROR, CLOSE)),
    (SPEAKING, Event.DEVICE_ERROR): (ERROR, (E.INTERRUPT_REPLY, E.SOUND_ERROR, CLOSE)),
    (IDLE, Event.PROBLEM): (ERROR, ()),
    # Stop: whatever runs ends; with nothing running it silences an announcement
    (LOADING, Event.STOP): (LOADING, (E.SILENCE,)),
    (IDLE, Event.STOP): (IDLE, (E.SILENCE,)),
    (ERROR, Event.STOP): (ERROR, (E.SILENCE,)),
    (LISTENING, Event.STOP): (IDLE, (E.CANCEL_RECORDING, CLOSE)),
    (THINKING, Event.STOP): (IDLE, (E.INTERRUPT_REPLY, E.NOTE_REPLY_ENDED, CLOSE)),
    (SPEAKING, Event.STOP): (IDLE, (E.INTERRUPT_REPLY, E.NOTE_REPLY_ENDED, CLOSE)),
    **{(s, Event.NEW_CONVERSATION): (s, (E.FORGET_CONVERSATION,)) for s in AppState},
    (IDLE, Event.IDLE_UNLOAD): (IDLE, (E.UNLOAD_MODELS,)),
    # stage reports settle the app only between turns
    (IDLE, Event.MODELS_LOADING): (LOADING, ()),
    (ERROR, Event.MODELS_LOADING): (LOADING, ()),
    (LOADING, Event.MODELS_READY): (IDLE, (CLOSE,)),
    (LOADING, Event.MODELS_FAILED): (ERROR, (CLOSE,)),
    (IDLE, Event.MODELS_FAILED): (ERROR, ()),
}


@pytest.mark.parametrize("event", list(Event))
@pytest.mark.parametrize("state", list(AppState))
def test_every_state_and_event(state, event):
    now = at(state)
    step_state, step_effects = TABLE.get((state, event), (state, ()))
    after, effects = transition(now, event)
    assert (after.state, effects) == (step_state, step_effects)


def test_the_table_names_only_real_pairs():
    assert all(s in AppState and e in Event for s, e in TABLE)


@pytest.mark.parametrize("state", [IDLE, ERROR, THINKING, SPEAKING])
def test_a_press_is_refused_while_a_model_failed(state):
    now = Situation(state, Readiness.FAILED)
    assert transition(now, Event.PRESS) == (now, (E.HINT_CANNOT_LISTEN,))


def test_a_release_during_load_and_a_stop_while_idle_change_nothing():
    loading = at(LOADING)
    assert transition(loading, Event.RELEASE) == (loading, ())
    assert transition(loading, Event.KEY_UP) == (loading, ())
    assert transition(at(IDLE), Event.STOP) == (at(IDLE), (E.SILENCE,))


def test_an_error_stays_shown_until_the_next_press():
    after_error, _ = transition(at(THINKING), Event.TURN_ERROR)
    settled, _ = transition(after_error, Event.MODELS_READY)
    assert settled.state is ERROR  # a stage reloading and coming back keeps it shown
    pressed, _ = transition(settled, Event.PRESS)
    assert pressed.state is LISTENING and not pressed.error_shown
    answered, _ = transition(transition(pressed, Event.RELEASE)[0], Event.TURN_END)
    assert answered.state is IDLE


def test_a_turn_that_ends_while_a_stage_reloads_shows_loading():
    reloading, _ = transition(at(SPEAKING), Event.MODELS_LOADING)
    assert reloading.state is SPEAKING  # the turn goes on
    ended, _ = transition(reloading, Event.TURN_END)
    assert ended.state is LOADING
    assert transition(ended, Event.MODELS_READY)[0].state is IDLE


def test_a_problem_found_while_loading_is_shown_once_loading_ends():
    found, effects = transition(at(LOADING), Event.PROBLEM)
    assert (found.state, effects) == (LOADING, ())
    assert transition(found, Event.MODELS_READY)[0].state is ERROR


def test_the_groupings_are_defined_once_on_the_state():
    assert {s for s in AppState if s.busy} == {LISTENING, THINKING, SPEAKING}
    assert {s for s in AppState if s.answering} == {THINKING, SPEAKING}
    assert {s for s in AppState if s.resting} == {IDLE, ERROR}


def test_the_controller_runs_every_effect():
    missing = [e for e in Effect if not hasattr(AppController, "_do_" + e.name.lower())]
    assert missing == []
