"""Answering a tool's yes/no question ("Shall I save the note 'buy milk'?") by voice: the
transcript classifier, the state machine's asking rules, and the controller that records the
held key's answer, has it transcribed and settles the question. No audio, no models."""

from __future__ import annotations

import numpy as np
import pytest

from s2s_desktop.assistant.yes_no import Answer, classify
from s2s_desktop.states import ASKING_DETAIL, AppState
from s2s_desktop.transitions import Effect, Event, Readiness, Situation, transition
from tests.test_controller import FakePipeline, FakeRecorder
from tests.test_tools import tool_session  # noqa: F401  (a fixture)

LOADING, IDLE, LISTENING, THINKING, SPEAKING, ERROR = AppState
E = Effect


# ------------------------------------------------------------------ the classifier
@pytest.mark.parametrize("said", [
    "Yes.", "Yeah.", "Yep!", "Sure.", "Sure thing.", "OK.", "Okay, go ahead.", "Go ahead.",
    "Do it.", "Yes, please.", "Uh, yes.", "Of course!", "Yes, do it now.", "Allow it.",
])
def test_yes_and_its_common_variants_are_a_yes(said):
    assert classify(said) is Answer.YES


@pytest.mark.parametrize("said", [
    "No.", "Nope.", "Nah.", "No, thanks.", "No thank you.", "Don't.", "Don't do it.",
    "Do not do it.", "Cancel.", "Stop!", "Never mind.", "Not now.", "Deny.",
])
def test_no_and_its_common_variants_are_a_no(said):
    assert classify(said) is Answer.NO


@pytest.mark.parametrize("said", [
    "", " ", "Thank you.",  # Whisper's usual words for a silent recording
    "Yes, no, wait.", "What?", "What did you say?", "Save it somewhere else.",
    "Do it tomorrow.", "I don't know.", "Yes I mean no.",
])
def test_anything_else_is_unclear_never_a_yes(said):
    assert classify(said) is Answer.UNCLEAR


# ------------------------------------------------------------------ the state machine
def asking(state=SPEAKING) -> Situation:
    return Situation(state, Readiness.READY, asking=True)


def test_a_question_makes_the_key_answer_it_instead_of_barging_in():
    now, effects = transition(Situation(SPEAKING, Readiness.READY), Event.ASKED)
    assert now.asking and now.state is SPEAKING and effects == ()
    held, effects = transition(now, Event.PRESS)
    assert held.state is LISTENING and held.for_answer and held.asking
    assert effects == (E.START_ANSWER_RECORDING,)  # no BARGE_IN: the turn goes on
    released, effects = transition(held, Event.RELEASE)
    assert released.state is THINKING and released.asking and not released.for_answer
    assert effects == (E.SUBMIT_ANSWER, E.SOUND_LISTEN_STOP)
    settled, effects = transition(released, Event.ANSWERED)
    assert not settled.asking and settled.state is THINKING and effects == ()
    again, effects = transition(settled, Event.PRESS)  # no question: a press barges in again
    assert E.BARGE_IN in effects and not again.for_answer


def test_a_tap_while_asked_is_no_answer_only_a_hint():
    held, _ = transition(asking(), Event.PRESS)
    tapped, effects = transition(held, Event.TAP)
    assert tapped.state is THINKING and tapped.asking
    assert effects == (E.CANCEL_ANSWER_RECORDING, E.HINT_SAY_YES_OR_NO)


def test_stop_while_asked_or_while_answering_ends_the_turn_a_no():
    stopped, effects = transition(asking(), Event.STOP)
    assert stopped.state is IDLE and not stopped.asking and E.INTERRUPT_REPLY in effects
    held, _ = transition(asking(), Event.PRESS)
    stopped, effects = transition(held, Event.STOP)
    assert stopped.state is IDLE and not stopped.asking and not stopped.for_answer
    assert effects[:2] == (E.CANCEL_ANSWER_RECORDING, E.INTERRUPT_REPLY)


def test_a_click_while_the_key_is_held_drops_the_spoken_answer():
    held, _ = transition(asking(), Event.PRESS)
    settled, effects = transition(held, Event.ANSWERED)
    assert settled.state is THINKING and not settled.asking and not settled.for_answer
    assert effects == (E.CANCEL_ANSWER_RECORDING,)


def test_the_turn_ending_under_a_held_answer_closes_its_recording():
    held, _ = transition(asking(), Event.PRESS)
    ended, effects = transition(held, Event.TURN_END)
    assert ended.state is IDLE and not ended.asking
    assert effects[0] is E.CANCEL_ANSWER_RECORDING


def test_hands_free_closes_its_microphone_while_the_key_answers():
    on = Situation(SPEAKING, Readiness.READY, hands_free=True, asking=True)
    held, effects = transition(on, Event.PRESS)
    assert effects == (E.STOP_HANDS_FREE, E.START_ANSWER_RECORDING)
    back, effects = transition(held, Event.RELEASE)
    assert effects[-1] is E.START_HANDS_FREE and back.asking


def test_a_question_outside_a_turn_is_ignored():
    assert transition(Situation(IDLE, Readiness.READY), Event.ASKED)[0].asking is False


# ------------------------------------------------------------------ the controller
class AnswerPipeline(FakePipeline):
    def __init__(self):
        super().__init__()
        self.heard: list = []
        self.hushed: list[tuple[int, bool]] = []

    def hush(self, turn, on=True):
        self.hushed.append((turn, on))

    def hear_answer(self, audio, reply):
        self.heard.append((audio, reply))


