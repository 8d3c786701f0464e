"""Could the STT at release redo only the end of the question? Measured on the starter Whisper.

Whisper's encoder attends over the whole window, so when the key comes up the states of the
early audio (encoded during the hold, for a live partial) are stale: they saw padding where
the last words are now. An incremental encoder would keep them and re-encode only the
positions of the last `--lag + --margin` seconds. This script gives the decoder such
stitched states and compares its text with the whole decode, and prints how a whole
transcription splits into encoder and decoder time (the decoder is not incremental at all).

    .venv/bin/python scripts/measure_stt_incremental.py [--lag 0.5] [--margin 1.5] [--voices N]

- A: early states from the partial's encode, the rest (tail and padding) exact;
- B: as A, but the padding after the speech stale too (what an incremental encoder keeps);
- C: B's states, and the partial's tokens but its last `--drop` words forced as the start of
  the decode, so the decoder too only adds the end (its time is printed beside the whole's).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure_stt_tail import spoken  # noqa: E402

from s2s_desktop import profiles  # noqa: E402
from s2s_desktop.commands.bench import HELD_OUT  # noqa: E402
from s2s_desktop.commands.bench_measures import word_errors  # noqa: E402
from s2s_desktop.engines import registry  # noqa: E402
from s2s_desktop.engines.stt import faster_whisper as fw  # noqa: E402

TEST_QUESTIONS = [
    "What is the capital of France?", "What is the capital of Japan?",
    "Who painted the Mona Lisa?", "Why is the sky blue?", "How far away is the moon?",
    "What is the largest planet in our solar system?",
    "What year did the Second World War end?",
]
POSITION_SAMPLES = 320  # one encoder state per 20 ms


def english_voices() -> list[str]:
    out = subprocess.run(["espeak-ng", "--voices=en"], capture_output=True, text=True).stdout
    rows = (line.split() for line in out.splitlines()[1:])
    return sorted({r[1] for r in rows if len(r) > 4 and r[4].startswith("gmw/")})


def main() -> int:
    import ctranslate2
    from faster_whisper.tokenizer import Tokenizer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lag", type=float, default=0.5, help="the partial ends this long before")
    ap.add_argument("--margin", type=float, default=1.5, help="re-encoded before the partial's end")
    ap.add_argument("--voices", type=int, default=99, help="how many espeak English voices")
    ap.add_argument("--drop", type=int, default=2, help="the partial's last words not forced")
    args = ap.parse_args()

    settings = profiles.for_profile("starter")
    stt = registry.create("stt", settings.stt, "cpu")
    stt.load()
    stt.warmup()
    tok = Tokenizer(stt.model.hf_tokenizer, False, task="transcribe", language="en")
    start = list(tok.sot_sequence) + [tok.no_timestamps]

    def decode_ids(states: np.ndarray, forced: list[int] = ()) -> list[int]:
        view = ctranslate2.StorageView.from_array(np.ascontiguousarray(states))
        result = stt.model.model.generate(view, [start + list(forced)],
                                          beam_size=settings.stt.beam_size,
                                          max_length=len(start) + 100, suppress_blank=True,
                                          suppress_tokens=[-1], return_scores=False)[0]
        return [t for t in result.sequences_ids[0] if t < tok.eot]  # the forced start too

    def decode(states: np.ndarray) -> str:
        return tok.decode(decode_ids(states)).strip()

    def settled(ids: list[int], drop: int) -> list[int]:
        """The tokens of all but the last `drop` words (a word starts with a space)."""
        starts = [i for i, t in enumerate(ids) if tok.decode([t]).startswith(" ")]
        return ids[: starts[-drop]] if len(starts) > drop else []

    def norm(text: str) -> list[str]:
        return re.sub(r"[^a-z0-9 ]", "", text.lower()).split()

    clips = [(q, v, spoken(q, v)) for v in english_voices()[: args.voices]
             for q in TEST_QUESTIONS + list(HELD_OUT)]
    same = {"A": 0, "B": 0, "C": 0}
    errors = {"whole": 0, "A": 0, "B": 0, "C": 0}
    encode_ms, decode_ms, forced_ms = [], [], []
    for question, voice, audio in clips:
        frames = fw.encoder_frames(audio.size)
        t0 = time.perf_counter()
        whole = np.asarray(stt._encode(audio, frames))
        t1 = time.perf_counter()
        text = decode(whole)
        encode_ms.append((t1 - t0) * 1000)
        decode_ms.append((time.perf_counter() - t1) * 1000)
        partial = audio[: max(1600, audio.size - int(args.lag * fw.SAMPLE_RATE))]
        stale = np.asarray(stt._encode(partial, frames))
        kept = max(0, int((partial.size - args.margin * fw.SAMPLE_RATE) / POSITION_SAMPLES))
        speech_end = min(whole.shape[1], audio.size // POSITION_SAMPLES + 10)
        stitched = {"A": whole.copy()}
        stitched["A"][:, :kept] = stale[:, :kept]
        stitched["B"] = stitched["A"].copy()
        stitched["B"][:, speech_end:] = stale[:, speech_end:]
        errors["whole"] += word_errors(question, text)[0]
        forced = settled(decode_ids(stale), args.drop)
        t2 = time.perf_counter()
        got_c = tok.decode(decode_ids(stitched["B"], forced)).strip()
        forced_ms.append((time.perf_counter() - t2) * 1000)
        for name, states in stitched.items():
            got = decode(states)
            same[name] += norm(got) == norm(text)
            errors[name] += word_errors(question, got)[0]
            if name == "B" and norm(got) != norm(text):
                print(f"{voice:16} whole {text!r}  B {got!r}", flush=True)
        same["C"] += norm(got_c) == norm(text)
        errors["C"] += word_errors(question, got_c)[0]
    print(f"lag {args.lag} s, margin {args.margin} s, {len(clips)} clips: the whole decode's "
          f"text from A {same['A']}, B {same['B']}, C {same['C']}; word errors whole "
          f"{errors['whole']}, A {errors['A']}, B {errors['B']}, C {errors['C']}")
    print(f"a whole transcription, medians: encoder {np.median(encode_ms):.1f} ms, decoder "
          f"(beam {settings.stt.beam_size}) {np.median(decode_ms):.1f} ms; the decoder after the forced "
          f"start (C) {np.median(forced_ms):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
