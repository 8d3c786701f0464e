"""Offline GPU check (`gpu_check.py --offline-synthetic ASSETS`): each engine on CUDA with
random weights at the auto profile's real sizes, on a machine that cannot download models.

Drives the engines directly (no Qt, no audio devices) with the app's own device choice
(`devices.resolve_device`) and CPU fallback (`devices.load_with_fallback`), times load,
warm-up, a 5 s clip, first token, tokens/s, a ~1000-token conversation and the first TTS
chunk, and estimates release-to-first-audio from them. Every check records its error instead
of stopping the run. Outputs are noise: the figures are compute time only.
"""

from __future__ import annotations

import json
import logging
import platform
import statistics
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import synthetic_models as sm

CLIP_S = 5.0
QUESTION_TOKENS = 20  # a ~5 s English question is ~15-20 Whisper tokens
FIRST_PIECE_TOKENS = 8  # the pipeline speaks the first clause once it is complete
QUESTION = "What is the capital of France?"
FIRST_PIECE = "Paris is the capital of France."
REPLY = (
    "Paris is the capital of France. It lies on the Seine, in the north of the country, "
    "and about two million people live in the city itself."
)
REPEATS = 3
NOT_RUN = [
    "real weights: every model is random at the real shape, so outputs are noise and the "
    "decode lengths are fixed by the token budgets, not by the text",
    "the Qt app and the pipeline's threads (live transcription while the key is held, the "
    "LLM pausing for the first audio, barge-in): engines are called one after another",
    "audio devices (microphone, playback): the clip is synthetic and no audio is played",
    "piper and kokoro on CUDA (onnxruntime-gpu and kokoro are not installable offline): "
    "VITS (the architecture piper voices use) stands in for the TTS",
]


def clip(seconds: float = CLIP_S) -> np.ndarray:
    """A speech-like test signal: a voiced tone with a syllable-rate envelope and some noise."""
    t = np.arange(int(seconds * 16000)) / 16000
    voiced = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)
    noise = np.random.default_rng(0).standard_normal(t.size) * 0.02
    return (0.2 * voiced * envelope + noise).astype(np.float32)


def conversation(turns: int = 8) -> list[dict]:
    """A system prompt and `turns` earlier exchanges (~1000 tokens), then a new question."""
    from s2s_desktop.config import LLMSettings

    facts = [
        "The Seine runs through Paris and into the English Channel near Le Havre.",
        "Mount Everest is the highest mountain above sea level, at about 8849 metres.",
        "Water boils at 100 degrees Celsius at sea level and at lower temperatures higher up.",
        "The Pacific is the largest ocean and covers about a third of the planet's surface.",
        "Honey bees communicate where flowers are with a waggle dance inside the hive.",
        "The speed of light in a vacuum is close to three hundred thousand kilometres a second.",
    ]
    messages = [{"role": "system", "content": LLMSettings().system_prompt}]
    for i in range(turns):
        asked = f"Tell me something interesting, number {i + 1}, in a few sentences."
        answer = " ".join(facts[(i + k) % len(facts)] for k in range(5))
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answer}]
    return messages + [{"role": "user", "content": QUESTION}]


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 4) if values else None


def spread(values: list[float]) -> dict:
    return {"median": median(values), "min": round(min(values), 4),
            "max": round(max(values), 4), "n": len(values)}


