"""Qwen3-TTS backend (`qwen-tts` on PyTorch) on a tiny random model built here.

The tiny model is real Qwen3-TTS code end to end — talker, code predictor and the 12 Hz
speech-tokenizer decoder, saved as safetensors with a locally trained Qwen2 tokenizer — so its
audio is noise: these tests check loading, streaming, stopping and errors, not meaning.
qwen-tts 0.1.1 imports only with transformers 4.57.x (and a torchaudio matching torch); where
it cannot import, the tiny-model tests skip with the reason and the rest still run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from s2s_desktop.config import TTSSettings
from s2s_desktop.engines.tts.qwen3_tts import (
    FRAMES_BASE,
    FRAMES_PER_CHAR,
    Qwen3TTS,
    check_folder,
    import_qwen_tts,
    language_name,
)
from s2s_desktop.errors import (
    BackendUnavailable,
    ModelLoadError,
    ModelNotFound,
    SettingsError,
    UnsafeModelFormat,
)

pytestmark = pytest.mark.optional("qwen-tts")

CODEBOOK, GROUPS = 64, 4  # codes per codebook, codebooks per 80 ms frame
SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|tts_pad|>",
    "<|tts_bos|>",
    "<|tts_eos|>",
]


def build_tiny_qwen3_tts(out: Path, kind: str = "custom_voice", max_frames: int = 48) -> Path:
    """A random Qwen3-TTS model folder in the Hub layout (all safetensors), built locally."""
    import torch
    from qwen_tts.core import Qwen3TTSTokenizerV2Config, Qwen3TTSTokenizerV2Model
    from qwen_tts.core.models import (
        Qwen3TTSConfig,
        Qwen3TTSForConditionalGeneration,
        Qwen3TTSProcessor,
    )
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import EncodecFeatureExtractor, Qwen2TokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(["Hello there. How are you today?", "Paris is in France."] * 5, trainer)
    bpe.add_tokens(["assistant"])  # the prompt layout needs "<|im_start|>assistant\n" = 3 ids
    tokenizer = Qwen2TokenizerFast(
        tokenizer_object=bpe,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    small = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
    )
    talker = dict(
        small,
        vocab_size=CODEBOOK + 1024,  # the top 1024 ids are control codes, never sampled
        rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3], "interleaved": True},
        num_code_groups=GROUPS,
        text_hidden_size=32,
        text_vocab_size=len(tokenizer),
        codec_pad_id=CODEBOOK,
        codec_bos_id=CODEBOOK + 1,
        codec_eos_token_id=CODEBOOK + 2,
        codec_think_id=CODEBOOK + 6,
        codec_nothink_id=CODEBOOK + 7,
        codec_think_bos_id=CODEBOOK + 8,
        codec_think_eos_id=CODEBOOK + 9,
        spk_id={"ryan": CODEBOOK + 100, "serena": CODEBOOK + 101},
        spk_is_dialect={"ryan": False, "serena": False},
        codec_language_id={"english": CODEBOOK + 50, "french": CODEBOOK + 51},
        code_predictor_config=dict(small, vocab_size=CODEBOOK, num_code_groups=GROUPS),
    )
    config = Qwen3TTSConfig(
        talker_config=talker,
        tokenizer_type="qwen3_tts_tokenizer_12hz",
        tts_model_size="0b6",
        tts_model_type=kind,
        im_start_token_id=ids["<|im_start|>"],
        im_end_token_id=ids["<|im_end|>"],
        tts_pad_token_id=ids["<|tts_pad|>"],
        tts_bos_token_id=ids["<|tts_bos|>"],
        tts_eos_token_id=ids["<|tts_eos|>"],
    )
    torch.manual_seed(0)
    Qwen3TTSForConditionalGeneration(config).save_pretrained(out, safe_serialization=True)
    saved = json.loads((out / "config.json").read_text())
    saved["speaker_encoder_config"].pop("model_type", None)  # its class takes no extra keys
    (out / "config.json").write_text(json.dumps(saved))
    Qwen3TTSProcessor(tokenizer=tokenizer).save_pretrained(out)
    (out / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "top_k": 50, "max_new_tokens": max_frames})
    )

    codec = Qwen3TTSTokenizerV2Config(
        # the encoder (for voice cloning) is built but never run here
        encoder_config=dict(
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=8,
            intermediate_size=32,
            num_filters=4,
            codebook_size=CODEBOOK,
            codebook_dim=16,
            num_quantizers=GROUPS,
            upsample_groups=16,
        ),
        decoder_config=dict(
            codebook_size=CODEBOOK,
            codebook_dim=16,
            hidden_size=16,
            latent_dim=16,
            num_attention_heads=2,
            num_key_value_heads=2,
            intermediate_size=32,
            num_hidden_layers=1,
            num_quantizers=GROUPS,
            decoder_dim=32,
        ),
        encoder_valid_num_quantizers=GROUPS,
    )
    decoder = Qwen3TTSTokenizerV2Model(codec)
    with torch.no_grad():  # codebooks start at zero and the vocoder near silence: wake them
        for name, p in decoder.named_parameters():
            if "embedding_sum" in name or name.startswith("decoder.decoder"):
                p.normal_(std=0.3)
    decoder.save_pretrained(out / "speech_tokenizer", safe_serialization=True)
    EncodecFeatureExtractor(feature_size=1, sampling_rate=24000).save_pretrained(
        out / "speech_tokenizer"
    )
    return out


def qwen_tts_or_skip():
    try:
        import_qwen_tts()
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    qwen_tts_or_skip()
    return build_tiny_qwen3_tts(tmp_path_factory.mktemp("qwen3tts") / "tiny-custom")


@pytest.fixture(scope="module")
def tiny(tiny_folder):
    engine = Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(tiny_folder)), "cpu")
    engine.load()
    engine.warmup()
    yield engine
    engine.unload()


def fake_folder(root: Path, config: dict | str, weights: str = "model.safetensors") -> Path:
    """A folder with the right file names but placeholder contents (checks run before load)."""
    root.mkdir(parents=True, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (root / "config.json").write_text(text)
    (root / weights).write_bytes(b"placeholder")
    (root / "speech_tokenizer").mkdir(exist_ok=True)
    (root / "speech_tokenizer" / "config.json").write_text("{}")
    (root / "speech_tokenizer" / "model.safetensors").write_bytes(b"placeholder")
    return root


# ---------------------------------------------------------------- without the package


def test_module_imports_cleanly_without_qwen_tts_or_torch():
    code = (
        "import sys; sys.modules['qwen_tts'] = None; sys.modules['torch'] = None\n"
        "from s2s_desktop.engines import registry\n"
        "print(registry.engine_class('tts', 'qwen3-tts').__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Qwen3TTS"]


def test_missing_qwen_tts_names_the_package(tmp_path, monkeypatch):
    folder = fake_folder(tmp_path / "m", {"model_type": "qwen3_tts"})
    monkeypatch.setitem(sys.modules, "qwen_tts", None)
    with pytest.raises(BackendUnavailable, match="pip install qwen-tts") as caught:
        Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(folder)), "cpu").load()
    assert caught.value.package == "qwen-tts"


def test_a_qwen_tts_that_fails_to_import_says_which_versions_it_needs(tmp_path, monkeypatch):
    # what qwen-tts 0.1.1 really does under transformers 5: a TypeError while importing
    broken = tmp_path / "site" / "qwen_tts"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise TypeError("check_model_inputs() missing 1 required positional argument")\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "qwen_tts" or m.startswith("qwen_tts.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(BackendUnavailable, match="transformers 4.57") as caught:
        import_qwen_tts()
    assert "check_model_inputs" in str(caught.value)


def test_missing_and_corrupt_folders_are_refused_clearly(tmp_path):
    def load(path):
        Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(path)), "cpu").load()

    with pytest.raises(ModelNotFound, match="not found"):
        load(tmp_path / "nowhere")
    with pytest.raises(ModelNotFound, match="no tts model is set"):
        load("")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="not a Qwen3-TTS model folder"):
        load(tmp_path / "empty")
    with pytest.raises(ModelLoadError, match="unreadable"):
        load(fake_folder(tmp_path / "badjson", "{not json"))
    with pytest.raises(ModelLoadError, match="'vits' model, not Qwen3-TTS"):
        load(fake_folder(tmp_path / "vits", {"model_type": "vits"}))
    with pytest.raises(UnsafeModelFormat, match="pickle"):
        load(fake_folder(tmp_path / "pickle", {"model_type": "qwen3_tts"}, "pytorch_model.bin"))
    nocodec = fake_folder(tmp_path / "nocodec", {"model_type": "qwen3_tts"})
    (nocodec / "speech_tokenizer" / "config.json").unlink()
    with pytest.raises(ModelLoadError, match="no speech_tokenizer"):
        load(nocodec)
    base = {"model_type": "qwen3_tts", "tts_model_type": "base"}
    with pytest.raises(ModelLoadError, match="voice-clone Base model"):
        check_folder(fake_folder(tmp_path / "base", base))


def test_languages_map_from_codes_and_names():
    supported = ["auto", "english", "french"]
    assert language_name("", supported) == "auto"
    assert language_name("en", supported) == "english"
    assert language_name("fr-FR", supported) == "french"
    assert language_name("English", supported) == "english"
    with pytest.raises(SettingsError, match="no language 'ja'.*auto, english, french"):
        language_name("ja", supported)


# ---------------------------------------------------------------- on the tiny model


def test_tiny_model_speaks_in_24khz_float_chunks(tiny):
    assert tiny.sample_rate == 24000
    assert tiny.tts.model.dtype.is_floating_point and str(tiny.tts.model.dtype) == "torch.float32"
    assert "ryan" in tiny.describe()  # the English voice is the default
    chunks = list(tiny.synthesize("Hello there. How are you today?", None, 1.0))
    assert len(chunks) == 2  # one per sentence, the first ready before the second is made
    for chunk in chunks:
        assert chunk.dtype == np.float32 and chunk.ndim == 1
        assert chunk.size % 1920 == 0 and chunk.size >= 1920  # whole 80 ms codec frames
        assert np.abs(chunk).max() <= 1.0 and float(np.sqrt(np.mean(chunk**2))) > 1e-3


def test_stop_between_sentences(tiny):
    stop = threading.Event()
    got = []
    for chunk in tiny.synthesize("Hello there. How are you? Paris is in France.", stop, 1.0):
        got.append(chunk)
        stop.set()
    assert len(got) == 1


def test_stop_inside_a_sentence_ends_at_the_next_frame(tiny):
    import torch

    stop = threading.Event()
    frames = []
    text = "Hello there, how are you today, my friend?"

    def count(module, args):
        frames.append(1)
        if len(frames) == 3:
            stop.set()  # as if the user pressed the key again mid-sentence

    counter = tiny.tts.model.talker.register_forward_pre_hook(count)
    limit = tiny.tts.generate_defaults["max_new_tokens"]
    tiny.tts.generate_defaults["max_new_tokens"] = 400
    try:
        torch.manual_seed(1)
        got = list(tiny.synthesize(text, stop, 1.0))
    finally:
        counter.remove()
        tiny.tts.generate_defaults["max_new_tokens"] = limit
    assert got == []
    assert len(frames) == 3  # the hook refused the fourth frame before it ran
    assert FRAMES_BASE + FRAMES_PER_CHAR * len(text) > 100  # it could have run on and on


def test_voice_and_language_settings(tiny_folder):
    def engine(**kw):
        e = Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(tiny_folder), **kw), "cpu")
        e.load()
        return e

    french = engine(voice="Serena", language="fr")
    assert french._speaker == "serena" and french._language == "french"
    assert list(french.synthesize("Bonjour.", None, 1.0))
    with pytest.raises(SettingsError, match="no speaker 'nobody'; choose one of"):
        engine(voice="nobody")
    with pytest.raises(SettingsError, match="no language 'ja'"):
        engine(language="ja")


def test_voice_design_model_takes_the_voice_as_a_description(tmp_path):
    qwen_tts_or_skip()
    folder = build_tiny_qwen3_tts(tmp_path / "design", kind="voice_design")
    e = Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(folder), voice="A low voice."), "cpu")
    e.load()
    assert e._design == "A low voice." and "designed voice" in e.describe()
    assert list(e.synthesize("Hello.", None, 1.0))


def test_truncated_weights_are_a_load_error(tmp_path, tiny_folder):
    import shutil

    copy = shutil.copytree(tiny_folder, tmp_path / "truncated")
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ModelLoadError, match="could not be loaded.*download it again"):
        Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(copy)), "cpu").load()


def test_missing_cuda_is_device_unavailable(tiny_folder):
    import torch

    from s2s_desktop.errors import DeviceUnavailable

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(DeviceUnavailable, match="no CUDA GPU.*tts.device=cpu"):
        Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(tiny_folder)), "cuda").load()


def test_compile_failure_keeps_the_eager_model(tiny_folder, monkeypatch, caplog):
    import torch

    def broken(fn, **kw):
        raise RuntimeError("no working C++ compiler found")

    monkeypatch.setattr(torch, "compile", broken)
    e = Qwen3TTS(TTSSettings(backend="qwen3-tts", model=str(tiny_folder), compile=True), "cpu")
    e.load()
    with caplog.at_level("WARNING"):
        e.warmup()
    assert e.compiled is False and "torch.compile failed" in e.describe()
    assert "no working C++ compiler" in caplog.text
    assert "forward" not in e.tts.model.talker.model.__dict__  # the eager forward is back
    assert list(e.synthesize("Hello.", None, 1.0))
