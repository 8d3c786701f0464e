"""GPU check: on a machine with an NVIDIA GPU, run three spoken turns through the real pipeline
with the `auto` profile and print where each stage ran and how long each step took, as JSON.

    python scripts/gpu_check.py                      # auto profile, models from the HF cache
    python scripts/gpu_check.py --profile starter --set device=auto   # offline starter models
    python scripts/gpu_check.py --input q1.wav --input q2.wav         # your own recordings
    python scripts/gpu_check.py --offline-synthetic ASSETS --work DIR  # no model hub: engines
        # on CUDA with random weights at real sizes (scripts/gpu_synthetic.py says how)

Questions are spoken by espeak-ng when it is installed, else by the profile's own TTS (on the
CPU). Exits with status 2 and a one-line reason when no CUDA device is present (unless
--allow-no-cuda, for trying the script itself on a CPU machine). Takes well under five
minutes once the profile's models are downloaded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

QUESTIONS = [
    "What is the capital of France?",
    "Name one planet in our solar system.",
    "How many days are in a week?",
]


def speak_questions(settings, folder: Path) -> list[Path]:
    """WAV files of QUESTIONS: espeak-ng if present, else the configured TTS engine on CPU."""
    paths = [folder / f"question-{i + 1}.wav" for i in range(len(QUESTIONS))]
    if shutil.which("espeak-ng"):
        for text, path in zip(QUESTIONS, paths, strict=True):
            subprocess.run(
                ["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(path), text],
                check=True,
                capture_output=True,
            )
        return paths
    import numpy as np

    from s2s_desktop.audio.files import write_wav
    from s2s_desktop.engines import registry

    tts = registry.create("tts", settings.tts, "cpu")
    tts.load()
    for text, path in zip(QUESTIONS, paths, strict=True):
        pcm = np.concatenate(list(tts.synthesize(text, None, 1.0)))
        write_wav(path, pcm, tts.sample_rate)
    tts.unload()
    return paths


def summarize(turns: list[dict]) -> dict:
    """Median of each timing over the turns (the first turn included: warm-up is at load)."""
    names = sorted({k for t in turns for k, v in t["timings_ms"].items() if v is not None})
    out = {}
    for name in names:
        values = [t["timings_ms"][name] for t in turns if t["timings_ms"].get(name) is not None]
        out[name] = {"median": round(statistics.median(values), 1), "max": max(values)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="auto")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--input", "-i", action="append", default=[], help="question WAV files")
    ap.add_argument("--output-dir", default=None, help="keep the reply WAVs here")
    ap.add_argument("--allow-no-cuda", action="store_true", help="run even without CUDA")
    synth = ap.add_argument_group("offline synthetic mode (no downloads)")
    synth.add_argument("--offline-synthetic", metavar="ASSETS", type=Path, default=None,
                       help="time each engine with random weights at the auto profile's sizes; "
                       "ASSETS from `scripts/synthetic_models.py export-tokenizers`")
    synth.add_argument("--work", type=Path, default=Path("gpu-check-models"),
                       help="where the synthetic models are written (several GB)")
    synth.add_argument("--llama-src", type=Path, default=None,
                       help="llama-cpp-python source tree being built (BUILD_OK when done)")
    synth.add_argument("--llama-wait", type=float, default=300.0, metavar="SECONDS")
    synth.add_argument("--tiny", action="store_true", help="tiny shapes, to try the script")
    synth.add_argument("--report", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args(argv)

    from s2s_desktop import devices
    from s2s_desktop.config import parse_overrides
    from s2s_desktop.profiles import for_profile
    from s2s_desktop.states import STAGES

    plat = devices.detect_platform()
    if plat.cuda_count == 0 and not args.allow_no_cuda:
        print(
            "gpu_check: no CUDA device found (no NVIDIA GPU, driver or CUDA libraries); "
            "run it on a machine with an NVIDIA GPU",
            file=sys.stderr,
        )
        return 2
    if args.offline_synthetic:
        import gpu_synthetic  # beside this script

        return gpu_synthetic.run(args.offline_synthetic, args.work, args.llama_src, args.tiny,
                                 args.llama_wait, args.report, parse_overrides(args.overrides))
    settings, warnings = for_profile(args.profile, parse_overrides(args.overrides)), []
    planned = {}
    for stage in STAGES:
        try:
            planned[stage] = devices.resolve_device(stage, settings, plat)
        except Exception as exc:  # noqa: BLE001 - reported, the pipeline will refuse it too
            planned[stage] = f"unavailable: {exc}"

    from s2s_desktop.audio.files import read_audio, write_wav
    from s2s_desktop.pipeline.runner import HeadlessSession

    with tempfile.TemporaryDirectory(prefix="s2s-gpu-check-") as tmp:
        inputs = [Path(p) for p in args.input] or speak_questions(settings, Path(tmp))
        recordings = [(str(p), read_audio(p)) for p in inputs]
        started = time.monotonic()
        session = HeadlessSession(settings)  # loads and warms up every stage
        load_s = time.monotonic() - started
        turns = []
        try:
            stages = session.pipeline.stages
            ran_on = {
                name: getattr(stages[name].engine, "device", None)
                for name in STAGES
                if name in stages
            }
            for source, audio in recordings:
                rec = session.turn(audio, source=source)
                pcm, rate = rec.pop("pcm"), rec.pop("sample_rate")
                if args.output_dir and rate and len(pcm):
                    write_wav(Path(args.output_dir) / f"turn-{rec['turn']}.wav", pcm, rate)
                rec["audio_seconds"] = round(len(pcm) / rate, 2) if rate else 0.0
                turns.append(rec)
            load_ms = session.load_times_ms()
            notices = list(session.notices)
        finally:
            session.close()

    report = {
        "platform": devices.describe(settings, plat)["platform"],
        "compute": devices.compute_devices(plat),
        "profile": args.profile,
        "backends": {s: getattr(settings, s).backend for s in STAGES},
        "planned_devices": planned,
        "ran_on": ran_on,
        "notices": notices,  # a CPU fallback shows up here: then the timings are not GPU ones
        "warnings": warnings,
        "load_s": round(load_s, 2),
        "load_ms": load_ms,
        "turns": [
            {
                k: t.get(k)
                for k in (
                    "turn",
                    "transcript",
                    "reply",
                    "reason",
                    "error",
                    "audio_seconds",
                    "timings_ms",
                )
            }
            for t in turns
        ],
        "summary_ms": summarize(turns),
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))
    failed = [t for t in turns if t["reason"] != "ok"]
    return 1 if failed or notices else 0


if __name__ == "__main__":
    sys.exit(main())