class Checks:
    """Runs named checks; each one's figures or error (with the traceback's end) go into the
    report, and a failing check never stops the next."""

    def __init__(self, path: Path | None, overrides: dict):
        self.overrides = overrides  # the user's settings, over each check's own
        self.path = path  # rewritten after every check: a crash still leaves the figures so far
        self.report: dict = {"complete": False, "checks": {}, "not_run": NOT_RUN}
        self.gpu_errors: list[str] = []  # the first errors behind CPU fallbacks, in full
        handler = logging.Handler()
        handler.emit = self._keep_fallback_error
        logging.getLogger("s2s_desktop.devices").addHandler(handler)

    def _keep_fallback_error(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            chain = []
            while exc is not None and len(chain) < 4:
                chain.append(f"{type(exc).__name__}: {exc}")
                exc = exc.__cause__ or exc.__context__
            self.gpu_errors.append(" <- ".join(chain))

    @contextmanager
    def check(self, name: str):
        entry: dict = {}
        self.report["checks"][name] = entry
        t0 = time.monotonic()
        print(f"== {name}", flush=True)
        try:
            yield entry
            entry["ok"] = True
        except Exception as exc:  # noqa: BLE001 - recorded; the next check still runs
            entry["ok"] = False
            entry["error"] = f"{type(exc).__name__}: {exc}"
            entry["traceback"] = traceback.format_exc().splitlines()[-8:]
            print(f"   failed: {entry['error']}", flush=True)
        finally:
            entry["check_s"] = round(time.monotonic() - t0, 2)
            _free_gpu()
            self.save()

    def save(self) -> str:
        text = json.dumps(self.report, indent=2, ensure_ascii=False, default=str)
        if self.path:
            self.path.write_text(text)
        return text


def _free_gpu() -> None:
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def gpu_peak_gib() -> float | None:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def load_engine(stage: str, overrides: dict, entry: dict, checks: Checks):
    """Resolve the stage's device as the app does and load it with the app's CPU fallback."""
    from s2s_desktop import devices
    from s2s_desktop.config import Settings, apply_overrides
    from s2s_desktop.engines import registry

    settings = apply_overrides(Settings(), {"device": "auto", **overrides, **checks.overrides})
    section = getattr(settings, stage)
    planned = devices.resolve_device(stage, settings)
    notices: list[str] = []
    errors_before = len(checks.gpu_errors)
    t0 = time.monotonic()
    engine = devices.load_with_fallback(
        lambda d: registry.create(stage, section, d), planned, notices.append, label=stage
    )
    entry.update(backend=section.backend, planned_device=planned, ran_on=engine.device,
                 load_and_warmup_s=round(time.monotonic() - t0, 3), notices=notices,
                 fallback_errors=checks.gpu_errors[errors_before:], engine=engine.describe())
    return engine


# ---------------------------------------------------------------- stages


def repeat(call) -> tuple[list[float], object]:
    """Seconds of each of REPEATS calls, and the last call's result."""
    seconds, result = [], None
    for _ in range(REPEATS):
        t0 = time.monotonic()
        result = call()
        seconds.append(time.monotonic() - t0)
    return seconds, result


def check_stt(engine, entry: dict, module) -> None:
    """The clip with the full token budget (a random model never ends early: the worst case of
    a hallucination loop) and with a question's length of tokens (the estimate's figure)."""
    from s2s_desktop.engines.base import STTOptions

    audio = clip()
    full, result = repeat(lambda: engine.transcribe(audio, None, STTOptions.of(engine.settings)))
    entry["clip_s"] = CLIP_S
    entry["full_budget_tokens"] = module.token_budget(audio.size)
    entry["transcribe_full_budget_s"] = spread(full)
    entry["text_sample"] = result.text[:60]
    budget = module.token_budget
    module.token_budget = lambda n: QUESTION_TOKENS
    try:
        capped, _ = repeat(lambda: engine.transcribe(audio, None, STTOptions.of(engine.settings)))
    finally:
        module.token_budget = budget
    entry["question_tokens"] = QUESTION_TOKENS
    entry["transcribe_question_s"] = spread(capped)
    entry["gpu_peak_gib"] = gpu_peak_gib()


def stream_once(engine, messages: list[dict], max_new: int) -> dict:
    from dataclasses import replace

    from s2s_desktop.engines.base import LLMOptions

    t0 = time.monotonic()
    first = None
    for _ in engine.stream(messages, threading.Event(),
                           replace(LLMOptions.of(engine.settings), max_new_tokens=max_new)):
        first = first if first is not None else time.monotonic() - t0
    total = time.monotonic() - t0
    stats = dict(engine.last_stats)
    tokens = max_new if stats.get("finish") == "length" else stats.get("tokens") or 0
    rate = (tokens - 1) / (total - first) if first is not None and tokens > 1 else None
    return {"first_token_s": first, "total_s": total, "tokens": tokens, "tokens_per_s": rate,
            "finish": stats.get("finish")}


def prompt_tokens(engine, messages: list[dict]) -> int | None:
    try:
        if getattr(engine, "llm", None) is not None:  # llama.cpp: the GGUF's own template
            from jinja2 import Template

            template = Template(engine.llm.metadata["tokenizer.chat_template"])
            rendered = template.render(messages=messages, add_generation_prompt=True)
            return len(engine.llm.tokenize(rendered.encode(), add_bos=False, special=True))
        ids = engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)
    except Exception:  # noqa: BLE001 - a count only
        return None


