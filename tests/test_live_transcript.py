"""The live transcript: when the text transcribed while the key was held is reused at release
(`same_speech`, with its 150 ms tolerance), and, on the real starter Whisper, that the reused
text says exactly what a full decode of the same recording says."""

from __future__ import annotations

import time

import numpy as np
import pytest

from s2s_desktop.pipeline.messages import Partial, Utterance
from s2s_desktop.pipeline.stt_stage import same_speech
from s2s_desktop.pipeline.turns import FinishedTurn

CHUNK_S = 0.1
MS = 16  # samples per millisecond at 16 kHz


def partial(regions, covered):
    return Partial(1, audio=np.zeros(1, np.float32), regions=tuple(regions), covered=covered)


def final(regions):
    return Utterance(1, audio=np.zeros(1, np.float32), regions=tuple(regions))


def test_the_same_regions_fully_heard_are_the_same_speech():
    heard = partial([(1600, 30000)], covered=40000)
    assert same_speech(heard, final([(1600, 30000)]))
    two = [(1600, 20000), (28000, 36000)]
    assert same_speech(partial(two, covered=40000), final(two))


@pytest.mark.parametrize("edge", ["start", "end"])
def test_region_edges_up_to_150ms_apart_still_match(edge):
    heard = partial([(8000, 30000)], covered=60000)
    for shift, same in ((150 * MS, True), (-150 * MS, True), (150 * MS + 1, False),
                        (-150 * MS - 1, False)):
        moved = (8000 + shift, 30000) if edge == "start" else (8000, 30000 + shift)
        assert same_speech(heard, final([moved])) is same, (edge, shift)


def test_speech_past_what_the_partial_covered_is_not_the_same():
    # the region grew by 150 ms and reaches past the recording the partial saw by more than that
    heard = partial([(1600, 30000)], covered=30000)
    assert same_speech(heard, final([(1600, 30000 + 150 * MS)]))
    heard = partial([(1600, 30000)], covered=30000 - 1)
    assert not same_speech(heard, final([(1600, 30000 + 150 * MS)]))


def test_a_new_or_lost_region_is_not_the_same_speech():
    heard = partial([(1600, 20000)], covered=40000)
    assert not same_speech(heard, final([(1600, 20000), (30000, 38000)]))  # spoke again
    assert not same_speech(partial([(1600, 20000), (30000, 38000)], 40000),
                           final([(1600, 20000)]))  # two regions merged at release
    assert not same_speech(heard, final([]))


def hold_and_release(session, audio: np.ndarray) -> FinishedTurn:
    """Feed `audio` in real time as the microphone would while the key is held, let go, and
    return the finished turn's record."""
    pipe = session.pipeline
    turn = pipe.begin_turn()
    step = int(CHUNK_S * 16000)
    for i in range(0, len(audio), step):
        pipe.feed(turn, audio[i : i + step])
        time.sleep(CHUNK_S)
    pipe.end_turn(turn)
    rec = session.wait(turn, 120)
    session.sink.forget(turn)
    return rec


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.required()
@pytest.mark.parametrize(
    "question", ["What is the capital of France?", "Name three colours of the rainbow, please."]
)
def test_reused_live_transcript_equals_a_full_decode(starter_session, speech, question):
    from s2s_desktop.audio.files import read_audio

    # the question, then the quiet a speaker leaves before letting go of the key
    quiet = np.zeros(24000, np.float32)
    audio = np.concatenate([read_audio(speech(question, voice="en")), quiet])
    stt = starter_session.pipeline.settings.stt
    live = hold_and_release(starter_session, audio)
    saved = stt.live
    stt.live = False  # no partials: the whole recording is decoded after release
    try:
        full = hold_and_release(starter_session, audio)
    finally:
        stt.live = saved
    assert live.stt_reused_partial is True, live  # the live text was what got used
    assert full.stt_reused_partial is False, full
    assert live.transcript and live.transcript == full.transcript, (live, full)
    after = [rec.timings_ms.get("stt_after_release") for rec in (live, full)]
    print(f"\n[live] {live.transcript!r}: STT after release {after[0]} ms live, "
          f"{after[1]} ms as a full decode")
