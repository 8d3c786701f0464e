"""What speech-to-text gets in hands-free conversation, against push-to-talk, for the same
espeak question after digital silence (a PulseAudio null sink's, as in
scripts/hands_free_loop.py): the speech from before its onset, its first syllable as loud as
spoken, the words as push-to-talk hears them. The noise suppressor warming up on the first
speech after digital silence took ~9 dB off a question's first 0.3 s ("What is" heard as "But
this is" in the app's runs) and mangled words; with no echo possible the raw microphone goes."""

from __future__ import annotations

import numpy as np
import pytest

from s2s_desktop.audio.echo import EchoCanceller
from s2s_desktop.engines.vad.silero_stream import SileroStream
from s2s_desktop.hands_free.listener import HandsFreeListener, TurnTaking
from s2s_desktop.hands_free.turns import HandsFreeTurns
from tests.conftest import listen, same_words
from tests.helpers.clips import read_wav, silence
from tests.test_hands_free_turns import CallLog

pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
RATE, BLOCK = 16000, 1024


def level_db(audio: np.ndarray) -> float:
    return 10 * np.log10(np.mean(np.square(audio)) + 1e-12)


@pytest.mark.parametrize("voice,question", [("en-us", "What is the capital of Canada?"),
                                            ("en-029", "What is the capital of Australia?")])
def test_stt_gets_the_question_as_push_to_talk_would(speech, vad, starter_stt_model,  # noqa: F811
                                                     voice, question):
    said = read_wav(speech(question, voice=voice))
    mic = np.concatenate([silence(1.0), said, silence(2.0)])  # digital silence around it
    pipeline = CallLog()
    fed: list[np.ndarray] = []
    pipeline.feed = lambda turn, pcm: fed.append(np.asarray(pcm, np.float32).copy())
    hf = HandsFreeListener(SileroStream(vad), None, EchoCanceller(origin=0.0),
                           TurnTaking(use_turn_model=False))
    turns = HandsFreeTurns(pipeline, hf, lambda e: None)
    for k in range(0, len(mic) - BLOCK + 1, BLOCK):
        for event in hf.process(mic[k:k + BLOCK], k / RATE):
            turns.on_event(event)
    heard = np.concatenate(fed)
    onset = int(np.flatnonzero(np.abs(heard) > 0.02)[0])
    assert onset >= 0.2 * RATE  # what came before the speech went too (the preroll)
    first = heard[onset:onset + int(0.3 * RATE)]
    spoken = said[np.flatnonzero(np.abs(said) > 0.02)[0]:][:len(first)]
    assert abs(level_db(first) - level_db(spoken)) < 1.0  # its first syllable as loud as said
    words = listen(starter_stt_model, heard, RATE)
    assert words.lower().startswith("what"), words
    assert same_words(question, words, at_least=0.9), words
