"""The first spoken piece of the starter's replies, in CPU time: each question of a set is
asked of the starter LLM as the app asks it (system prompt, no history), the reply streamed
token by token into the SentenceChunker; the first piece, the tokens written until it went
out, and Piper's CPU time to synthesize it beside the time for the reply's whole first
sentence (best of 3; all threads). CPU time rather than wall time, so it can be taken on a
busy machine (docs/performance.md, session 12).

    python scripts/measure_first_piece.py [--questions scripts/questions/tuning.txt] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from s2s_desktop.commands.bench_questions import read_questions  # noqa: E402
from s2s_desktop.engines.base import LLMOptions  # noqa: E402
from s2s_desktop.engines.registry import create  # noqa: E402
from s2s_desktop.pipeline.chunker import SentenceChunker  # noqa: E402
from s2s_desktop.profiles import for_profile  # noqa: E402


def tts_cpu_ms(tts, text: str, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        for _chunk in tts.synthesize(text, None, 1.0):
            pass
        best = min(best, time.process_time() - start)
    return round(best * 1000, 1)


def first_piece(deltas: list[str]) -> tuple[str, int]:
    """The chunker's first piece of a streamed reply, and the tokens written until then."""
    chunker = SentenceChunker()
    for n, delta in enumerate(deltas, start=1):
        pieces = chunker.feed(delta)
        if pieces:
            return pieces[0], n
    pieces = chunker.flush()
    return (pieces[0] if pieces else ""), len(deltas)


def first_sentence(text: str) -> str:
    """The reply's first sentence (what the first piece was before it could be cut)."""
    chunker = SentenceChunker(first_clause_min_words=10**6)
    chunker.pieces_out = 1  # later-piece rules: sentence ends (or clauses in long sentences)
    pieces = chunker.feed(text + " ") + chunker.flush()
    return pieces[0] if pieces else text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, default=ROOT / "scripts/questions/tuning.txt")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    settings = for_profile("starter")
    llm, tts = create("llm", settings.llm, "cpu"), create("tts", settings.tts, "cpu")
    llm.load()
    tts.load()
    tts.warmup()
    rows = []
    for question in read_questions(args.questions):
        llm.warmup()  # only the system prompt cached, as for a new question
        messages = [{"role": "system", "content": settings.llm.system_prompt},
                    {"role": "user", "content": question.text}]
        deltas = list(llm.stream(messages, threading.Event(), LLMOptions.of(settings.llm)))
        piece, tokens = first_piece(deltas)
        sentence = first_sentence("".join(deltas).strip())
        rows.append({"question": question.text, "first_piece": piece, "tokens": tokens,
                     "words": len(piece.split()), "tts_cpu_ms": tts_cpu_ms(tts, piece),
                     "first_sentence": sentence,
                     "sentence_tts_cpu_ms": tts_cpu_ms(tts, sentence)})
        if not args.json:
            row = rows[-1]
            print(f"{row['tokens']:3d} tok {row['tts_cpu_ms']:6.0f} / "
                  f"{row['sentence_tts_cpu_ms']:6.0f} ms  {piece!r}", flush=True)
    summary = {key: statistics.median(r[key] for r in rows)
               for key in ("words", "tokens", "tts_cpu_ms", "sentence_tts_cpu_ms")}
    if args.json:
        print(json.dumps({"median": summary, "rows": rows}, indent=1))
    else:
        print("median:", summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
