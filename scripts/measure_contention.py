"""LLM and TTS sharing a few CPU cores: tokens/s and TTS real-time factor, alone and together.

    python scripts/measure_contention.py [--profile starter] [--rounds 3] [--json]

While a reply plays, the LLM writes the next pieces as TTS speaks the earlier ones, so on a
2-core machine both run at once. This measures, for each thread layout in LAYOUTS, the LLM's
tokens/s and TTS's seconds of work per second of audio, each alone and both at once (LLM
streaming a reply in one thread while TTS speaks sentences in another), so a layout that
starves one of them shows. Medians over --rounds; the machine's load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from s2s_desktop import profiles  # noqa: E402
from s2s_desktop.engines import registry  # noqa: E402
from s2s_desktop.engines.base import LLMOptions  # noqa: E402

QUESTION = [{"role": "system", "content": "Answer in plain sentences."},
            {"role": "user", "content": "Tell me about the history of bicycles in Europe."}]
SENTENCES = ["The first bicycles appeared in Europe early in the nineteenth century.",
             "They had no pedals, and riders pushed them along with their feet.",
             "Pedals, chains and air-filled tyres came over the following decades."]
# (llm.threads, piper's onnxruntime threads): 0 = the engine's default. Piper's threads do
# not spin-wait (the engine sets that; spinning measured TTS 0.10 vs 0.09 s/s beside the LLM)
LAYOUTS = [(0, 0), (1, 0), (0, 1), (1, 1)]


def onnx_options(threads: int) -> None:
    """Piper's onnxruntime sessions get these options (the engine builds plain ones)."""
    import onnxruntime

    plain = getattr(onnxruntime, "_plain_session_options", onnxruntime.SessionOptions)
    onnxruntime._plain_session_options = plain

    def options():
        opts = plain()
        if threads:
            opts.intra_op_num_threads = threads
        return opts

    onnxruntime.SessionOptions = options


def llm_run(engine, tokens: int = 80) -> float:
    stop, count, first = threading.Event(), 0, None
    for delta in engine.stream(
        QUESTION, stop, replace(LLMOptions.of(engine.settings), max_new_tokens=tokens)
    ):
        if delta:
            count += 1
            first = first or time.monotonic()
    return (count - 1) / (time.monotonic() - first) if first and count > 1 else 0.0


def tts_run(engine) -> float:
    work = audio = 0.0
    for text in SENTENCES:
        started = time.monotonic()
        samples = sum(len(chunk) for chunk in engine.synthesize(text, None, 1.0))
        work += time.monotonic() - started
        audio += samples / engine.sample_rate
    return work / audio


def together(llm, tts) -> tuple[float, float]:
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("tts", tts_run(tts)))
    thread.start()
    out["llm"] = llm_run(llm)
    thread.join()
    return out["llm"], out["tts"]


def measure(profile: str, layout, rounds: int) -> dict:
    llm_threads, tts_threads = layout
    s = profiles.for_profile(profile)
    s.llm.threads = llm_threads
    onnx_options(tts_threads)
    llm = registry.create("llm", s.llm, "cpu")
    tts = registry.create("tts", s.tts, "cpu")
    llm.load(), tts.load(), llm.warmup(), tts.warmup()
    alone_llm = [llm_run(llm) for _ in range(rounds)]
    alone_tts = [tts_run(tts) for _ in range(rounds)]
    both = [together(llm, tts) for _ in range(rounds)]
    llm.unload(), tts.unload()
    return {
        "llm_threads": llm_threads or "default", "tts_threads": tts_threads or "default",
        "llm_tokens_per_s_alone": round(statistics.median(alone_llm), 1),
        "tts_rtf_alone": round(statistics.median(alone_tts), 3),
        "llm_tokens_per_s_with_tts": round(statistics.median(b[0] for b in both), 1),
        "tts_rtf_with_llm": round(statistics.median(b[1] for b in both), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="starter")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for layout in LAYOUTS:
        rows.append(measure(args.profile, layout, args.rounds))
        if not args.json:
            print(rows[-1], flush=True)
    result = {"load_average": os.getloadavg(), "cpus": os.cpu_count(), "layouts": rows}
    print(json.dumps(result, indent=1) if args.json else f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
