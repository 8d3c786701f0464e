"""Optional torch.compile (`llm.compile`, `tts.compile`): same tokens as eager, caches in the
user cache dir, and a compiler that fails leaves a working eager model with a warning.

One real inductor compile per session (a tiny random Llama on the CPU, ~30 s on two cores);
the failure paths replace torch.compile and cost nothing.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from s2s_desktop.config import LLMSettings, TTSSettings
from s2s_desktop.engines.base import LLMOptions
from s2s_desktop.engines.torch_compile import compile_mode

pytest.importorskip("transformers")

PROMPTS = ["What is the capital of France?", "My name is Anna. What is my name?"]


def reply_tokens(engine, prompt: str) -> list[str]:
    return list(engine.stream([{"role": "user", "content": prompt}], threading.Event(), LLMOptions.of(engine.settings)))


@pytest.fixture(scope="module")
def tiny_llm_folder(tmp_path_factory):
    import torch
    from transformers import AutoModelForCausalLM

    from tests.helpers.llm_models import build_tiny_llm

    folder = build_tiny_llm(tmp_path_factory.mktemp("compile"))
    # larger random weights, so greedy decoding says varied tokens instead of one repeated
    model = AutoModelForCausalLM.from_pretrained(folder)
    torch.manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(std=0.5)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def llm(folder: Path, compile_: bool):
    from s2s_desktop.engines.llm.transformers_llm import TransformersLLM

    settings = LLMSettings(
        backend="transformers",
        model=str(folder),
        model_file="",
        max_new_tokens=10,
        temperature=0.0,
        compile=compile_,
    )
    engine = TransformersLLM(settings, "cpu")
    engine.load()
    engine.warmup()
    return engine


@pytest.fixture(scope="module")
def eager_replies(tiny_llm_folder):
    engine = llm(tiny_llm_folder, False)
    assert engine.compiled is None and "compiled" not in engine.describe()
    replies = [reply_tokens(engine, p) for p in PROMPTS]
    assert len(set(replies[0])) > 1  # a real sequence to compare, not one token repeated
    return replies


@pytest.mark.slow
def test_compiled_llm_streams_the_same_greedy_tokens_and_caches_in_the_user_dir(
    tiny_llm_folder, eager_replies
):
    import torch

    user_cache = Path(os.environ["S2S_CACHE_DIR"])  # isolated by conftest
    suppress = torch._dynamo.config.suppress_errors
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        mp.delenv("TRITON_CACHE_DIR", raising=False)
        try:
            engine = llm(tiny_llm_folder, True)
            assert engine.compiled is True and engine.describe().endswith("(compiled)")
            assert [reply_tokens(engine, p) for p in PROMPTS] == eager_replies
            used = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
            assert used == user_cache / "torchinductor"
            assert any(f.is_file() for f in used.rglob("*"))  # inductor really wrote there
            assert Path(os.environ["TRITON_CACHE_DIR"]).is_relative_to(user_cache)
        finally:
            torch._dynamo.config.suppress_errors = suppress
            torch._dynamo.reset()


def test_compile_that_cannot_start_falls_back_to_eager(
    tiny_llm_folder, eager_replies, monkeypatch, caplog
):
    import torch

    def refuse(fn, **kw):
        raise RuntimeError("torch.compile is not supported on this Python")

    monkeypatch.setattr(torch, "compile", refuse)
    with caplog.at_level("WARNING"):
        engine = llm(tiny_llm_folder, True)
    assert engine.compiled is False and "torch.compile failed" in engine.describe()
    assert "running without compilation" in caplog.text and "not supported" in caplog.text
    assert [reply_tokens(engine, p) for p in PROMPTS] == eager_replies


def test_compile_failing_on_first_call_puts_the_eager_forward_back(
    tiny_llm_folder, eager_replies, monkeypatch, caplog
):
    import torch

    def lazy_failure(fn, **kw):  # torch.compile itself succeeds; the first call compiles
        def compiled(*args, **kwargs):
            raise RuntimeError("InductorError: CppCompileError: C++ compile error")

        return compiled

    monkeypatch.setattr(torch, "compile", lazy_failure)
    with caplog.at_level("WARNING"):
        engine = llm(tiny_llm_folder, True)
    assert engine.compiled is False
    assert "CppCompileError" in caplog.text
    assert "forward" not in engine.model.__dict__  # the class's own forward runs again
    assert [reply_tokens(engine, p) for p in PROMPTS] == eager_replies


def test_vits_compile_failure_still_speaks(tmp_path, monkeypatch, caplog):
    import numpy as np
    import torch

    from s2s_desktop.engines.tts.vits import VitsTTS
    from tests.helpers.tts_models import build_tiny_vits

    def refuse(fn, **kw):
        raise RuntimeError("no working C++ compiler found")

    monkeypatch.setattr(torch, "compile", refuse)
    folder = build_tiny_vits(tmp_path)
    engine = VitsTTS(TTSSettings(backend="vits", model=str(folder), compile=True), "cpu")
    engine.load()
    with caplog.at_level("WARNING"):
        engine.warmup()
    assert engine.compiled is False and "no working C++ compiler" in caplog.text
    audio = np.concatenate(list(engine.synthesize("hello there", None, 1.0)))
    assert audio.dtype == np.float32 and audio.size > 0


def test_compile_mode_uses_cuda_graphs_on_gpus_only():
    assert compile_mode("cuda") == compile_mode("cuda:1") == "reduce-overhead"
    assert compile_mode("cpu") is None
