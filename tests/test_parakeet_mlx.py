"""The parakeet-mlx STT backend on real MLX work (`mlx[cpu]` runs on Linux).

A tiny random Parakeet-TDT is built here from parakeet-mlx's own config dataclasses (random
weights saved as safetensors, a hand-written SentencePiece-style vocabulary in config.json, as
the package expects). Its output is noise: these tests check the flow, the types, the MLX lock,
the language rules and the errors, never the meaning of a transcript.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from s2s_desktop import mlx_lock as mlx_lock_module
from s2s_desktop.config import STTSettings
from s2s_desktop.engines.base import STTOptions, STTResult
from s2s_desktop.engines.registry import create
from s2s_desktop.errors import (
    BackendUnavailable,
    DeviceUnavailable,
    ModelLoadError,
    ModelNotFound,
    SettingsError,
)

HAS_PARAKEET = (
    importlib.util.find_spec("mlx") is not None
    and importlib.util.find_spec("parakeet_mlx") is not None
)
pytestmark = pytest.mark.optional("parakeet-mlx")

needs_parakeet = pytest.mark.skipif(
    not HAS_PARAKEET, reason='needs mlx and parakeet-mlx (pip install "s2s-desktop[mlx]")'
)

ENGLISH_VOCAB = ["<unk>", "▁what", "▁is", "▁the", "▁capital", "▁of", "▁paris", "▁hello"] + list(
    "abcdefghijklmnopqrstuvwxyz?."
)
EUROPEAN_VOCAB = ENGLISH_VOCAB + ["▁été", "é", "ä", "ß", "д", "ж"]
TDT_DURATIONS = [0, 1, 2, 3, 4]


def build_tiny_parakeet(out: Path, vocabulary: list[str]) -> Path:
    """A 1-layer Conformer TDT (d_model 16, 32 mel bins) with random weights."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from parakeet_mlx import ParakeetTDT, ParakeetTDTArgs
    from parakeet_mlx.audio import PreprocessArgs
    from parakeet_mlx.conformer import ConformerArgs
    from parakeet_mlx.parakeet import TDTDecodingArgs
    from parakeet_mlx.rnnt import JointArgs, JointNetworkArgs, PredictArgs, PredictNetworkArgs

    args = ParakeetTDTArgs(
        preprocessor=PreprocessArgs(
            sample_rate=16000,
            normalize="per_feature",
            window_size=0.025,
            window_stride=0.01,
            window="hann",
            features=32,
            n_fft=512,
            dither=0.0,
        ),
        encoder=ConformerArgs(
            feat_in=32,
            n_layers=1,
            d_model=16,
            n_heads=2,
            ff_expansion_factor=2,
            subsampling_factor=8,
            self_attention_model="rel_pos",
            subsampling="dw_striding",
            conv_kernel_size=3,
            subsampling_conv_channels=8,
            pos_emb_max_len=500,
        ),
        decoder=PredictArgs(
            blank_as_pad=True,
            vocab_size=len(vocabulary),
            prednet=PredictNetworkArgs(pred_hidden=16, pred_rnn_layers=1),
        ),
        joint=JointArgs(
            num_classes=len(vocabulary),
            vocabulary=vocabulary,
            jointnet=JointNetworkArgs(
                joint_hidden=16, activation="relu", encoder_hidden=16, pred_hidden=16
            ),
            num_extra_outputs=len(TDT_DURATIONS),
        ),
        decoding=TDTDecodingArgs(
            model_type="tdt", durations=TDT_DURATIONS, greedy={"max_symbols": 4}
        ),
    )
    mx.random.seed(0)
    model = ParakeetTDT(args)
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    config = dataclasses.asdict(args)
    # what NeMo's config names a TDT model by, as in mlx-community's conversions
    config["target"] = "nemo.collections.asr.models.rnnt_bpe_models.EncDecRNNTBPEModel"
    config["model_defaults"] = {"tdt_durations": TDT_DURATIONS}
    (out / "config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return build_tiny_parakeet(tmp_path_factory.mktemp("parakeet") / "tdt-en", ENGLISH_VOCAB)


@pytest.fixture(scope="module")
def engine(tiny_dir):
    stt = create("stt", STTSettings(backend="parakeet-mlx", model=str(tiny_dir)), "mlx")
    stt.load()
    stt.warmup()
    yield stt
    stt.unload()


def noise(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32)


# ---------------------------------------------------------------- load and transcribe


@needs_parakeet
def test_a_local_folder_loads_and_transcribes_to_text(engine):
    result = engine.transcribe(noise(2.0), None, STTOptions.of(engine.settings))
    assert isinstance(result, STTResult)
    assert isinstance(result.text, str) and result.text == result.text.strip()
    assert result.language == "en"  # English-only model: that is what it heard
    # what the noise model says is spelled with its own vocabulary ("▁" became spaces)
    assert set(result.text) <= set("".join(ENGLISH_VOCAB).replace("▁", " "))
    assert engine.describe() == "parakeet-mlx on mlx"


@needs_parakeet
def test_2d_input_and_audio_too_short_to_hear(engine):
    assert engine.transcribe(noise(1.0).reshape(1, -1), "en", STTOptions.of(engine.settings)).language == "en"
    assert engine.transcribe(np.zeros(100, np.float32), None, STTOptions.of(engine.settings)).text == ""  # under one mel frame
    assert engine.transcribe(np.zeros(0, np.float32), None, STTOptions.of(engine.settings)).text == ""


@needs_parakeet
def test_beam_search_runs_when_beam_size_is_above_one(tiny_dir):
    stt = create(
        "stt", STTSettings(backend="parakeet-mlx", model=str(tiny_dir), beam_size=2), "mlx"
    )
    stt.load()
    assert isinstance(stt.transcribe(noise(1.0, seed=3), None, STTOptions.of(stt.settings)).text, str)
    stt.unload()
    with pytest.raises(ModelLoadError, match="not loaded"):
        stt.transcribe(noise(0.5), None, STTOptions.of(stt.settings))


# ---------------------------------------------------------------- the MLX lock


@needs_parakeet
def test_transcribe_runs_under_the_mlx_lock(engine, monkeypatch):
    seen = []
    real_generate = engine._model.generate

    def watched(*args, **kwargs):
        seen.append(mlx_lock_module.holder())
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(engine._model, "generate", watched)
    engine.transcribe(noise(1.0), None, STTOptions.of(engine.settings))
    assert seen and seen[0] is not None and seen[0].stage == "stt"
    assert mlx_lock_module.holder() is None  # released afterwards


@needs_parakeet
def test_transcribe_waits_while_another_stage_holds_the_lock(engine):
    done = threading.Event()
    results = []

    def worker():
        results.append(engine.transcribe(noise(1.0, seed=1), None, STTOptions.of(engine.settings)))
        done.set()

    with mlx_lock_module.mlx_lock("llm"):
        thread = threading.Thread(target=worker, name="stt-test")
        thread.start()
        deadline = time.monotonic() + 5
        while mlx_lock_module._LOCK.waiting() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mlx_lock_module._LOCK.waiting() == 1  # the transcription queues for the lock
        assert not done.wait(0.3)
        assert mlx_lock_module.holder().stage == "llm"
    assert done.wait(30)
    thread.join(5)
    assert isinstance(results[0], STTResult)


# ---------------------------------------------------------------- language


@needs_parakeet
def test_an_english_model_refuses_other_languages_naming_english(tiny_dir, engine):
    stt = create(
        "stt", STTSettings(backend="parakeet-mlx", model=str(tiny_dir), language="fr"), "mlx"
    )
    with pytest.raises(
        SettingsError, match=r"cannot transcribe 'fr'.*English only: set stt.language to en"
    ):
        stt.load()
    assert not stt.loaded
    with pytest.raises(SettingsError, match="'de'"):
        engine.transcribe(noise(0.5), "de", STTOptions.of(engine.settings))
    assert engine.transcribe(noise(0.5), "en-US", STTOptions.of(engine.settings)).language == "en"


@needs_parakeet
def test_a_multilingual_model_accepts_its_languages_and_names_them(tmp_path):
    folder = build_tiny_parakeet(tmp_path / "tdt-v3", EUROPEAN_VOCAB)
    stt = create("stt", STTSettings(backend="parakeet-mlx", model=str(folder)), "mlx")
    stt.load()
    assert stt.transcribe(noise(0.5), None, STTOptions.of(stt.settings)).language is None  # v3 detects but does not report
    assert stt.transcribe(noise(0.5), "fr", STTOptions.of(stt.settings)).language == "fr"
    with pytest.raises(SettingsError, match=r"'ja'.*bg, cs, da, de"):
        stt.transcribe(noise(0.5), "ja", STTOptions.of(stt.settings))
    stt.unload()


def test_model_languages_from_the_vocabulary():
    from s2s_desktop.engines.stt.parakeet_mlx import EUROPEAN, model_languages

    assert model_languages(ENGLISH_VOCAB) == ("en",)
    assert model_languages(EUROPEAN_VOCAB) == EUROPEAN and len(EUROPEAN) == 25


# ---------------------------------------------------------------- errors


def _load(model: str):
    return create("stt", STTSettings(backend="parakeet-mlx", model=model), "mlx").load()


@needs_parakeet
def test_a_missing_folder_is_model_not_found(tmp_path, monkeypatch):
    # an empty HF cache and data dir, so a real download on this machine cannot answer
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    with pytest.raises(ModelNotFound, match="not found"):
        _load(str(tmp_path / "nowhere"))
    with pytest.raises(ModelNotFound, match="not downloaded"):
        _load("mlx-community/parakeet-tdt-0.6b-v2")  # never fetched from the Hub


@needs_parakeet
def test_broken_folders_say_what_is_wrong(tmp_path, tiny_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match=r"config.json \+ model.safetensors"):
        _load(str(empty))

    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((tiny_dir / "config.json").read_text())
    with pytest.raises(ModelLoadError, match="no model.safetensors"):
        _load(str(no_weights))

    bad_json = tmp_path / "bad-json"
    bad_json.mkdir()
    (bad_json / "config.json").write_text("{not json")
    (bad_json / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="unreadable"):
        _load(str(bad_json))

    whisper = tmp_path / "whisper"
    whisper.mkdir()
    (whisper / "config.json").write_text(json.dumps({"n_mels": 80}))
    (whisper / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="not a Parakeet model"):
        _load(str(whisper))

    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "config.json").write_text((tiny_dir / "config.json").read_text())
    data = (tiny_dir / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="could not load"):
        _load(str(truncated))

    wrong_shapes = tmp_path / "wrong-shapes"
    wrong_shapes.mkdir()
    config = json.loads((tiny_dir / "config.json").read_text())
    config["encoder"]["d_model"] = 32  # the weights are for d_model 16
    config["joint"]["jointnet"]["encoder_hidden"] = 32
    (wrong_shapes / "config.json").write_text(json.dumps(config))
    (wrong_shapes / "model.safetensors").write_bytes(data)
    with pytest.raises(ModelLoadError, match="could not load"):
        _load(str(wrong_shapes))

    missing_field = tmp_path / "missing-field"
    missing_field.mkdir()
    config = json.loads((tiny_dir / "config.json").read_text())
    del config["encoder"]["n_layers"]
    (missing_field / "config.json").write_text(json.dumps(config))
    (missing_field / "model.safetensors").write_bytes(data)
    with pytest.raises(ModelLoadError, match="could not load"):
        _load(str(missing_field))


