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


class CallLog:
    """A pipeline that notes what it is asked, in order."""

    def __init__(self):
        self.calls: list[tuple] = []

    def begin_turn(self, source=""):
        self.calls.append(("begin", source))
        return 7

    def feed(self, turn, pcm):
        self.calls.append(("feed", turn, len(pcm)))

    def key_up(self, turn):
        self.calls.append(("key_up", turn))

    def end_turn(self, turn, released_at=None):
        self.calls.append(("end", turn))


def test_the_words_are_transcribed_while_the_end_of_turn_model_decides(speech, vad, turn_model):
    """As at a key's release: the pause the model is asked about sends the speech so far to
    STT (key_up) before the turn ends, so the answer need not wait for a transcription."""
    log = CallLog()
    hf = listener(vad, turn_model)
    turns = HandsFreeTurns(log, hf, lambda e: None)
    question = read_wav(speech("What is the capital of France?"))
    feed(hf, np.concatenate([silence(0.5), question, silence(1.5)]), dispatch=turns.on_event)
    names = [c[0] for c in log.calls]
    assert names[0] == "begin" and names[-1] == "end" and "key_up" in names
    first_key_up = names.index("key_up")
    fed = sum(c[2] for c in log.calls[:first_key_up] if c[0] == "feed")
    assert fed >= len(question)  # the whole question was fed before it
    assert ("key_up", 7) in log.calls and log.calls[-1] == ("end", 7)
