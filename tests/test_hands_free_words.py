"""Hands-free listening with the words the app's own pipeline hears (hands_free/words.py, as
app.py wires it): over a reply (real echo canceller, the room of test_barge_in.py) a bare
"Stop." takes the turn while "Yeah." lets the reply go on; a question paused after "of" waits
for the rest, its words the pipeline's live transcript. Real starter STT, real VAD, real
Smart Turn, espeak voices."""

from __future__ import annotations

import time

import numpy as np
import pytest

from s2s_desktop.hands_free.turns import HandsFreeTurns
from s2s_desktop.hands_free.words import PipelineWords
from s2s_desktop.states import TurnReason
from tests.conftest import same_words
from tests.helpers.clips import read_wav, silence
from tests.test_barge_in import RATE, T0, Kind, Room, kinds, listener, reply  # noqa: F401

pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
BLOCK = 1024


@pytest.mark.e2e
def test_a_bare_stop_over_the_reply_takes_the_turn(speech, vad, turn_model, reply,  # noqa: F811
                                                   starter_session):
    words = PipelineWords(starter_session.pipeline)
    room = Room(reply, read_wav(speech("Stop.")), user_at_s=2.0)
    events = room.run(listener(vad, turn_model, transcript=words.transcript), 5.0)
    assert kinds(events)[:2] == [Kind.REPLY_PAUSED, Kind.BARGE_IN]
    assert room.pos < len(reply)  # the rest of the reply was dropped


@pytest.mark.e2e
def test_yeah_over_the_reply_lets_it_go_on(speech, vad, turn_model, reply,  # noqa: F811
                                           starter_session):
    words = PipelineWords(starter_session.pipeline)
    room = Room(reply, read_wav(speech("Yeah.")), user_at_s=2.0)
    events = room.run(listener(vad, turn_model, transcript=words.transcript),
                      len(reply) / RATE + 3.0)
    assert Kind.BARGE_IN not in kinds(events) and Kind.SPEECH_STARTED not in kinds(events)
    assert room.pos == len(reply)  # all of it was played


def feed_in_real_time(hf, audio, dispatch):
    """The microphone's pace: the live transcript runs beside the listener, as in the app."""
    start = time.monotonic()
    for k in range(0, len(audio) - BLOCK + 1, BLOCK):
        due = start + k / RATE
        time.sleep(max(0.0, due - time.monotonic()))
        for event in hf.process(audio[k:k + BLOCK], due):
            dispatch(event)


@pytest.mark.e2e
def test_a_question_paused_after_of_waits_for_the_rest(speech, vad, turn_model,  # noqa: F811
                                                       starter_session):
    pipeline = starter_session.pipeline
    words = PipelineWords(pipeline)
    hf = listener(vad, turn_model, transcript=words.transcript)
    hf.echo = None  # no reply plays: nothing to cancel
    hf.words_so_far = words.so_far
    turns = HandsFreeTurns(pipeline, hf, lambda e: None)
    first = read_wav(speech("What is the capital of"))
    rest = read_wav(speech("France?"))
    feed_in_real_time(hf, np.concatenate([silence(0.5), first, silence(0.8), rest, silence(2.0)]),
                      turns.on_event)
    assert len(turns.turns) == 1 and turns.turn is None  # one turn, ended after "France?"
    answered = starter_session.wait(turns.turns[0], timeout_s=120)
    assert answered.reason == TurnReason.OK
    assert same_words("What is the capital of France?", answered.transcript), answered.transcript
    assert pipeline.live_words(1) is None  # a finished turn's words are no later turn's