def test_other_devices_are_refused_with_the_backend_to_choose():
    from s2s_desktop.engines.stt.parakeet_mlx import ParakeetMLXSTT

    with pytest.raises(DeviceUnavailable, match="faster-whisper"):
        ParakeetMLXSTT(STTSettings(model="x"), "cpu")


# ---------------------------------------------------------------- without the packages


HIDE = """
import sys
for name in sys.argv[1:]:
    sys.modules[name] = None  # import of any of these now raises ImportError
from s2s_desktop.config import STTSettings
from s2s_desktop.engines.stt.parakeet_mlx import ParakeetMLXSTT
from s2s_desktop.errors import BackendUnavailable
try:
    ParakeetMLXSTT(STTSettings(model="x"), "mlx").load()
except BackendUnavailable as exc:
    print(exc.package, exc.extra, exc)
"""


@pytest.mark.parametrize(
    "hidden,package",
    [(("mlx", "mlx.core", "mlx.nn", "parakeet_mlx"), "mlx"), (("parakeet_mlx",), "parakeet-mlx")],
)
def test_the_module_imports_without_mlx_and_names_the_extra(hidden, package):
    res = subprocess.run(
        [sys.executable, "-c", HIDE, *hidden], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    line = res.stdout.strip()
    assert line.startswith(f"{package} mlx "), line
    assert 'pip install "s2s-desktop[mlx]"' in line


def test_load_names_the_extra_when_parakeet_mlx_is_missing(monkeypatch):
    from s2s_desktop.engines.stt.parakeet_mlx import ParakeetMLXSTT

    monkeypatch.setitem(sys.modules, "parakeet_mlx", None)
    stt = ParakeetMLXSTT(STTSettings(model="x"), "mlx")
    if importlib.util.find_spec("mlx") is None:
        pytest.skip("mlx absent: the subprocess test covers this path")
    with pytest.raises(BackendUnavailable, match=r"'parakeet-mlx'.*s2s-desktop\[mlx\]"):
        stt.load()


def test_import_recognises_a_parakeet_folder(tmp_path):
    import json

    from s2s_desktop.models.importer import detect_model_kind

    target = "nemo.collections.asr.models.rnnt_bpe_models.EncDecRNNTBPEModel"
    (tmp_path / "config.json").write_text(json.dumps({"target": target}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert detect_model_kind(tmp_path) == ("stt", "parakeet-mlx")
