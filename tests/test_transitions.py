"""The app's state machine by table: every state × event, with the models ready, and the cases
where the models are loading or failed or an error is shown. Pure: no Qt, no clock."""

from __future__ import annotations

from dataclasses import replace

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
    step_state, step_effects = {**TABLE, **HANDS_FREE_OFF_TABLE}.get((state, event), (state, ()))
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


# ---------------------------------------------------------------- hands-free conversation
HF_START, HF_STOP = E.START_HANDS_FREE, E.STOP_HANDS_FREE
OFF_SOUND, ON_SOUND = E.SOUND_HANDS_FREE_OFF, E.SOUND_HANDS_FREE_ON
VOICE = (E.OPEN_VOICE_TURN, E.OPEN_SPEAKER)
BARGE = (E.BARGE_IN, E.NOTE_REPLY_ENDED)

# hands-free off: only turning it on does anything (the rest is the table above)
HANDS_FREE_OFF_TABLE = {
    (LOADING, Event.HANDS_FREE_ON): (LOADING, (ON_SOUND, E.HINT_HANDS_FREE_WAITS)),
    (IDLE, Event.HANDS_FREE_ON): (IDLE, (ON_SOUND, HF_START)),
    (ERROR, Event.HANDS_FREE_ON): (ERROR, (ON_SOUND, HF_START)),
    (THINKING, Event.HANDS_FREE_ON): (THINKING, (ON_SOUND, HF_START)),
    (SPEAKING, Event.HANDS_FREE_ON): (SPEAKING, (ON_SOUND, HF_START)),
    # the key's recording (a double tap's first tap) is dropped: one microphone at a time
    (LISTENING, Event.HANDS_FREE_ON): (IDLE, (E.CANCEL_RECORDING, ON_SOUND, CLOSE, HF_START)),
}
HANDS_FREE_EVENTS = [
    Event.HANDS_FREE_ON, Event.HANDS_FREE_OFF, Event.HANDS_FREE_TIMED_OUT,
    Event.HANDS_FREE_LOST, Event.SPEECH_STARTED, Event.VOICE_BARGE_IN, Event.TURN_ENDED,
]


@pytest.mark.parametrize("event", HANDS_FREE_EVENTS)
@pytest.mark.parametrize("state", list(AppState))
def test_hands_free_events_while_it_is_off(state, event):
    step_state, step_effects = HANDS_FREE_OFF_TABLE.get((state, event), (state, ()))
    after, effects = transition(at(state), event)
    assert (after.state, effects) == (step_state, step_effects)
    assert after.hands_free is (event is Event.HANDS_FREE_ON)


def on(state: AppState) -> Situation:
    """`state` with hands-free on; LISTENING is a turn its microphone opened."""
    return replace(at(state), hands_free=True, by_voice=state is LISTENING)


def ending(*effects):
    """Off by hand, timed out, lost: the microphone closes; a turn being heard is dropped, a
    reply goes on."""
    return {
        (LOADING,): (LOADING, effects),
        **{(s,): (s, (HF_STOP, *effects)) for s in (IDLE, ERROR, THINKING, SPEAKING)},
        (LISTENING,): (IDLE, (HF_STOP, E.CANCEL_VOICE_TURN, *effects, CLOSE)),
    }