@pytest.fixture
def asked(qtbot):
    from s2s_desktop.config import Settings
    from s2s_desktop.controller import AppController
    from tests.test_controller import hold, speaking

    pipe, rec = AnswerPipeline(), FakeRecorder()
    c = AppController(Settings(), pipe, rec)
    c.notices, c.answers = [], []
    c.notice.connect(c.notices.append)
    c.permission_answer.connect(c.answers.append)
    speaking(qtbot, c, pipe)
    qtbot.waitUntil(lambda: c.state == "speaking", timeout=1000)
    c.permission_asked()
    assert c.detail.startswith(ASKING_DETAIL) and "say yes or no" in c.detail
    assert c.status()["asking"] is True
    return c, pipe, rec, hold


def _say(qtbot, c, pipe, hold, text):
    interrupts = pipe.interrupts
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=2000)
    assert pipe.interrupts == interrupts  # the turn that asked was not barged in on
    audio, reply = pipe.heard[-1]
    assert isinstance(audio, np.ndarray) and len(audio)
    reply(text)  # from the STT thread in the app


def test_a_held_key_and_a_spoken_yes_allow_and_a_no_denies(asked, qtbot):
    c, pipe, rec, hold = asked
    turns = pipe.turn
    _say(qtbot, c, pipe, hold, "Yes, go ahead.")
    qtbot.waitUntil(lambda: c.answers == [True], timeout=2000)
    assert pipe.turn == turns and pipe.key_ups == [1]  # no new turn, no key up to the STT
    # the question stops playing while the key is held (the microphone would hear it)
    assert pipe.hushed == [(1, True), (1, False)]
    c.permission_settled()
    c.permission_asked()
    _say(qtbot, c, pipe, hold, "No.")
    qtbot.waitUntil(lambda: c.answers == [True, False], timeout=2000)


def test_an_unclear_answer_asks_once_more_then_counts_as_no(asked, qtbot):
    c, pipe, _rec, hold = asked
    _say(qtbot, c, pipe, hold, "Thank you.")
    qtbot.waitUntil(lambda: any("Not understood" in n for n in c.notices), timeout=2000)
    assert c.answers == [] and c.situation.asking
    _say(qtbot, c, pipe, hold, "What?")
    qtbot.waitUntil(lambda: c.answers == [False], timeout=2000)


def test_a_tap_does_not_answer_and_an_answer_after_a_click_is_dropped(asked, qtbot):
    c, pipe, rec, hold = asked
    hold(qtbot, c, seconds=0.02)  # under audio.min_press_ms
    qtbot.waitUntil(lambda: any("say yes or no" in n for n in c.notices), timeout=2000)
    assert c.answers == [] and pipe.heard == [] and rec.cancelled == 1
    _say(qtbot, c, pipe, hold, "")
    c.permission_settled()  # Allow was clicked while the answer was being transcribed
    pipe.heard[-1][1]("yes")
    qtbot.wait(100)
    assert c.answers == []


def test_a_hushed_turn_plays_nothing_until_unhushed_and_goes_on():
    """The player side of the key held to answer: the question's audio is dropped while the
    key is down, the answer after it plays, and the turn is not closed by it."""
    from s2s_desktop.audio.sink import CaptureSink
    from s2s_desktop.pipeline.events import PipelineEvents
    from s2s_desktop.pipeline.messages import SpeechChunk
    from s2s_desktop.pipeline.player_stage import PlayerStage
    from s2s_desktop.pipeline.turns import TurnBook, TurnClock

    clock, book, sink = TurnClock(), TurnBook(), CaptureSink()
    player = PlayerStage(None, clock=clock, book=book, events=PipelineEvents(), outbox=None,
                         sink=sink)
    turn = clock.new_turn()
    book.open(turn)

    def say(value):
        player.handle(SpeechChunk(turn, pcm=np.full(160, value, np.float32), sample_rate=16000,
                                  sentence=0, text="x"))

    say(0.1)
    player.hush(turn, True)
    assert sink.flushes  # what was playing stops at the press
    say(0.2)  # the rest of the question, made while the key is held
    player.hush(turn, False)
    say(0.3)  # the answer
    assert [round(float(pcm[0]), 1) for _, pcm in sink.chunks[turn]] == [0.1, 0.3]
    assert book.get(turn) is not None and not clock.is_stale(turn)


def test_the_floating_window_says_how_to_answer_while_a_question_waits(qtbot):
    from s2s_desktop.config import Settings
    from s2s_desktop.controller import AppController
    from s2s_desktop.ui.actions import AppActions
    from s2s_desktop.ui.floating_window import FloatingWindow
    from tests.test_controller import speaking

    pipe = AnswerPipeline()
    c = AppController(Settings(), pipe, FakeRecorder())
    win = FloatingWindow(AppActions())
    qtbot.addWidget(win)
    c.state_changed.connect(lambda state, detail: win.show_state(state, detail))
    speaking(qtbot, c, pipe)
    qtbot.waitUntil(lambda: c.state == "speaking", timeout=1000)
    assert win.talk.text() == "Talk (interrupts)"
    c.permission_asked()
    assert "say yes or no, or click Allow / Deny" in win.detail_label.text()
    assert win.talk.text() == "Hold to say yes or no"
    c.permission_settled()
    assert win.talk.text() == "Talk (interrupts)"
