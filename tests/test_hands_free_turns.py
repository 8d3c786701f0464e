"""Hands-free turns on the real starter pipeline: a question the listener hears (espeak, real
VAD and end-of-turn model) becomes a live turn that is transcribed and answered with no key
pressed; speech over that reply barges in, and the new question is answered."""

from __future__ import annotations

import numpy as np
import pytest

from s2s_desktop.hands_free.listener import HandsFreeEventKind
from s2s_desktop.hands_free.turns import HandsFreeTurns
from s2s_desktop.states import TurnReason
from tests.conftest import same_words
from tests.helpers.clips import read_wav, silence
from tests.test_hands_free import feed, listener


@pytest.fixture(scope="module")
def turn_model():
    from s2s_desktop.engines.turn.smart_turn import SmartTurn

    model = SmartTurn()
    model.load()
    return model


@pytest.fixture(scope="module")
def vad():
    from s2s_desktop.engines.vad.silero_onnx import SileroOnnxVAD
    from tests.test_hands_free import VADSettings

    engine = SileroOnnxVAD(VADSettings())
    engine.load()
    return engine


@pytest.mark.e2e
def test_spoken_question_is_answered_without_a_key(speech, starter_session, vad, turn_model):
    ended = []
    hf = listener(vad, turn_model)
    turns = HandsFreeTurns(starter_session.pipeline, hf, ended.append)
    question = read_wav(speech("What is the capital of France?"))
    feed(hf, np.concatenate([silence(0.5), question, silence(1.5)]), dispatch=turns.on_event)
    assert len(turns.turns) == 1 and turns.turn is None and ended == []
    first = starter_session.wait(turns.turns[0], timeout_s=120)
    assert first.reason == TurnReason.OK
    assert same_words("What is the capital of France?", first.transcript), first.transcript
    assert "paris" in first.reply.lower()


@pytest.mark.e2e
def test_speech_over_the_reply_interrupts_it(speech, starter_session, vad, turn_model):
    hf = listener(vad, turn_model)
    turns = HandsFreeTurns(starter_session.pipeline, hf, lambda e: None)
    long_question = read_wav(speech("Tell me a long story about a dragon."))
    feed(hf, np.concatenate([silence(0.3), long_question, silence(1.5)]),
         dispatch=turns.on_event)
    story = turns.turns[0]
    hf.replying = True  # the reply plays (into the capture sink) while the user speaks again
    stop = read_wav(speech("Stop, what is the capital of Italy?"))
    events = feed(hf, np.concatenate([stop, silence(0.2)]), t0=600.0, dispatch=turns.on_event)
    # paused at the voice's onset, a barge-in once the speech goes on
    assert [e.kind for e in events][:2] == [HandsFreeEventKind.REPLY_PAUSED,
                                            HandsFreeEventKind.BARGE_IN]
    hf.replying = False
    feed(hf, silence(1.5), t0=610.0, dispatch=turns.on_event)
    interrupted = starter_session.wait(story, timeout_s=120)
    assert interrupted.reason == TurnReason.INTERRUPTED
    # "Stop," and its pause may end a turn of its own (a local command that says nothing);
    # the question after it is the last turn, and it is answered
    answer = starter_session.wait(turns.turns[-1], timeout_s=120)
    assert answer.reason == TurnReason.OK
    assert same_words("What is the capital of Italy?", answer.transcript), answer.transcript
    assert "italy" in answer.reply.lower(), answer.reply  # SmolLM2-135M's facts are its own