# hands-free on: every state × every event; pairs not listed behave as in TABLE
HANDS_FREE_ON_TABLE = {
    # a press is an explicit push-to-talk turn: the hands-free microphone closes first
    (IDLE, Event.PRESS): (LISTENING, (HF_STOP, *START)),
    (ERROR, Event.PRESS): (LISTENING, (HF_STOP, *START)),
    (THINKING, Event.PRESS): (LISTENING, (HF_STOP, *BARGE, *START)),
    (SPEAKING, Event.PRESS): (LISTENING, (HF_STOP, *BARGE, *START)),
    (LISTENING, Event.PRESS): (LISTENING, (HF_STOP, E.CANCEL_VOICE_TURN, *START)),
    # a turn opened by voice is not the key's: key up, release, tap and cap leave it alone
    (LISTENING, Event.KEY_UP): (LISTENING, ()),
    (LISTENING, Event.RELEASE): (LISTENING, ()),
    (LISTENING, Event.TAP): (LISTENING, ()),
    (LISTENING, Event.CAP): (LISTENING, ()),
    (LISTENING, Event.ASK): (THINKING, (E.CANCEL_VOICE_TURN, E.OPEN_SPEAKER, E.SUBMIT_TEXT)),
    (LISTENING, Event.DEVICE_ERROR): (ERROR, (E.CANCEL_VOICE_TURN, E.SOUND_ERROR, CLOSE)),
    (LISTENING, Event.STOP): (IDLE, (E.CANCEL_VOICE_TURN, CLOSE)),
    (IDLE, Event.IDLE_UNLOAD): (IDLE, ()),  # its VAD and the next answer need the models
    # a stage reloading between turns closes the microphone until it is back
    (IDLE, Event.MODELS_LOADING): (LOADING, (HF_STOP,)),
    (ERROR, Event.MODELS_LOADING): (LOADING, (HF_STOP,)),
    (LOADING, Event.MODELS_READY): (IDLE, (CLOSE, HF_START)),  # on since the app started
    (IDLE, Event.MODELS_FAILED): (ERROR, (HF_STOP,)),
    (ERROR, Event.MODELS_FAILED): (ERROR, (HF_STOP,)),
    # a stage reloading mid-turn: the microphone closes until it is back; a turn being heard
    # is dropped
    (THINKING, Event.MODELS_LOADING): (THINKING, (HF_STOP,)),
    (SPEAKING, Event.MODELS_LOADING): (SPEAKING, (HF_STOP,)),
    (THINKING, Event.MODELS_FAILED): (THINKING, (HF_STOP,)),
    (SPEAKING, Event.MODELS_FAILED): (SPEAKING, (HF_STOP,)),
    (LISTENING, Event.MODELS_LOADING): (LOADING, (HF_STOP, E.CANCEL_VOICE_TURN)),
    (LISTENING, Event.MODELS_FAILED): (ERROR, (HF_STOP, E.CANCEL_VOICE_TURN, CLOSE)),
    **{(s, Event.HANDS_FREE_OFF): step for (s,), step in ending(OFF_SOUND).items()},
    **{(s, Event.HANDS_FREE_TIMED_OUT): step
       for (s,), step in ending(OFF_SOUND, E.HINT_HANDS_FREE_TIMED_OUT).items()},
    **{(s, Event.HANDS_FREE_LOST): step
       for (s,), step in ending(E.SOUND_ERROR, E.HINT_HANDS_FREE_LOST).items()},
    # the user speaks: a live turn, with no key; over a reply it barges in
    **{(s, e): (LISTENING, VOICE) for s in (IDLE, ERROR)
       for e in (Event.SPEECH_STARTED, Event.VOICE_BARGE_IN)},
    **{(s, e): (LISTENING, (*BARGE, *VOICE)) for s in (THINKING, SPEAKING)
       for e in (Event.SPEECH_STARTED, Event.VOICE_BARGE_IN)},
    (LISTENING, Event.TURN_ENDED): (THINKING, (E.SUBMIT_VOICE_TURN,)),
    # a new audio.input_device: the listening microphone reopens on it at once; a turn being
    # heard on the old one is dropped; a reply goes on
    **{(s, Event.LISTENING_CHANGED): (s, (HF_STOP, HF_START))
       for s in (IDLE, ERROR, THINKING, SPEAKING)},
    (LISTENING, Event.LISTENING_CHANGED): (
        IDLE, (HF_STOP, E.CANCEL_VOICE_TURN, CLOSE, HF_START)
    ),
}


