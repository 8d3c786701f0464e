"""A reply stopped mid-way is kept as far as its audio reached the speaker (issue 30, part 8):
not as far as it was handed to the output queue, which runs seconds ahead of the speaker."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from PySide6.QtCore import Qt

from s2s_desktop.audio.speaker import SpeakerSink
from s2s_desktop.pipeline.heard import HandedSentence, heard_pieces, words_within
from s2s_desktop.pipeline.runner import HeadlessSession
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_sounddevice import FakeSoundDevice

# three-letter words: each is one equal tone from the scripted TTS, so words = played tones
REPLY = "One two six ten. Red big hot old. Cat dog pig cow."
SPEED = 4.0  # the scripted voice's tone per word: 0.05 s x speed
WORD_SAMPLES = int(0.05 * 16000 * SPEED)


@pytest.mark.parametrize("text, fraction, kept", [
    ("One two six.", 1.0, "One two six."),
    ("One two six.", 0.5, "One"),  # "One tw|o": the cut word is not kept
    ("One two six.", 4 / 12, "One"),  # the cut falls on the space after "One"
    ("One two six.", 0.2, ""),
    ("One two six.", 0.0, ""),
])
def test_words_within_keeps_whole_words_up_to_the_cut(text, fraction, kept):
    assert words_within(text, fraction) == kept


def test_heard_pieces_end_in_the_sentence_the_speaker_stopped_in():
    handed = {0: HandedSentence("Paris is the capital.", 1.0),
              1: HandedSentence("It lies on the Seine river.", 2.0),
              2: HandedSentence("It is lovely.", 1.0)}
    assert heard_pieces(handed, {0: 1.0, 1: 1.0}) == ["Paris is the capital.", "It lies on"]
    assert heard_pieces(handed, {0: 0.5}) == ["Paris is"]
    assert heard_pieces(handed, {}) == []
    assert heard_pieces(handed, {0: 1.0, 1: 2.0, 2: 1.0})[-1] == "It is lovely."
    # a sink that cannot tell (a WAV file, a capture): what was handed over was heard
    assert heard_pieces(handed, None) == [s.text for s in handed.values()]


def played_tone_samples(sd: FakeSoundDevice) -> int:
    """Samples of the voice the fake device played (the silence it plays between is 0.0)."""
    return int(np.count_nonzero(sd.audio_played("default")))


def stop_once_played(session, sd: FakeSoundDevice, question: str, samples: float,
                     timeout_s: float):
    """Ask `question`, press Stop once the card has played `samples` of the reply's voice;
    returns the closed turn's record."""
    pipe = session.pipeline
    done = threading.Event()
    pipe.events.turn_finished.connect(lambda rec: done.set(), Qt.ConnectionType.DirectConnection)
    turn = pipe.submit_text(question)
    deadline = time.monotonic() + timeout_s
    while played_tone_samples(sd) < samples:
        assert time.monotonic() < deadline, "the speaker played nothing"
        time.sleep(0.01)
    assert pipe.interrupt() == [turn]
    assert done.wait(30)
    return pipe.book.get(turn)


@pytest.mark.parametrize("after_words", [2, 6])
def test_stop_keeps_the_text_whose_audio_reached_the_speaker(monkeypatch, after_words):
    scripted.install(monkeypatch)
    settings = scripted.settings(reply=REPLY)
    settings.tts.speed = SPEED
    sd = FakeSoundDevice()
    session = HeadlessSession(settings, sink=SpeakerSink(sd=sd))
    try:
        # the scripted voice makes the whole reply at once: it is all queued long before it
        # is all played; Stop comes in the middle of a word
        rec = stop_once_played(session, sd, "Count for me", (after_words + 0.5) * WORD_SAMPLES,
                               timeout_s=20)
        played_words = played_tone_samples(sd) / WORD_SAMPLES
        kept = " ".join(rec.spoken)
        assert rec.reason == "interrupted"
        assert REPLY.startswith(kept), kept
        assert abs(len(kept.split()) - played_words) <= 1, (kept, played_words)
        assert len(kept.split()) < len(REPLY.split())
        # the conversation the LLM sees next keeps what was heard, not what was queued
        assert session.pipeline.conversation.exchanges()[-1] == ("Count for me", kept)
    finally:
        assert session.close()


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.required()
def test_stopped_real_reply_keeps_what_whisper_hears_in_the_played_audio(
        starter_settings, starter_stt_model):
    """The starter voice speaks a real reply through a (fake) sound card; Stop after about
    two seconds. Whisper, listening to what the card played, hears the kept text."""
    from tests.conftest import listen, same_words

    sd = FakeSoundDevice()
    session = HeadlessSession(starter_settings.copy(), sink=SpeakerSink(sd=sd))
    try:
        # ~2 s of the voice (piper speaks at 22.05 kHz)
        rec = stop_once_played(session, sd, "Can you explain how rain forms?", 2.0 * 22050,
                               timeout_s=120)
        kept = " ".join(rec.spoken)
        heard = listen(starter_stt_model, sd.audio_played("default"), 22050)
        print("reply:", rec.reply, "| kept:", kept, "| heard:", heard)
        assert rec.reason == "interrupted" and kept and len(kept) < len(rec.reply)
        assert same_words(kept, heard), (kept, heard)
    finally:
        assert session.close()
