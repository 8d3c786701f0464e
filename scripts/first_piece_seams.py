"""Whether cutting a long first sentence is heard: each sentence is synthesized whole and as
the chunker's pieces played back to back (as the player does), both are transcribed by the
starter recognizer, and the first piece's synthesis time is printed beside the whole's.

    python scripts/first_piece_seams.py   # needs the starter set (piper voice, tiny.en)

Prints one JSON line per sentence: pieces, synthesis ms (first piece, whole sentence; best of
3), what Whisper heard from the whole and from the pieces, and their word error against the
text. The sentences are replies the starter LLM gave to tuning-set questions."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from s2s_desktop.audio.files import to_mono_16k  # noqa: E402
from s2s_desktop.audio.silence import trim_leading_silence  # noqa: E402
from s2s_desktop.commands.bench_measures import word_errors  # noqa: E402
from s2s_desktop.engines.base import STTOptions  # noqa: E402
from s2s_desktop.engines.registry import create  # noqa: E402
from s2s_desktop.pipeline.chunker import SentenceChunker  # noqa: E402
from s2s_desktop.profiles import for_profile  # noqa: E402

SENTENCES = [
    "The boiling point of water is a measure that describes the temperature at which it "
    "turns into steam.",
    "The primary colors are the only two colors that cannot be made by mixing other colors.",
    "Honey is a sweet food made by bees from the nectar of flowers.",
    "Leap years have one extra day added at the end of the month of February.",
    # cut at the subject (the predicate rule)
    "The boiling point of water is 100 degrees Celsius at sea level.",
    "The longest river in Africa is the Nile River.",
    "The largest ocean on Earth is the Pacific Ocean.",
]


def synth_ms(tts, text: str) -> tuple[float, np.ndarray]:
    best, pcm = 1e9, None
    for _ in range(3):
        t0 = time.perf_counter()
        pcm = np.concatenate(list(tts.synthesize(text, None, 1.0)))
        best = min(best, (time.perf_counter() - t0) * 1000)
    return round(best, 1), pcm


def main() -> int:
    settings = for_profile("starter")
    tts = create("tts", settings.tts, "cpu")
    stt = create("stt", settings.stt, "cpu")
    tts.load()
    stt.load()
    for text in SENTENCES:
        chunker = SentenceChunker()
        pieces = chunker.feed(text + " ") + chunker.flush()
        first_ms, _ = synth_ms(tts, pieces[0])
        whole_ms, whole = synth_ms(tts, text)
        parts = [synth_ms(tts, p)[1] for p in pieces]
        parts[0] = trim_leading_silence(parts[0], tts.sample_rate)
        joined = np.concatenate(parts)
        heard = {name: stt.transcribe(to_mono_16k(pcm, tts.sample_rate), "en",
                                      STTOptions.of(stt.settings)).text.strip()
                 for name, pcm in (("whole", whole), ("pieces", joined))}
        errors = {name: word_errors(text, said)[0] for name, said in heard.items()}
        print(json.dumps({"pieces": pieces, "first_piece_tts_ms": first_ms,
                          "whole_sentence_tts_ms": whole_ms, "heard": heard,
                          "word_errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
