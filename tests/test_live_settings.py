"""Settings marked `applies_live` apply to the next turn without a reload (issue 30, part 1).

Each test changes one live field through `Pipeline.reload`, as Settings → OK does, checks that
no stage reloads, runs the next turn on the real starter models and observes what a user would
notice. Before the fix each engine kept reading the section it was built with, so every one of
these saw no change."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from s2s_desktop import config
from s2s_desktop.audio.files import read_audio
from s2s_desktop.audio_format import SAMPLE_RATE

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.required()]

SENTENCE = "The capital of France is Paris, a city on the river Seine."
QUESTION = "Can you explain how rain forms?"


@pytest.fixture(scope="module")
def session(starter_settings):
    """A starter pipeline of this module's own: the tests change its settings."""
    from s2s_desktop.pipeline.runner import HeadlessSession

    settings = starter_settings.copy()
    settings.llm.max_new_tokens = 40  # replies long enough to tell apart, short enough to wait
    session = HeadlessSession(settings)
    yield session
    session.close()


@pytest.fixture
def live(session):
    """Change live settings as the Settings dialog does (a new Settings to reload); the
    settings the session started with come back after the test."""
    before = session.pipeline.settings

    def change(**keys) -> None:
        new = config.apply_overrides(session.pipeline.settings.copy(), keys)
        assert session.pipeline.reload(new) == [], "a live setting reloaded a model"

    yield change
    session.pipeline.reload(before)


def spoken_seconds(session, text: str) -> float:
    """Seconds of speech the TTS stage makes for `text` (through the pipeline's `say`)."""
    turn = session.pipeline.say(text)
    rec = session.wait(turn, 120)
    assert rec.reason == "ok", rec
    seconds = len(session.sink.audio(turn)) / session.sink.sample_rates[turn]
    session.sink.forget(turn)
    return seconds


def reply_to(session, question: str) -> tuple[str, int]:
    """The reply to `question` asked afresh (no earlier exchange), and its token count."""
    session.pipeline.new_conversation()
    rec = session.ask(question, timeout_s=300)
    assert rec["reason"] == "ok", rec
    return rec["reply"], session.pipeline.book.get(rec["turn"]).tokens


def test_tts_speed_makes_the_same_sentence_shorter(session, live):
    normal = spoken_seconds(session, SENTENCE)
    live(**{"tts.speed": "1.6"})
    fast = spoken_seconds(session, SENTENCE)
    assert 0.5 < fast / normal < 0.75, (normal, fast)  # ~1/1.6 = 0.625


def test_llm_max_new_tokens_cuts_the_reply(session, live):
    whole, tokens = reply_to(session, QUESTION)
    assert tokens > 10, whole
    live(**{"llm.max_new_tokens": "5"})
    cut, cut_tokens = reply_to(session, QUESTION)
    assert 1 <= cut_tokens <= 5 and len(cut) < len(whole), (whole, cut)


def test_llm_temperature_makes_the_reply_vary(session, live):
    greedy = {reply_to(session, QUESTION)[0] for _ in range(2)}
    assert len(greedy) == 1, greedy  # temperature 0: the same reply every time
    live(**{"llm.temperature": "1.5", "llm.max_new_tokens": "24"})
    sampled = {reply_to(session, QUESTION)[0] for _ in range(3)}
    assert sampled - greedy, sampled  # sampling: not the greedy reply every time


def test_llm_repeat_penalty_changes_the_reply(session, live):
    usual, _ = reply_to(session, QUESTION)
    live(**{"llm.repeat_penalty": "2.0"})
    penalised, _ = reply_to(session, QUESTION)
    assert penalised != usual, usual


@pytest.fixture(scope="module")
def spoken_question(speech):
    return read_audio(speech("What is the capital of France?", voice="en"))


def test_a_vad_threshold_near_1_hears_no_speech(session, live, spoken_question):
    assert session.turn(spoken_question)["reason"] == "ok"
    live(**{"vad.threshold": "0.999"})  # silero is 0.996 sure of espeak's clean speech
    assert session.turn(spoken_question)["reason"] == "no speech"


def test_vad_min_speech_longer_than_the_question_hears_no_speech(session, live, spoken_question):
    live(**{"vad.min_speech_ms": "5000"})
    assert session.turn(spoken_question)["reason"] == "no speech"


def heard_audio(session, monkeypatch):
    """Seconds of audio the STT engine is given each turn (a spy on the real engine)."""
    engine, given = session.pipeline.stt.engine, []
    real = engine.transcribe

    def spy(audio, language, options):
        given.append(len(audio) / SAMPLE_RATE)
        return real(audio, language, options)

    monkeypatch.setattr(engine, "transcribe", spy)
    return given


def test_vad_min_silence_decides_whether_a_pause_is_cut(session, live, speech, monkeypatch):
    first = read_audio(speech("What is the capital", voice="en"))
    second = read_audio(speech("of France?", voice="en"))
    pause = np.zeros(int(1.2 * SAMPLE_RATE), np.float32)
    question = np.concatenate([first, pause, second])
    given = heard_audio(session, monkeypatch)
    session.turn(question)
    live(**{"vad.min_silence_ms": "3000"})
    session.turn(question)
    cut, kept = given[-2], given[-1]
    assert kept - cut > 0.6, given  # the 1.2 s pause (less the padding) is heard now


def test_stt_short_window_off_decodes_in_the_full_window(session, live, spoken_question,
                                                        monkeypatch):
    engine, windows = session.pipeline.stt.engine, []
    real = engine._decode  # faster-whisper's own 30 s window

    def full_window(*args, **kwargs):
        windows.append("full")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "_decode", full_window)
    assert "france" in session.turn(spoken_question)["transcript"].lower()
    assert windows == []  # the short window by default
    live(**{"stt.short_window": "false"})
    assert "france" in session.turn(spoken_question)["transcript"].lower()
    assert windows == ["full"]


ENGINES = Path(__file__).resolve().parents[1] / "s2s_desktop" / "engines"


# The reads allowed: at load, an STT engine refuses the language (and the "languages I speak")
# it loads with when its model cannot do them, so the user hears at once (each turn's own come
# with the call)
LOAD_CHECKS = ("self._language(self.settings.language)", "self._spoken(self.settings.languages)")


@pytest.mark.parametrize("stage", config.STAGES)
def test_no_engine_reads_a_live_setting_from_what_it_was_built_with(stage):
    """Every backend takes live settings per call; one read from `self.settings` would be
    stuck at its value at load (the bug these tests catch)."""
    section = getattr(config.Settings(), stage)
    live = [f.name for f in dataclasses.fields(section) if f.metadata.get(config.LIVE)]
    stuck = re.compile(r"settings\.(" + "|".join(live) + r")\b")
    for path in sorted((ENGINES / stage).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for check in LOAD_CHECKS:
            text = text.replace(check, "")
        found = stuck.findall(text)
        assert not found, f"{path.name} reads live {stage} settings {found} from self.settings"