def check_llm(engine, entry: dict, reset=None) -> None:
    """Short question: first token and tokens/s. ~1000-token conversation: prompt evaluation
    from scratch, and (llama.cpp) again with the conversation's prefix already in the cache."""
    from s2s_desktop.config import LLMSettings

    short = [{"role": "system", "content": LLMSettings().system_prompt},
             {"role": "user", "content": QUESTION}]
    runs = []
    for _ in range(REPEATS):
        if reset:
            reset()  # each run evaluates the prompt itself, as a first turn does
        runs.append(stream_once(engine, short, 64))
    entry["short_prompt_tokens"] = prompt_tokens(engine, short)
    entry["first_token_s"] = spread([r["first_token_s"] for r in runs])
    entry["tokens_per_s"] = spread([r["tokens_per_s"] for r in runs])
    entry["finish"] = runs[-1]["finish"]
    talk = conversation()
    entry["conversation_prompt_tokens"] = prompt_tokens(engine, talk)
    cold = []
    for _ in range(2):
        if reset:
            reset()
        cold.append(stream_once(engine, talk, 8)["first_token_s"])
    entry["conversation_first_token_cold_s"] = spread(cold)
    if reset:  # the next turn: same history + the reply + a new question, prefix cached
        warm = []
        for i in range(2):
            reset()
            stream_once(engine, talk, 1)
            follow = talk + [{"role": "assistant", "content": FIRST_PIECE},
                             {"role": "user", "content": f"And its population, {i}?"}]
            warm.append(stream_once(engine, follow, 8)["first_token_s"])
        entry["conversation_next_turn_first_token_s"] = spread(warm)
    entry["gpu_peak_gib"] = gpu_peak_gib()


def check_tts(engine, entry: dict) -> None:
    first, totals, seconds = [], [], 0.0
    for _ in range(REPEATS):
        t0 = time.monotonic()
        for _chunk in engine.synthesize(FIRST_PIECE, None, 1.0):
            first.append(time.monotonic() - t0)
            break  # the first chunk is what the listener waits for
        t0 = time.monotonic()
        pcm = np.concatenate(list(engine.synthesize(REPLY, None, 1.0)))
        totals.append(time.monotonic() - t0)
        seconds = pcm.size / engine.sample_rate
    entry["first_piece"] = FIRST_PIECE
    entry["first_chunk_s"] = spread(first)
    entry["reply_synthesis_s"] = spread(totals)
    entry["reply_audio_s"] = round(seconds, 2)
    entry["real_time_factor"] = round(median(totals) / seconds, 4) if seconds else None
    entry["gpu_peak_gib"] = gpu_peak_gib()


def check_vad(engine, entry: dict) -> None:
    from s2s_desktop.engines.base import VADOptions

    audio = clip()
    times, segments = repeat(lambda: engine.speech(audio, VADOptions.of(engine.settings)))
    entry["speech_regions"] = len(segments)
    entry["clip_s"] = CLIP_S
    entry["speech_s"] = spread(times)


def first_piece_s(llm: dict) -> float | None:
    """LLM time to its first speakable piece: first token, then FIRST_PIECE_TOKENS - 1 more."""
    first, rate = llm.get("first_token_s", {}).get("median"), llm.get("tokens_per_s", {})
    if first is None or not rate.get("median"):
        return None
    return first + (FIRST_PIECE_TOKENS - 1) / rate["median"]


def r2a(stt: dict, llm: dict, tts: dict, label: str) -> dict:
    parts = {
        "stt_question_s": (stt.get("transcribe_question_s") or {}).get("median"),
        "llm_first_piece_s": first_piece_s(llm),
        "tts_first_chunk_s": (tts.get("first_chunk_s") or {}).get("median"),
    }
    total = None if None in parts.values() else round(sum(parts.values()), 3)
    return {"stack": label, "stt_on": stt.get("ran_on"), "llm_on": llm.get("ran_on"),
            "tts_on": tts.get("ran_on"), **{k: v and round(v, 4) for k, v in parts.items()},
            "release_to_first_audio_s": total}


