"""Idle cost of the running app: start plain `s2s-desktop` (starter set, fresh user folders) on
a private Xvfb screen and PulseAudio server, wait until it is ready, then sample its CPU time
and memory (psutil, the app process and its children) for --seconds while nobody talks.

    python scripts/measure_idle.py --seconds 60 [--keep-mic-open]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.desktop_env import pulseaudio, xvfb  # noqa: E402


def wait_ready(env: dict, proc, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited ({proc.returncode})")
        res = subprocess.run(
            [sys.executable, "-m", "s2s_desktop", "status", "--json"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if res.returncode == 0:
            status = json.loads(res.stdout)
            if status["state"] in ("idle", "error") and all(status["models"].values()):
                return status
        time.sleep(1.0)
    raise SystemExit("the app did not become ready")


def cpu_seconds(procs) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to sample (default 60)")
    ap.add_argument("--keep-mic-open", action="store_true", help="audio.keep_mic_open=true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="s2s-idle-"))
    with xvfb() as display, pulseaudio(root / "pulse") as pulse_env:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("S2S_", "XDG_"))}
        env.update(
            pulse_env, DISPLAY=display, QT_QPA_PLATFORM="xcb", HF_HUB_OFFLINE="1",
            XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "data"),
            XDG_CACHE_HOME=str(root / "cache"), XDG_STATE_HOME=str(root / "state"),
            PULSE_SOURCE="micsrc.monitor", PULSE_SINK="spk",
        )  # fmt: skip
        cmd = [sys.executable, "-m", "s2s_desktop"]
        if args.keep_mic_open:
            cmd += ["--set", "audio.keep_mic_open=true"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(env, proc)
            time.sleep(5.0)  # loading's last work (warm-up threads) settles
            app = psutil.Process(proc.pid)
            procs = [app, *app.children(recursive=True)]
            start_cpu, start = cpu_seconds(procs), time.monotonic()
            rss = []
            while time.monotonic() - start < args.seconds:
                time.sleep(1.0)
                rss.append(sum(p.memory_info().rss for p in procs if p.is_running()))
            used = cpu_seconds(procs) - start_cpu
            wall = time.monotonic() - start
            print(
                f"idle over {wall:.0f} s ({len(procs)} processes: the app + hotkey helper): "
                f"CPU {100 * used / wall:.2f} % of one core ({used:.2f} s), "
                f"memory RSS median {statistics.median(rss) / 2**20:.0f} MiB "
                f"(range {min(rss) / 2**20:.0f}-{max(rss) / 2**20:.0f})"
            )
        finally:
            subprocess.run([sys.executable, "-m", "s2s_desktop", "quit"], env=env,
                           capture_output=True, timeout=30)  # fmt: skip
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
