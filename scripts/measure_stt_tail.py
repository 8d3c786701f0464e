"""Where the STT time after release goes, per clip, on the starter Whisper (tiny.en, CPU).

For each held-out question spoken by espeak-ng (several English voices, silence trimmed to
0.1 s): `transcribe` as the STT stage runs it at release (the short window completed by the
padding's encoder states), faster-whisper's own full 30 s window decode, and a 1 s tail
decoded alone (what "decode only the tail" would cost). Best of 3, milliseconds.

    .venv/bin/python scripts/measure_stt_tail.py [--voices en-us,en,en-gb-x-rp]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from s2s_desktop import profiles  # noqa: E402
from s2s_desktop.commands.bench import HELD_OUT  # noqa: E402
from s2s_desktop.engines import registry  # noqa: E402
from s2s_desktop.engines.base import STTOptions  # noqa: E402
from s2s_desktop.engines.stt import faster_whisper as fw  # noqa: E402


def spoken(text: str, voice: str) -> np.ndarray:
    import soundfile as sf
    import soxr

    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "q.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-w", str(wav), text], check=True)
        audio, rate = sf.read(str(wav), dtype="float32")
    audio = soxr.resample(audio, rate, 16000).astype(np.float32)
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    return audio[max(0, loud[0] - 1600): loud[-1] + 1600]


def best_ms(call, runs: int = 3):
    best, out = float("inf"), None
    for _ in range(runs):
        t = time.perf_counter()
        out = call()
        best = min(best, time.perf_counter() - t)
    return round(best * 1000), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voices", default="en-us,en,en-gb-x-rp")
    args = ap.parse_args()
    settings = profiles.for_profile("starter")
    stt = registry.create("stt", settings.stt, "cpu")
    stt.load()
    stt.warmup()
    print("voice       sec  whole  full  tail1s  whole text / full-window text")
    options = STTOptions.of(settings.stt)
    for voice in args.voices.split(","):
        for question in HELD_OUT:
            a = spoken(question, voice)
            tail = a[-16000:]
            whole_ms, whole = best_ms(lambda a=a: stt.transcribe(a, "en", options))
            full_ms, full = best_ms(lambda a=a: stt._decode(
                a, "en", fw.token_budget(a.size), options, temperature=0.0))
            tail_ms, _ = best_ms(lambda t=tail: stt._generate(
                t, "en", fw.encoder_frames(t.size), fw.token_budget(t.size), options,
                prompt="So"))
            print(f"{voice:10s} {a.size / 16000:4.1f} {whole_ms:6d} {full_ms:5d} {tail_ms:7d}  "
                  f"{whole.text!r} / {full.text!r}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
