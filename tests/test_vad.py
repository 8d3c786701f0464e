"""VAD backends on real (espeak-ng) speech, silence and noise; the trim helper."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from s2s_desktop.config import VADSettings
from s2s_desktop.engines.base import SpeechSegment, VADOptions
from s2s_desktop.engines.registry import engine_class
from s2s_desktop.engines.vad.passthrough import PassthroughVAD
from s2s_desktop.engines.vad.silero_onnx import SileroOnnxVAD, segments_from_probs
from s2s_desktop.engines.vad.trim import padded_regions, trim
from tests.helpers.clips import SAMPLE_RATE, read_wav, silence, white_noise

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def question(speech):
    return read_wav(speech(QUESTION))


@pytest.fixture(scope="module")
def onnx_vad():
    vad = SileroOnnxVAD(VADSettings())
    vad.load()
    vad.warmup()
    return vad


def has_silero_package() -> bool:
    return importlib.util.find_spec("silero_vad") is not None and (
        importlib.util.find_spec("torch") is not None
    )


@pytest.fixture(scope="module")
def torch_vad():
    if not has_silero_package():
        pytest.skip("the silero-vad package (extra 'torch') is not installed")
    vad = engine_class("vad", "silero")(VADSettings(), "cpu")
    vad.load()
    return vad


@pytest.fixture(params=["onnx", "torch"])
def vad(request):
    return request.getfixturevalue(f"{request.param}_vad")


def options(**changes) -> VADOptions:
    """VAD options as the settings with these changes give them (they come with each call)."""
    return VADOptions.of(VADSettings(**changes))


@pytest.mark.skipif(not has_silero_package(), reason="silero-vad (extra 'torch') not installed")
def test_torch_vad_gives_torch_its_thread_count_back():
    # silero_vad sets torch to one thread when imported; that would slow every torch stage.
    if "silero_vad" in sys.modules:
        pytest.skip("silero_vad was already imported in this process")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        engine_class("vad", "silero")(VADSettings(), "cpu").load()
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_registry_names_the_vad_classes():
    assert engine_class("vad", "silero-onnx") is SileroOnnxVAD
    assert engine_class("vad", "none") is PassthroughVAD


def test_load_sets_loaded(onnx_vad):
    assert onnx_vad.loaded
    assert onnx_vad.describe() == "silero-onnx on cpu"


# ------------------------------------------------------------------ real speech, silence, noise


def test_finds_the_speech_in_a_padded_question(vad, question):
    clip = np.concatenate([silence(1.0), question, silence(1.0)])
    segments = vad.speech(clip, VADOptions.of(vad.settings))
    assert segments, "no speech found in a spoken question"
    speech_start, speech_end = SAMPLE_RATE, SAMPLE_RATE + len(question)
    first, last = segments[0], segments[-1]
    # Within 100 ms of where the voice starts; ends before the trailing second of silence.
    assert speech_start - 0.1 * SAMPLE_RATE <= first.start <= speech_start + 0.3 * SAMPLE_RATE
    assert last.end <= speech_end + 0.3 * SAMPLE_RATE
    found = sum(s.end - s.start for s in segments)
    assert found >= 0.6 * len(question)


@pytest.mark.parametrize(
    "clip",
    [
        pytest.param(silence(3.0), id="digital-silence"),
        pytest.param(white_noise(3.0, rms=0.003), id="white-noise-rms-0.003"),
        pytest.param(white_noise(3.0, rms=0.02, seed=1), id="white-noise-rms-0.02"),
        pytest.param(np.zeros(0, dtype=np.float32), id="empty"),
    ],
)
def test_no_speech_in_silence_or_low_noise(vad, clip):
    assert vad.speech(clip, VADOptions.of(vad.settings)) == []


def test_min_silence_decides_whether_two_phrases_are_one_region(onnx_vad, speech):
    one, two = read_wav(speech("Turn on the lights.")), read_wav(speech("And close the door."))
    clip = np.concatenate([silence(0.5), one, silence(0.8), two, silence(0.5)])
    apart = onnx_vad.speech(clip, options(min_silence_ms=300))
    joined = onnx_vad.speech(clip, options(min_silence_ms=2000))
    assert len(apart) >= 2
    assert len(joined) == 1


def test_min_speech_drops_regions_shorter_than_it(onnx_vad, question):
    clip = np.concatenate([silence(0.5), question, silence(0.5)])
    assert onnx_vad.speech(clip, options(min_speech_ms=150))
    assert onnx_vad.speech(clip, options(min_speech_ms=5000)) == []


def test_onnx_vad_does_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from s2s_desktop.config import VADSettings
        from s2s_desktop.engines.base import VADOptions
        from s2s_desktop.engines.vad.silero_onnx import SileroOnnxVAD
        vad = SileroOnnxVAD(VADSettings()); vad.load(); vad.warmup()
        t = np.arange(48000) / 16000
        vad.speech((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), VADOptions.of(vad.settings))
        print("torch" in sys.modules)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ segmentation from probabilities


def test_segments_from_probs_hysteresis_and_limits():
    w = 512
    probs = [0.0] * 10 + [0.9] * 20 + [0.4] * 3 + [0.9] * 10 + [0.0] * 30 + [0.8] * 2 + [0.0] * 20
    segs = segments_from_probs(np.array(probs), len(probs) * w, 0.5, 150, 300)
    # 0.4 is above the low threshold (0.35): the first region carries through it; the 2-window
    # blip (64 ms) is shorter than min_speech (150 ms) and is dropped.
    assert segs == [SpeechSegment(10 * w, 43 * w)]


def test_segments_from_probs_speech_running_to_the_end():
    probs = np.array([0.0, 0.0] + [0.9] * 20)
    segs = segments_from_probs(probs, 22 * 512 - 100, 0.5, 100, 300)
    assert segs == [SpeechSegment(2 * 512, 22 * 512 - 100)]


# ------------------------------------------------------------------ passthrough


def test_passthrough_vad_keeps_the_whole_clip_unless_digital_silence(question):
    vad = engine_class("vad", "none")(VADSettings(), "cpu")
    vad.load()
    assert vad.loaded
    assert vad.speech(question, VADOptions.of(vad.settings)) == [SpeechSegment(0, len(question))]
    assert vad.speech(white_noise(1.0, rms=0.01), VADOptions.of(vad.settings)) == [SpeechSegment(0, SAMPLE_RATE)]
    assert vad.speech(silence(2.0), VADOptions.of(vad.settings)) == []
    assert vad.speech(np.zeros(0, dtype=np.float32), VADOptions.of(vad.settings)) == []


# ------------------------------------------------------------------ trim


def test_trim_keeps_the_speech_and_drops_two_seconds_of_silence(onnx_vad, question):
    clip = np.concatenate([silence(2.0), question, silence(2.0)])
    pad = int(0.15 * SAMPLE_RATE)
    trimmed = trim(clip, onnx_vad.speech(clip, VADOptions.of(onnx_vad.settings)), pad)
    assert trimmed.dtype == np.float32
    assert len(trimmed) < len(clip) - 3 * SAMPLE_RATE
    assert len(trimmed) >= 0.8 * len(question)
    # The loud part of the question survives the cut.
    assert np.max(np.abs(trimmed)) == pytest.approx(np.max(np.abs(question)), rel=1e-6)
    # What is left is still speech to the VAD.
    assert onnx_vad.speech(trimmed, VADOptions.of(onnx_vad.settings))


def test_trim_pads_merges_and_clips():
    audio = np.arange(100, dtype=np.float32)
    segs = [
        SpeechSegment(40, 50),
        SpeechSegment(5, 10),
        SpeechSegment(53, 60),
        SpeechSegment(95, 99),
    ]
    assert padded_regions(segs, 100, 3) == [
        SpeechSegment(2, 13),
        SpeechSegment(37, 63),  # 40-50 and 53-60 overlap once padded
        SpeechSegment(92, 100),  # clipped to the clip's end
    ]
    out = trim(audio, segs, 3)
    assert out.tolist() == list(range(2, 13)) + list(range(37, 63)) + list(range(92, 100))


def test_trim_without_segments_is_empty():
    assert trim(np.ones(1000, dtype=np.float32), [], 160).size == 0
    assert trim(np.zeros(0, dtype=np.float32), [SpeechSegment(0, 10)], 160).size == 0
