"""`s2s-desktop bench`: release-to-first-audio on spoken questions, through the real pipeline,
against the sequential baseline and the ideal, on the same loaded models.

A press is simulated the way a person makes one: 0.3 s of quiet before speaking (the
pre-roll), the question, 0.3 s of quiet before the key comes up, fed in 100 ms chunks at
real-time pace, so live transcription works exactly as with a microphone.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .audio.files import read_audio
from .config import Settings, cache_dir
from .engines.vad.trim import trim
from .errors import S2SError
from .pipeline.chunker import SentenceChunker

QUESTIONS = {
    "short": [
        "What is the capital of France?",
        "How many legs does a spider have?",
        "What is the largest planet in our solar system?",
    ],
    "open": [
        "Can you explain how rain forms?",
        "Why do we have seasons on Earth?",
        "How does a refrigerator keep food cold?",
    ],
}
PREROLL_S, TRAIL_S, CHUNK_S = 0.3, 0.3, 0.1
SAMPLE_RATE = 16000


def spoken_questions(folder: Path) -> dict[str, list[tuple[str, np.ndarray]]]:
    """The fixed question set, spoken by espeak-ng once and cached."""
    if shutil.which("espeak-ng") is None:
        raise S2SError(
            "the benchmark speaks its questions with espeak-ng: install it "
            "(apt-get install espeak-ng / brew install espeak-ng)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[tuple[str, np.ndarray]]] = {}
    for cls, texts in QUESTIONS.items():
        out[cls] = []
        for i, text in enumerate(texts):
            path = folder / f"{cls}-{i}.wav"
            if not path.exists():
                subprocess.run(
                    ["espeak-ng", "-v", "en-us", "-s", "160", "-w", str(path), text],
                    check=True,
                    capture_output=True,
                )
            out[cls].append((text, read_audio(path)))
    return out


def _quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), np.float32)


def stats(values: list[float]) -> dict[str, float | None]:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def _ms(seconds: float) -> float:
    return seconds * 1000.0


def peak_memory_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)


class Bench:
    def __init__(self, settings: Settings, runs: int):
        from .pipeline.runner import HeadlessSession

        self.settings, self.runs = settings, max(1, runs)
        self.session = HeadlessSession(settings)
        self.pipe = self.session.pipeline

    def close(self):
        self.session.close()

    # -- through the pipeline, as a press ---------------------------------------------
    def _fresh_llm(self) -> None:
        """Leave the LLM as a new question finds it (only the system prompt cached), so no
        measurement reuses the KV cache of the same question asked just before."""
        self.pipe.llm.engine.warmup()

    def streamed_turn(self, audio: np.ndarray) -> dict:
        recording = np.concatenate([_quiet(PREROLL_S), audio, _quiet(TRAIL_S)])
        self.pipe.conversation.clear()  # every question stands alone
        self._fresh_llm()
        turn = self.pipe.begin_turn(source="bench")
        step = int(CHUNK_S * SAMPLE_RATE)
        start = time.monotonic()
        for i, offset in enumerate(range(0, len(recording), step)):
            self.pipe.feed(turn, recording[offset : offset + step])
            # real-time pace, without drifting
            time.sleep(max(0.0, start + (i + 1) * CHUNK_S - time.monotonic()))
        self.pipe.end_turn(turn)
        rec = self.session.wait(turn)
        self.session.sink.forget(turn)
        return rec

    # -- standalone, on the same engines ---------------------------------------------------
    def _engines(self):
        p = self.pipe
        return p.vad.engine, p.stt.engine, p.llm.engine, p.tts.engine

    def _speech(self, audio):
        vad = self._engines()[0]
        t0 = time.perf_counter()
        segments = vad.speech(audio)
        pad = int(self.settings.vad.pad_ms * SAMPLE_RATE / 1000)
        return trim(audio, segments, pad), _ms(time.perf_counter() - t0)

    def _messages(self, text: str) -> list[dict]:
        from .engines.llm.history import build_messages

        return build_messages(self.settings.llm.system_prompt, [], text, 0)

    def sequential(self, audio: np.ndarray) -> dict:
        """Transcribe all, generate the whole reply, synthesize all, then play."""
        import threading

        _, stt, llm, tts = self._engines()
        self._fresh_llm()
        t0 = time.perf_counter()
        speech, _ = self._speech(audio)
        text = stt.transcribe(speech, self.settings.stt.language or None).text
        reply = "".join(llm.stream(self._messages(text), threading.Event()))
        chunker = SentenceChunker()
        pieces = chunker.feed(reply) + chunker.flush()
        t_tts = time.perf_counter()
        samples = sum(len(pcm) for piece in pieces for pcm in tts.synthesize(piece))
        done = time.perf_counter()
        audio_s = samples / tts.sample_rate if samples else 0.0
        return {
            "first_audio_ms": _ms(done - t0),
            "tts_rtf": (done - t_tts) / audio_s if audio_s else None,
            "reply": reply,
        }

    def ideal(self, audio: np.ndarray, stt_left_ms: float | None) -> dict:
        """Bare compute after release: VAD + the STT left + LLM to the first speakable piece +
        TTS to that piece's first chunk, each measured alone. `stt_left_ms`: what the live
        transcription still had to do at release (None: the whole recording was left)."""
        import threading

        _, stt, llm, tts = self._engines()
        speech, vad_ms = self._speech(audio)
        t0 = time.perf_counter()
        text = stt.transcribe(speech, self.settings.stt.language or None).text
        stt_full_ms = _ms(time.perf_counter() - t0)
        stt_left_ms = stt_full_ms if stt_left_ms is None else min(stt_left_ms, stt_full_ms)
        stop = threading.Event()
        chunker = SentenceChunker()
        self._fresh_llm()
        t0 = time.perf_counter()
        first_piece = ""
        for delta in llm.stream(self._messages(text), stop):
            pieces = chunker.feed(delta)
            if pieces:
                first_piece = pieces[0]
                stop.set()
                break
        first_piece = first_piece or next(iter(chunker.flush()), "")
        llm_ms = _ms(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tts_ms = 0.0
        for _ in tts.synthesize(first_piece or "Okay."):
            tts_ms = _ms(time.perf_counter() - t0)
            break
        return {
            "first_audio_ms": vad_ms + stt_left_ms + llm_ms + tts_ms,
            "vad_ms": vad_ms,
            "stt_full_ms": stt_full_ms,
            "stt_left_ms": stt_left_ms,
            "llm_first_piece_ms": llm_ms,
            "tts_first_chunk_ms": tts_ms,
        }

    # -- the whole run ---------------------------------------------------------------------------
    def run(self, questions) -> dict:
        classes, stt_ratios, example = {}, [], None
        for cls, items in questions.items():
            streamed, seq, ideal, rows = [], [], [], []
            for i in range(self.runs):
                text, audio = items[i % len(items)]
                rec = self.streamed_turn(audio)
                if rec["reason"] != "ok":
                    raise S2SError(f"bench turn failed ({rec['reason']}): {rec['error']}")
                s = self.sequential(audio)
                t = rec["timings_ms"]
                d = self.ideal(audio, t["stt_after_release"] if rec["stt_reused_partial"] else None)
                streamed.append(t["release_to_first_audio"])
                seq.append(s["first_audio_ms"])
                ideal.append(d["first_audio_ms"])
                rows.append((t, s, d))
                if len(audio) / SAMPLE_RATE >= 2.0 and d["stt_full_ms"] > 0:
                    stt_ratios.append((t["stt_after_release"] or 0.0) / d["stt_full_ms"])
                if example is None and cls == "open":
                    example = self.pipe.book.get(rec["turn"])
            med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
            classes[cls] = {
                "questions": [q for q, _ in items][: self.runs],
                "release_to_first_audio_ms": stats(streamed),
                "sequential_first_audio_ms": stats(seq),
                "ideal_first_audio_ms": stats(ideal),
                "ratio_streamed_to_sequential": round(med(streamed) / med(seq), 3),
                "ratio_streamed_to_ideal": round(med(streamed) / med(ideal), 3),
                "stages": {
                    "vad_ms": stats([t["vad"] for t, _, _ in rows]),
                    "stt_ms": stats([d["stt_full_ms"] for _, _, d in rows]),
                    "stt_after_release_ms": stats([t["stt_after_release"] for t, _, _ in rows]),
                    "llm_first_token_ms": stats([t["llm_first_token"] for t, _, _ in rows]),
                    "llm_first_piece_ms": stats([d["llm_first_piece_ms"] for _, _, d in rows]),
                    "llm_tokens_per_s": stats([t.get("llm_tokens_per_s") for t, _, _ in rows]),
                    "tts_first_chunk_ms": stats([t["tts_first_chunk"] for t, _, _ in rows]),
                    "tts_rtf": stats([s["tts_rtf"] for _, s, _ in rows]),
                    "total_ms": stats([t["total"] for t, _, _ in rows]),
                },
            }
        self.example_turn = example
        return {
            "profile": self.settings_summary(),
            "runs": self.runs,
            "press": {"preroll_s": PREROLL_S, "trailing_quiet_s": TRAIL_S, "chunk_s": CHUNK_S},
            "classes": classes,
            "stt_after_release_ratio": round(statistics.median(stt_ratios), 3)
            if stt_ratios
            else None,
            "load_ms": self.session.load_times_ms(),
            "peak_memory_mb": peak_memory_mb(),
            "machine": {
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
            },
        }

    def settings_summary(self) -> dict:
        s = self.settings
        return {
            stage: {
                "backend": getattr(s, stage).backend,
                "model": getattr(getattr(s, stage), "model", ""),
                "device": self.pipe.stages[stage].engine.describe(),
            }
            for stage in ("vad", "stt", "llm", "tts")
        } | {"stt_live": s.stt.live, "llm_pause_for_first_audio": s.llm.pause_for_first_audio}


def format_table(report: dict) -> str:
    def cell(st: dict) -> str:
        if st["median"] is None:
            return "-"
        return f"{st['median']:.0f} ({st['min']:.0f}–{st['max']:.0f})"

    lines = [f"s2s-desktop bench — {report['runs']} runs per class, medians (min–max) in ms", ""]
    head = f"{'':28}" + "".join(f"{c:>24}" for c in report["classes"])
    lines.append(head)
    rows = [
        ("release → first audio", "release_to_first_audio_ms"),
        ("sequential baseline", "sequential_first_audio_ms"),
        ("ideal (bare compute)", "ideal_first_audio_ms"),
    ]
    for label, key in rows:
        lines.append(
            f"{label:28}" + "".join(f"{cell(c[key]):>24}" for c in report["classes"].values())
        )
    for label, key in (
        ("streamed / sequential", "ratio_streamed_to_sequential"),
        ("streamed / ideal", "ratio_streamed_to_ideal"),
    ):
        lines.append(
            f"{label:28}" + "".join(f"{c[key]:>24.2f}" for c in report["classes"].values())
        )
    lines.append("")
    stage_keys = next(iter(report["classes"].values()))["stages"]
    for key in stage_keys:
        lines.append(
            f"{key:28}"
            + "".join(f"{cell(c['stages'][key]):>24}" for c in report["classes"].values())
        )
    lines.append("")
    lines.append(
        f"STT left after release / whole transcription: {report['stt_after_release_ratio']}"
    )
    lines.append("load (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in report["load_ms"].items()))
    lines.append(f"peak memory: {report['peak_memory_mb']} MB; {report['machine']['cpus']} CPUs")
    return "\n".join(lines)


def plot_timeline(record, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise S2SError('--plot needs matplotlib: pip install "s2s-desktop[plot]"') from None
    m = record.marks
    t0 = m["released"]
    spans = [
        ("VAD", "vad_start", "vad_end"),
        ("STT", "stt_start", "stt_end"),
        ("LLM", "llm_start", "llm_end"),
        ("TTS first piece", "tts_first_start", "tts_first_chunk"),
        ("audio out", "first_audio", "end"),
    ]
    fig, ax = plt.subplots(figsize=(8, 2.8))
    for i, (_label, a, b) in enumerate(spans):
        if a in m and b in m:
            ax.barh(i, (m[b] - m[a]) * 1000, left=(m[a] - t0) * 1000, height=0.5)
    ax.set_yticks(range(len(spans)), [s[0] for s in spans])
    ax.invert_yaxis()
    ax.set_xlabel("ms after key release")
    ax.set_title(f'one turn: "{record.transcript}"')
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def bench_command(args, settings: Settings) -> int:
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (checked before minutes of measuring)
        except ImportError:
            raise S2SError('--plot needs matplotlib: pip install "s2s-desktop[plot]"') from None
    questions = spoken_questions(cache_dir() / "bench-questions")
    bench = Bench(settings, args.runs)
    try:
        report = bench.run(questions)
    finally:
        bench.close()
    if args.plot and bench.example_turn is not None:
        plot_timeline(bench.example_turn, args.plot)
        report["plot"] = args.plot
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0