# ---------------------------------------------------------------- llama.cpp build and model


def wait_for_llama(src: Path, limit_s: float) -> str:
    """'done' once the background build installed the library, else why not."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if (src / "BUILD_OK").exists():
            sys.path.insert(0, str(src))
            return "done"
        if (src / "BUILD_FAILED").exists():
            return "failed: " + (src / "BUILD_FAILED").read_text()[-600:]
        time.sleep(2)
    return f"not finished after waiting {limit_s:.0f} s"


def quantize(f16: Path, out: Path, kind: str = "Q4_K_M") -> Path:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{kind}")
    params.nthread = 0
    if llama_cpp.llama_model_quantize(str(f16).encode(), str(out).encode(), params) != 0:
        raise RuntimeError(f"llama_model_quantize to {kind} failed")
    return out


# ---------------------------------------------------------------- the run


def run(assets: Path, work: Path, llama_src: Path | None, tiny: bool, llama_wait_s: float,
        report_path: Path | None, overrides: dict | None = None) -> int:
    """`overrides` (gpu_check's --set) go to every engine, e.g. llm.compile=true."""
    import torch

    from s2s_desktop import devices
    from s2s_desktop.engines.stt import faster_whisper as fw_mod
    from s2s_desktop.engines.stt import transformers_whisper as tw_mod

    _stand_in_for_av()
    checks = Checks(report_path, overrides or {})
    rep = checks.report
    rep["overrides"] = overrides or {}
    work.mkdir(parents=True, exist_ok=True)
    gpu = "cuda" if torch.cuda.is_available() else "cpu"
    llm_dims = sm.TINY_LLM if tiny else sm.LLMDims()
    whisper_dims = sm.TINY_WHISPER if tiny else sm.WhisperDims()
    plat = devices.detect_platform()
    rep["platform"] = {"python": platform.python_version(), "torch": torch.__version__,
                       "cuda": torch.version.cuda, "detected": plat.__dict__,
                       "compute": devices.compute_devices(plat), "sizes": "tiny" if tiny else
                       {"llm": llm_dims.__dict__, "whisper": whisper_dims.__dict__,
                        "tts": "VitsConfig defaults (MMS-TTS shape)"}}
    paths: dict[str, Path] = {}
    with checks.check("build_models") as e:
        t0 = time.monotonic()
        paths["whisper_hf"], paths["whisper_ct2"] = sm.build_whisper(
            assets, work / "whisper", whisper_dims, ct2=_has("ctranslate2"))
        e["whisper_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        paths["llm_hf"] = sm.build_transformers_llm(assets, work / "llm-hf", llm_dims, gpu)
        e["llm_hf_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        paths["vits"] = sm.build_vits(work / "vits", tiny=tiny)
        e["vits_s"] = round(time.monotonic() - t0, 1)
    with checks.check("build_gguf_f16") as e:
        t0 = time.monotonic()
        gguf_py = llama_src / "vendor" / "llama.cpp" / "gguf-py" if llama_src else None
        if gguf_py and gguf_py.is_dir():
            sys.path.insert(0, str(gguf_py))
        paths["gguf_f16"] = sm.write_gguf(assets, work / "llm-f16.gguf", llm_dims, gpu)
        e["seconds"] = round(time.monotonic() - t0, 1)
        e["gib"] = round(paths["gguf_f16"].stat().st_size / 2**30, 2)

    c = rep["checks"]
    with checks.check("stt_transformers") as e:
        engine = load_engine("stt", {"stt.backend": "transformers",
                                     "stt.model": str(paths["whisper_hf"])}, e, checks)
        check_stt(engine, e, tw_mod)
        engine.unload()
    with checks.check("llm_transformers") as e:
        engine = load_engine("llm", {"llm.backend": "transformers",
                                     "llm.model": str(paths["llm_hf"]), "llm.model_file": "",
                                     "llm.context_tokens": 4096}, e, checks)
        check_llm(engine, e)
        engine.unload()
        del engine
    with checks.check("tts_vits") as e:
        engine = load_engine("tts", {"tts.backend": "vits", "tts.model": str(paths["vits"])},
                             e, checks)
        check_tts(engine, e)
        engine.unload()
    with checks.check("vad_silero_onnx") as e:  # real weights (faster-whisper's), on CPU
        engine = load_engine("vad", {"vad.backend": "silero-onnx"}, e, checks)
        check_vad(engine, e)

    with checks.check("llama_cpp_build") as e:
        if llama_src is None:
            raise RuntimeError("no --llama-src given: llama.cpp was not built here")
        t0 = time.monotonic()
        e["status"] = wait_for_llama(llama_src, llama_wait_s)
        e["waited_s"] = round(time.monotonic() - t0, 1)
        log = llama_src / "build_s.txt"
        e["build_s"] = log.read_text().strip() if log.exists() else None
        if e["status"] != "done":
            raise RuntimeError(e["status"])
        import llama_cpp

        e["version"] = llama_cpp.__version__
        e["gpu_offload"] = bool(llama_cpp.llama_supports_gpu_offload())
    if c["llama_cpp_build"]["ok"]:
        with checks.check("llm_llama_cpp") as e:
            t0 = time.monotonic()
            try:
                model = quantize(paths["gguf_f16"], work / "llm-q4_k_m.gguf")
                e["weights"] = "Q4_K_M (quantised here from the random F16)"
            except Exception as exc:  # noqa: BLE001 - F16 still measures the engine
                model, e["weights"] = paths["gguf_f16"], f"F16 (quantising failed: {exc})"
            e["quantize_s"] = round(time.monotonic() - t0, 1)
            engine = load_engine("llm", {"llm.backend": "llama-cpp", "llm.model": str(model),
                                         "llm.model_file": "", "llm.context_tokens": 4096},
                                 e, checks)
            check_llm(engine, e, reset=engine.llm.reset)
            engine.unload()
            engine.llm = None

    # faster-whisper last: after the build (its CPU fallback's timing has the cores to itself),
    # and a CUDA library crash inside CTranslate2 would lose no other figure
    with checks.check("stt_faster_whisper") as e:
        if paths.get("whisper_ct2") is None:
            raise RuntimeError("ctranslate2 is not installed: no CTranslate2 model was built")
        import ctranslate2

        e["ctranslate2"] = ctranslate2.__version__
        e["ctranslate2_cuda_devices"] = ctranslate2.get_cuda_device_count()
        try:
            e["ctranslate2_cuda_compute_types"] = sorted(
                ctranslate2.get_supported_compute_types("cuda"))
        except Exception as exc:  # noqa: BLE001 - reported
            e["ctranslate2_cuda_compute_types"] = f"{type(exc).__name__}: {exc}"
        engine = load_engine("stt", {"stt.backend": "faster-whisper",
                                     "stt.model": str(paths["whisper_ct2"])}, e, checks)
        e["compute_type"] = engine.compute_type
        check_stt(engine, e, fw_mod)
        engine.unload()
    rep["release_to_first_audio_estimate"] = {
        "what": "in-process compute estimate with random weights at real sizes: STT of a 5 s "
                f"question ({QUESTION_TOKENS} tokens) + LLM to its first {FIRST_PIECE_TOKENS} "
                "tokens + TTS of the first piece; no audio I/O, no pipeline threads, no live "
                "transcription while the key is held (the app's STT after release is shorter)",
        "stacks": [
            r2a(c.get("stt_transformers", {}), c.get("llm_transformers", {}),
                c.get("tts_vits", {}), "torch: transformers Whisper + transformers LLM + VITS"),
            r2a(c.get("stt_faster_whisper", {}), c.get("llm_llama_cpp", {}),
                c.get("tts_vits", {}),
                "auto profile: faster-whisper + llama.cpp + VITS (standing in for piper)"),
        ],
    }
    rep["complete"] = True
    print(checks.save())
    return 0 if all(v.get("ok") for v in c.values()) else 1


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _stand_in_for_av() -> None:
    """faster-whisper imports PyAV at its top only to decode files; the app hands it arrays.
    Use the installers' stand-in when PyAV is absent (as the bundled app does)."""
    if _has("av"):
        return
    import importlib.util

    import s2s_desktop

    hook = Path(s2s_desktop.__file__).resolve().parents[1] / "packaging/rthooks/standins.py"
    spec = importlib.util.spec_from_file_location("s2s_standins", hook)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
