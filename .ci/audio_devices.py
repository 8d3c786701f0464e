"""The audio device layer on the real PortAudio of this machine (CI's Windows and macOS jobs):
lists the host APIs (and fails when one of `--need` is missing), then opens the default
microphone through the app's own Microphone: it must open, or refuse with the app's clear
message (a hosted runner may have no sound card). Where it opens, the time from open to the
first sample is measured as the app meets it: the run's first open (the app's warm-up at
start) and the opens after it (each press). `s2s-desktop devices --json` must say the same.
The result goes to the job summary."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def press_opens(mic, presses: int = 5) -> list[float | None]:
    """Open → first sample (ms) of each open after the first, as a press opens the microphone."""
    times = []
    for _ in range(presses):
        mic.open()
        deadline = time.monotonic() + 5.0
        while mic.open_to_first_sample_ms is None and time.monotonic() < deadline:
            time.sleep(0.005)
        took = mic.open_to_first_sample_ms
        times.append(None if took is None else round(took, 1))
        mic.close()
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--need", action="append", default=[], help="a host API that must be there")
    args = p.parse_args()
    import sounddevice as sd

    from s2s_desktop.audio.microphone import Microphone
    from s2s_desktop.errors import AudioDeviceError

    apis = [api["name"] for api in sd.query_hostapis()]
    lines = [f"PortAudio: {sd.get_portaudio_version()[1]}", f"host APIs: {', '.join(apis)}"]
    missing = [name for name in args.need if name not in apis]
    problems = []
    mic = Microphone()
    try:
        first = mic.warm_up(timeout_s=5.0)
        lines.append(f"microphone opened: {mic.label} at {mic.rate} Hz")
        presses = press_opens(mic)
        lines.append(f"open → first sample: first open {None if first is None else round(first, 1)} ms; presses after it: "
                     f"{', '.join(str(ms) for ms in presses)} ms")
        # an open stream that never calls back is a silent microphone: a press would hear nothing
        silent = ["first open"] * (first is None) + [
            f"press {i}" for i, ms in enumerate(presses, 1) if ms is None]
        if silent:
            problems.append(f"the microphone opened but delivered no sample within 5 s "
                            f"({', '.join(silent)})")
    except AudioDeviceError as exc:
        lines.append(f"no microphone, refused clearly: {exc}")
    finally:
        mic.close()
    proc = subprocess.run([sys.executable, "-m", "s2s_desktop", "devices", "--json"],
                          capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stdout) if proc.returncode == 0 else {}
    audio, why = report.get("audio"), report.get("audio_error", "")
    lines.append(f"`s2s-desktop devices --json`: {len(audio or [])} audio device(s)"
                 + (f", and why none: {why}" if why else ""))
    if missing:
        problems.append(f"host API(s) missing: {', '.join(missing)}")
    if proc.returncode != 0 or audio is None:
        problems.append(f"`devices --json` failed ({proc.returncode}): {proc.stderr[-2000:]}")
    elif not audio and not why:
        problems.append("`devices --json` lists no audio device and says nothing about why")
    lines += [f"FAILED: {p}" for p in problems]
    print("\n".join(lines))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as f:
            f.write("### Audio devices (real PortAudio)\n\n" + "\n".join(f"- {x}" for x in lines)
                    + "\n\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
