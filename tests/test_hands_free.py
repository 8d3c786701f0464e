"""Hands-free turn taking on real speech (espeak), the real silero VAD and the real end-of-turn
model: a question ends its turn soon after its last word, a mid-sentence pause does not, the
app's own voice does not start a turn, speech over a reply barges in and a cough does not, and
the mode times out. The session on a (fake) microphone that disappears stops with a message
and closes it."""

from __future__ import annotations

import time

import numpy as np
import pytest

from s2s_desktop.audio import echo as echo_module
from s2s_desktop.engines.vad.silero_stream import SileroStream
from s2s_desktop.hands_free.listener import (
    SILENCE_ONLY_MS,
    HandsFreeEventKind,
    HandsFreeListener,
    TurnTaking,
)
from tests.conftest import listen
from tests.helpers.clips import read_wav, silence, white_noise

T0 = 500.0
BLOCK = 1024  # 64 ms microphone blocks, as HandsFreeSession opens them
Kind = HandsFreeEventKind




def listener(vad, turn_model=None, echo=None, **tuning):
    return HandsFreeListener(SileroStream(vad), turn_model, echo, TurnTaking(**tuning))


def feed(hf, audio, t0=T0, reference=None, replying_until=None, dispatch=None):
    """Feed `audio` in 64 ms blocks; `reference` (16 kHz) is what the app plays meanwhile;
    `dispatch` gets each event as it happens (as a session's on_event would)."""
    events = []
    for k in range(len(audio) // BLOCK):
        t = t0 + k * BLOCK / 16000
        if replying_until is not None:
            hf.replying = t < replying_until
        if reference is not None and hf.echo is not None:
            hf.echo.reference(reference[k * BLOCK : (k + 1) * BLOCK], 16000, t)
        new = hf.process(audio[k * BLOCK : (k + 1) * BLOCK], t)
        for event in new if dispatch is not None else ():
            dispatch(event)
        events += new
    return events


def kinds(events):
    return [e.kind for e in events]


def test_question_ends_its_turn_soon_after_the_last_word(speech, vad, turn_model):
    question = read_wav(speech("What is the capital of France?"))
    audio = np.concatenate([silence(0.5), question, silence(2.0)])
    events = feed(listener(vad, turn_model), audio)
    assert kinds(events) == [Kind.SPEECH_STARTED, Kind.TURN_ENDED]
    ended = events[1]
    assert ended.turn_probability is not None and ended.turn_probability > 0.5
    # the turn's audio holds the whole question
    assert len(ended.audio) >= len(question) - 3200
    # decided on the audio of the first 0.5 s after the question's last sound
    last_word = T0 + 0.5 + len(question) / 16000
    assert ended.at - last_word < 0.5, ended.at - last_word


def test_turn_model_ends_turns_sooner_than_silence_alone(speech, vad, turn_model):
    question = read_wav(speech("Tell me a joke about cats."))
    audio = np.concatenate([silence(0.5), question, silence(2.0)])
    with_model = feed(listener(vad, turn_model), audio)[-1]
    silence_only = feed(listener(vad, use_turn_model=False), audio)[-1]
    assert with_model.kind == silence_only.kind == Kind.TURN_ENDED
    assert silence_only.at - silence_only.speech_ended_at >= SILENCE_ONLY_MS / 1000 - 0.05
    assert silence_only.at - with_model.at >= 0.5


def test_mid_sentence_pause_waits_for_the_rest(speech, vad, turn_model, starter_stt_model):
    first = read_wav(speech("What is the capital of"))
    rest = read_wav(speech("France?"))
    audio = np.concatenate([silence(0.5), first, silence(0.7), rest, silence(2.0)])
    hf = listener(vad, turn_model)
    hf.transcript = lambda turn_audio: listen(starter_stt_model, turn_audio, 16000)
    events = feed(hf, audio)
    assert kinds(events) == [Kind.SPEECH_STARTED, Kind.TURN_ENDED]
    assert len(events[1].audio) >= len(first) + len(rest)


def test_a_finished_waits_for_the_live_words_and_not_forever(speech, vad, turn_model):
    """The app's live words come later than the model's verdict: "finished" waits for them
    (and is overruled by "... of"), and ends the turn anyway if they never come."""
    first = read_wav(speech("What is the capital of"))
    audio = np.concatenate([silence(0.5), first, silence(2.5)])
    asked = []
    late = lambda n: asked.append(n) or (None if len(asked) < 3 else "What is the capital of")  # noqa: E731
    hf = listener(vad, turn_model)
    hf.words_so_far = late
    ended = [e for e in feed(hf, audio) if e.kind is Kind.TURN_ENDED]
    assert len(asked) >= 3 and min(asked) >= len(first) - 3200  # the speech, up to its end
    assert ended and ended[0].turn_probability is None  # the 1.6 s pause ended it, not "finished"
    never = listener(vad, turn_model)
    never.words_so_far = lambda n: None
    ended = [e for e in feed(never, audio) if e.kind is Kind.TURN_ENDED]
    assert ended and ended[0].turn_probability is not None  # the model's verdict, held ≤ 1 s
    assert ended[0].at - ended[0].speech_ended_at < 1.6


def test_speech_over_the_reply_barges_in_a_cough_does_not(speech, vad, turn_model):
    stop = read_wav(speech("Stop, what is the capital of Italy?"))
    hf = listener(vad, turn_model)
    hf.replying = True
    rng = np.random.default_rng(1)
    cough = white_noise(0.18, 0.3, seed=2) * np.hanning(int(0.18 * 16000)).astype(np.float32)
    cough += 0.05 * rng.standard_normal(len(cough)).astype(np.float32)
    assert feed(hf, np.concatenate([silence(1.2), cough, silence(1.0)])) == []
    events = feed(hf, np.concatenate([stop, silence(2.0)]), t0=T0 + 10)
    # the reply pauses at the voice's onset and is dropped once it is a barge-in (with the
    # loudspeaker obeying: tests/test_barge_in.py; how soon: scripts/echo_rig.py)
    assert kinds(events)[:2] == [Kind.REPLY_PAUSED, Kind.BARGE_IN]
    onset = T0 + 10 + np.flatnonzero(np.abs(stop) > 0.02)[0] / 16000
    assert events[0].at > onset
    hf.replying = False
    assert Kind.TURN_ENDED in kinds(events)


def test_nothing_said_times_out_once(vad):
    hf = listener(vad, timeout_s=1.0)
    events = feed(hf, white_noise(2.5, 0.002))
    assert kinds(events) == [Kind.TIMED_OUT]


def test_no_timeout_while_the_app_speaks(vad):
    hf = listener(vad, timeout_s=1.0)
    hf.replying = True
    assert feed(hf, silence(2.5)) == []


def test_own_voice_through_the_room_starts_no_turn(speech, vad, turn_model):
    pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
    reply = read_wav(speech(
        "Paris is the capital of France. It lies on the river Seine. The city has about two "
        "million people, and many more live around it."
    ))
    from tests.test_echo import room

    mic = room(reply, delay_s=0.09, gain=0.5)
    reference = np.concatenate([reply, np.zeros(len(mic) - len(reply), np.float32)])
    hf = listener(vad, turn_model, echo=echo_module.EchoCanceller(origin=T0))
    # the app says it replies only while it sends audio; its echo's tail must not count
    events = feed(hf, mic, reference=reference, replying_until=T0 + len(reply) / 16000)
    assert events == [], [(e.kind, e.at - T0) for e in events]

    question = read_wav(speech("And what about Germany?"))
    events = feed(hf, np.concatenate([question, silence(2.0)]), t0=T0 + len(mic) / 16000 + 0.5)
    assert kinds(events) == [Kind.SPEECH_STARTED, Kind.TURN_ENDED]


def test_own_voice_without_a_reference_does_not_barge_in(speech, vad, turn_model):
    """The output device changed: the reply's echo reaches the microphone, but nothing told
    the canceller what was played, so it takes nothing out: that must not pass as the user."""
    pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
    from tests.test_echo import room

    reply = read_wav(speech("Paris is the capital of France. It lies on the river Seine, and "
                            "many people visit it every year."))
    hf = listener(vad, turn_model, echo=echo_module.EchoCanceller(origin=T0))
    hf.replying = True
    assert feed(hf, room(reply, delay_s=0.09, gain=0.5)) == []


def test_session_stops_and_closes_the_microphone_when_it_disappears(vad):
    from s2s_desktop.hands_free.session import HandsFreeSession, StreamingMicrophone
    from tests.helpers.fake_sounddevice import FakeSoundDevice

    sd = FakeSoundDevice(input_amplitude=0.0)
    mic = StreamingMicrophone(sd=sd, keep_open=True)
    got = []
    session = HandsFreeSession(listener(vad), mic, got.append)
    session.start()
    assert mic.is_open
    time.sleep(0.3)
    stream = mic._stream
    stream.abort()  # the device went away: no more blocks, the stream inactive
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e.kind for e in got] == [Kind.STOPPED]
    assert "push-to-talk still works" in got[0].message
    assert not mic.is_open
    session.stop()


def test_settings_turn_hands_free_on_and_set_its_timeout():
    from s2s_desktop import config

    settings = config.apply_overrides(config.Settings(), config.parse_overrides(
        ["listen.hands_free=true", "listen.hands_free_timeout_s=45"]))
    assert settings.listen.hands_free is True and settings.listen.hands_free_timeout_s == 45.0
    assert config.Settings().listen.hands_free is False  # push-to-talk stays the default
    assert config.from_dict(settings.to_dict()).listen == settings.listen
