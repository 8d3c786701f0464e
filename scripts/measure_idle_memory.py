"""Idle memory before and after `ui.unload_after_minutes` frees the models (docs/performance.md).

    python scripts/measure_idle_memory.py [--profile starter] [--runs 3]

Each run is a fresh process: the real pipeline loads, answers one typed question, and the
resident memory (VmRSS, Linux) is read idle; then the models are freed as the app does when
idle, and it is read again; then a second question loads them back, timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("VmRSS is not available here (Linux only)")


def one_run(profile: str) -> dict:
    from PySide6.QtCore import Qt

    from s2s_desktop import profiles
    from s2s_desktop.pipeline.runner import HeadlessSession

    settings = profiles.for_profile(profile)
    session = HeadlessSession(settings)
    unloaded = []
    session.pipeline.events.stage_state.connect(
        lambda stage, state, d: unloaded.append(stage) if state == "unloaded" else None,
        Qt.ConnectionType.DirectConnection)
    session.ask("What is the capital of Japan?")
    time.sleep(2.0)  # the LLM's between-turns work settles
    loaded = rss_mib()
    freed = session.pipeline.unload_models()
    while len(unloaded) < len(freed):
        time.sleep(0.05)
    time.sleep(1.0)
    idle = rss_mib()
    t0 = time.monotonic()
    rec = session.ask("What is the capital of France?")
    reload_s = time.monotonic() - t0
    session.close()
    return {"loaded_mib": round(loaded), "unloaded_mib": round(idle),
            "first_answer_after_s": round(reload_s, 1), "reply": rec["reply"]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="starter")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.profile)))
        return 0
    runs = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, __file__, "--one", "--profile", args.profile],
                             capture_output=True, text=True, check=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        print(runs[-1])
    for key in ("loaded_mib", "unloaded_mib", "first_answer_after_s"):
        values = [r[key] for r in runs]
        print(f"{key}: median {statistics.median(values)}, range {min(values)}-{max(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