@pytest.mark.parametrize("event", list(Event))
@pytest.mark.parametrize("state", list(AppState))
def test_every_state_and_event_with_hands_free_on(state, event):
    table = {**TABLE, **HANDS_FREE_ON_TABLE}
    step_state, step_effects = table.get((state, event), (state, ()))
    after, effects = transition(on(state), event)
    assert (after.state, effects) == (step_state, step_effects)
    ends = event in (Event.HANDS_FREE_OFF, Event.HANDS_FREE_TIMED_OUT, Event.HANDS_FREE_LOST)
    assert after.hands_free is not ends
    # a turn opened by voice stays one until it ends; a press makes it the key's
    assert after.by_voice is (after.state is LISTENING and E.START_RECORDING not in effects)


def test_a_key_recording_inside_hands_free_hands_the_microphone_back_when_it_ends():
    pressed, effects = transition(on(IDLE), Event.PRESS)
    assert pressed.recording_by_key and not pressed.hands_free_listening
    assert effects[0] is HF_STOP  # closed before the push-to-talk microphone opens
    sent, effects = transition(pressed, Event.RELEASE)
    assert (sent.state, effects) == (THINKING, (*SUBMIT, HF_START))
    tapped, effects = transition(pressed, Event.TAP)
    assert (tapped.state, effects[-1]) == (IDLE, HF_START)


def test_hands_free_turned_off_while_the_key_records_drops_the_recording():
    pressed, _ = transition(on(IDLE), Event.PRESS)
    after, effects = transition(pressed, Event.HANDS_FREE_OFF)
    assert (after.state, effects) == (IDLE, (E.CANCEL_RECORDING, OFF_SOUND, CLOSE))
    assert not after.hands_free


def test_hands_free_on_during_loading_starts_listening_once_the_models_are_ready():
    waiting, _ = transition(at(LOADING), Event.HANDS_FREE_ON)
    assert waiting.hands_free and not waiting.hands_free_listening
    ready, effects = transition(waiting, Event.MODELS_READY)
    assert ready.hands_free_listening and effects[-1] is HF_START


def test_a_new_input_device_during_a_key_recording_waits_for_its_release():
    pressed, _ = transition(on(IDLE), Event.PRESS)
    assert transition(pressed, Event.LISTENING_CHANGED) == (pressed, ())
    # the hands-free microphone opens after the release, from the settings now: the new one
    assert transition(pressed, Event.RELEASE)[1][-1] is HF_START


def test_hands_free_off_while_speaking_lets_the_reply_finish():
    after, effects = transition(on(SPEAKING), Event.HANDS_FREE_OFF)
    assert (after.state, effects) == (SPEAKING, (HF_STOP, OFF_SOUND))
    done, effects = transition(after, Event.TURN_END)
    assert done.state is IDLE and HF_START not in effects


def test_a_spoken_question_is_answered_with_no_key():
    heard, _ = transition(on(IDLE), Event.SPEECH_STARTED)
    sent, _ = transition(heard, Event.TURN_ENDED)
    speaking, _ = transition(sent, Event.FIRST_AUDIO)
    done, effects = transition(speaking, Event.TURN_END)
    assert [s.state for s in (heard, sent, speaking, done)] == [LISTENING, THINKING, SPEAKING, IDLE]
    assert done.hands_free_listening and HF_STOP not in effects  # it listened throughout


def test_hands_free_cannot_start_while_a_model_failed():
    now = Situation(IDLE, Readiness.FAILED, error_shown=True)
    assert transition(now, Event.HANDS_FREE_ON) == (now, (E.HINT_CANNOT_LISTEN,))


def test_a_stage_reloading_mid_reply_listens_again_once_it_is_back():
    reloading, effects = transition(on(SPEAKING), Event.MODELS_LOADING)
    assert not reloading.hands_free_listening and effects == (HF_STOP,)
    back, effects = transition(reloading, Event.MODELS_READY)
    assert back.state is SPEAKING and effects == (HF_START,)
