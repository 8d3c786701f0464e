"""`s2s-desktop bench`: release-to-first-audio on spoken questions, through the real pipeline,
against the sequential baseline and the ideal, on the same loaded models.

A press is simulated the way a person makes one: 0.3 s of quiet before speaking (the
pre-roll), the question with espeak's trailing silence trimmed, and the key comes up with the
last word (or 0.15 / 0.3 s later in the hold sweep). The recording is fed in the microphone's
20 ms blocks, each when it would have been recorded, so live transcription works exactly as
with a microphone. Each run also holds one conversation of HELD_OUT questions, so the history
grows past its window. Where an output device opens, replies are played on it and the time
its callback takes the first sample is reported (`to_device_ms`).
"""

from __future__ import annotations

import json
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from .. import host
from ..audio.files import read_audio
from ..audio.silence import trim_trailing_silence
from ..audio.sink import CaptureSink
from ..audio_format import SAMPLE_RATE
from ..config import Settings, cache_dir
from ..engines.base import LLMOptions, STTOptions, VADOptions
from ..engines.vad.trim import trim
from ..errors import AudioDeviceError, S2SError
from ..pipeline.chunker import SentenceChunker
from ..states import STAGES, TurnReason
from .bench_measures import (
    by_group,
    ideal_ms,
    longest_gap_ms,
    stats,
    wer,
)
from .bench_questions import SpokenQuestion, read_questions
from .bench_report import format_table, plot_timeline

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
# Never used to tune the chunker or the STT: the conversation and the hold sweep.
HELD_OUT = [
    "Which animal is the tallest in the world?",
    "How many days are there in a leap year?",
    "What do bees make from flowers?",
    "Who wrote the play Romeo and Juliet?",
    "At what temperature does water boil?",
    "How many continents are there?",
    "Which ocean is the biggest?",
    "What colour do you get when you mix blue and yellow?",
    "How many minutes are there in an hour?",
    "What is the opposite of cold?",
    "Which planet is closest to the sun?",
    "What language do people speak in Brazil?",
]
HOLDS_S = (0.0, 0.15, 0.3)  # key released this long after the last word
PREROLL_S, CHUNK_S = 0.3, 0.02
BETWEEN_TURNS_S = 1.0  # a person's pause before the next question
PACE = 1.0  # seconds of wall time per second of recording (tests speed it up)


def spoken(folder: Path, name: str, text: str, voice: str = "en-us") -> np.ndarray:
    """`text` spoken by espeak-ng in `voice` (cached), up to the end of its last word."""
    path = folder / f"{name}-{voice}.wav"
    if not path.exists():
        done = subprocess.run(["espeak-ng", "-v", voice, "-s", "160", "-w", str(path), text],
                              capture_output=True, text=True)
        if done.returncode != 0 or not path.exists():
            raise S2SError(f"espeak-ng could not say {text!r} in voice {voice!r} "
                           f"({done.stderr.strip()}): see `espeak-ng --voices=en`")
    return trim_trailing_silence(read_audio(path), SAMPLE_RATE)


def spoken_questions(folder: Path, held_out: list[SpokenQuestion] | None = None
                     ) -> dict[str, list[tuple[str, np.ndarray]]]:
    """The fixed question classes and the held-out set (or `held_out`, from --questions),
    spoken once and cached."""
    if shutil.which("espeak-ng") is None:
        raise S2SError(
            "the benchmark speaks its questions with espeak-ng: install it "
            "(apt-get install espeak-ng / brew install espeak-ng)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    sets = {cls: [SpokenQuestion(t) for t in texts] for cls, texts in QUESTIONS.items()}
    sets["held_out"] = held_out or [SpokenQuestion(t) for t in HELD_OUT]
    return {
        cls: [(q.text, spoken(folder, f"{cls}-{i}", q.text, q.voice)) for i, q in enumerate(qs)]
        for cls, qs in sets.items()
    }


def _quiet(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SAMPLE_RATE), np.float32)


def _ms(seconds: float) -> float:
    return seconds * 1000.0


def peak_memory_mb() -> float:
    """This process's peak resident memory. Windows has no `resource` module: its peak working
    set comes from the Win32 API instead."""
    if sys.platform == "win32":
        return round(_peak_working_set_bytes() / (1024 * 1024), 1)
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)


def _peak_working_set_bytes() -> int:
    import ctypes
    from ctypes import wintypes

    class Counters(ctypes.Structure):  # PROCESS_MEMORY_COUNTERS (psapi.h)
        _fields_ = [("cb", wintypes.DWORD), ("PageFaultCount", wintypes.DWORD),
                    *((name, ctypes.c_size_t) for name in (
                        "PeakWorkingSetSize", "WorkingSetSize", "QuotaPeakPagedPoolUsage",
                        "QuotaPagedPoolUsage", "QuotaPeakNonPagedPoolUsage",
                        "QuotaNonPagedPoolUsage", "PagefileUsage", "PeakPagefileUsage"))]

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.K32GetProcessMemoryInfo.argtypes = [
        wintypes.HANDLE, ctypes.POINTER(Counters), wintypes.DWORD]
    kernel32.K32GetProcessMemoryInfo.restype = wintypes.BOOL
    counters = Counters(cb=ctypes.sizeof(Counters))
    if not kernel32.K32GetProcessMemoryInfo(kernel32.GetCurrentProcess(),
                                            ctypes.byref(counters), counters.cb):
        raise ctypes.WinError(ctypes.get_last_error())
    return counters.PeakWorkingSetSize


class BenchSink(CaptureSink):
    """Keeps what is played (replies, gaps) and, where an output device opens, plays it there
    too, so the time the device callback takes each turn's first sample is known."""

    def __init__(self, speaker=None):
        super().__init__()
        self.speaker = speaker

    def play(self, pcm, sample_rate, turn, sentence=-1):
        super().play(pcm, sample_rate, turn, sentence)
        if self.speaker is not None:
            self.speaker.play(pcm, sample_rate, turn, sentence)

    def drain(self, turn, stop):
        if self.speaker is not None:
            self.speaker.drain(turn, stop)

    def flush(self):
        super().flush()
        if self.speaker is not None:
            self.speaker.flush()

    def close(self):
        if self.speaker is not None:
            self.speaker.close()

    def to_device(self, turn: int) -> float | None:
        return self.speaker.first_heard(turn) if self.speaker is not None else None


def open_speaker(settings: Settings):
    """A SpeakerSink on the configured output, or None where no output device opens."""
    try:
        from ..audio.speaker import SpeakerSink

        speaker = SpeakerSink(settings.audio.output_device)
        speaker.open(SAMPLE_RATE)
        return speaker
    except (AudioDeviceError, OSError):
        return None


class Bench:
    def __init__(self, settings: Settings, runs: int):
        from ..pipeline.runner import HeadlessSession

        self.settings, self.runs = settings, max(1, runs)
        self.sink = BenchSink(open_speaker(settings))
        self.session = HeadlessSession(settings, sink=self.sink)
        self.pipe = self.session.pipeline
        self.heard: list[tuple[str, str]] = []  # (spoken text, transcript) of every turn
        self._stt_full: dict[str, float] = {}
        self._llm_lock = threading.Lock()
        self._serialise_priming()

    def _serialise_priming(self) -> None:
        """The LLM stage primes the next prompt after each turn, in its own thread; the bench's
        own LLM calls (baselines, a fresh cache) must not run into it: llama.cpp is not
        thread-safe (a GGML assert ended a run)."""
        engine = self.pipe.llm.engine
        prime = getattr(engine, "prime", None)
        if prime is None:
            return

        def serialised(*args, **kwargs):
            with self._llm_lock:
                return prime(*args, **kwargs)

        engine.prime = serialised

    def close(self):
        self.session.close()

    # -- through the pipeline, as a press ---------------------------------------------
    def _fresh_llm(self) -> None:
        """Leave the LLM as a new question finds it (only the system prompt cached), so no
        measurement reuses the KV cache of the same question asked just before."""
        with self._llm_lock:
            self.pipe.llm.engine.warmup()

    def press(self, text: str, audio: np.ndarray, hold_s: float = 0.0,
              fresh: bool = True) -> dict:
        """One turn: the question spoken into the live pipeline, the key up `hold_s` after
        the last word. Returns the turn's record with the bench's own figures added."""
        recording = np.concatenate([_quiet(PREROLL_S), audio, _quiet(hold_s)])
        if fresh:
            self.pipe.conversation.clear()  # this question stands alone
            self._fresh_llm()
        turn = self.pipe.begin_turn(source="bench")
        step = int(CHUNK_S * SAMPLE_RATE)
        start = time.monotonic()
        for offset in range(0, len(recording), step):
            block = recording[offset : offset + step]
            # a block exists once it has been recorded
            time.sleep(max(0.0, start + PACE * (offset + len(block)) / SAMPLE_RATE
                           - time.monotonic()))
            self.pipe.feed(turn, block)
        self.pipe.end_turn(turn)
        finished = self.session.wait(turn)
        if finished.reason != TurnReason.OK:
            raise S2SError(f"bench turn failed ({finished.reason}): {finished.error}")
        marks = dict(self.pipe.book.get(turn).marks)
        device = self.sink.to_device(turn)
        rate = self.sink.sample_rates.get(turn) or 1
        chunks = [(t, len(p)) for t, p in zip(self.sink.chunk_times(turn),
                                              self._chunks(turn), strict=True)]
        self.sink.forget(turn)
        if self.sink.speaker is not None:
            self.sink.speaker.forget(turn)
        self.heard.append((text, finished.transcript))
        rec = finished.to_dict()  # the turn's JSON record, the bench's own figures added
        rec.update(
            question=text,
            marks=marks,
            to_device_ms=_ms(device - marks["released"]) if device else None,
            ideal_ms=ideal_ms(marks),
            longest_gap_ms=longest_gap_ms(chunks, rate),
        )
        return rec

    def _chunks(self, turn: int) -> list[np.ndarray]:
        with self.sink._lock:
            return [pcm for _, pcm in self.sink.chunks.get(turn, [])]

    # -- standalone, on the same engines ---------------------------------------------------
    def _engines(self):
        p = self.pipe
        return p.vad.engine, p.stt.engine, p.llm.engine, p.tts.engine

    def _speech(self, audio):
        vad = self._engines()[0]
        segments = vad.speech(audio, VADOptions.of(self.settings.vad))
        pad = int(self.settings.vad.pad_ms * SAMPLE_RATE / 1000)
        return trim(audio, segments, pad)

    def stt_full_ms(self, text: str, audio: np.ndarray) -> float:
        """A whole transcription of the question alone (the best of two), cached."""
        if text not in self._stt_full:
            stt, speech, times = self._engines()[1], self._speech(audio), []
            for _ in range(2):
                t0 = time.perf_counter()
                stt.transcribe(speech, self.settings.stt.language or None,
                               STTOptions.of(self.settings.stt))
                times.append(_ms(time.perf_counter() - t0))
            self._stt_full[text] = min(times)
        return self._stt_full[text]

    def _messages(self, text: str) -> list[dict]:
        from ..engines.llm.history import build_messages

        return build_messages(self.settings.llm.system_prompt, [], text, 0)

    def sequential(self, audio: np.ndarray) -> dict:
        """Transcribe all, generate the whole reply, synthesize all, then play."""
        _, stt, llm, tts = self._engines()
        self._fresh_llm()
        t0 = time.perf_counter()
        speech = self._speech(audio)
        s = self.settings
        text = stt.transcribe(speech, s.stt.language or None, STTOptions.of(s.stt)).text
        with self._llm_lock:
            reply = "".join(llm.stream(self._messages(text), threading.Event(),
                                       LLMOptions.of(s.llm)))
        chunker = SentenceChunker()
        pieces = chunker.feed(reply) + chunker.flush()
        t_tts = time.perf_counter()
        samples = sum(len(pcm) for piece in pieces
                      for pcm in tts.synthesize(piece, None, s.tts.speed))
        done = time.perf_counter()
        audio_s = samples / tts.sample_rate if samples else 0.0
        return {
            "first_audio_ms": _ms(done - t0),
            "tts_rtf": (done - t_tts) / audio_s if audio_s else None,
            "reply": reply,
        }

    # -- the parts of a run ----------------------------------------------------------------
    def _ratio(self, rec: dict, audio: np.ndarray) -> float | None:
        left = rec["timings_ms"]["stt_after_release"]
        full = self.stt_full_ms(rec["question"], audio)
        return left / full if left is not None and full > 0 else None

    def classes(self, questions) -> tuple[dict, list[float]]:
        out, ratios, example = {}, [], None
        for cls, items in questions.items():
            rows = []
            for i in range(self.runs):
                text, audio = items[i % len(items)]
                rec = self.press(text, audio)
                rows.append((rec, self.sequential(audio)))
                ratios.append(self._ratio(rec, audio))
                if example is None and cls == "open":
                    example = self.pipe.book.get(rec["turn"])
            streamed = [r["timings_ms"]["release_to_first_audio"] for r, _ in rows]
            seq = [s["first_audio_ms"] for _, s in rows]
            ideal = [r["ideal_ms"] for r, _ in rows]
            t = [r["timings_ms"] for r, _ in rows]
            out[cls] = {
                "questions": [q for q, _ in items][: self.runs],
                "release_to_first_audio_ms": stats(streamed),
                "sequential_first_audio_ms": stats(seq),
                "ideal_first_audio_ms": stats(ideal),
                "ratio_streamed_to_sequential": _ratio_of_medians(streamed, seq),
                "ratio_streamed_to_ideal": _ratio_of_medians(streamed, ideal),
                "replies": [r["reply"] for r, _ in rows],
                "stages": {
                    "vad_ms": stats([x["vad"] for x in t]),
                    "stt_ms": stats([self._stt_full[r["question"]] for r, _ in rows]),
                    "stt_after_release_ms": stats([x["stt_after_release"] for x in t]),
                    "llm_first_token_ms": stats([x["llm_first_token"] for x in t]),
                    "llm_first_piece_ms": stats([x["first_sentence"] for x in t]),
                    "llm_tokens_per_s": stats([x.get("llm_tokens_per_s") for x in t]),
                    "tts_first_chunk_ms": stats([x["tts_first_chunk"] for x in t]),
                    "tts_rtf": stats([s["tts_rtf"] for _, s in rows], digits=3),
                    "total_ms": stats([x["total"] for x in t]),
                    "to_device_ms": stats([r["to_device_ms"] for r, _ in rows]),
                },
            }
        self.example_turn = example
        return out, ratios

    def hold_sweep(self, held_out) -> dict:
        out = {}
        for hold in HOLDS_S:
            recs = [
                (self.press(text, audio, hold), audio)
                for text, audio in (held_out[i % len(held_out)] for i in range(self.runs))
            ]
            out[f"{hold:g}"] = {
                "release_to_first_audio_ms": stats(
                    [r["timings_ms"]["release_to_first_audio"] for r, _ in recs]),
                "stt_after_release_ratio": _median3([self._ratio(r, a) for r, a in recs]),
            }
        return out

    def conversation(self, held_out) -> list[dict]:
        """One conversation over every held-out question, the key up with the last word."""
        self.pipe.conversation.clear()
        self._fresh_llm()
        turns = []
        for n, (text, audio) in enumerate(held_out, start=1):
            rec = self.press(text, audio, fresh=False)
            rec["turn_number"] = n
            turns.append(rec)
            time.sleep(BETWEEN_TURNS_S * PACE)  # the LLM may use the pause
        return turns

    # -- the whole run ---------------------------------------------------------------------------
    def run(self, questions) -> dict:
        questions = dict(questions)
        held_out = questions.pop("held_out")
        classes, ratios = self.classes(questions)
        sweep = self.hold_sweep(held_out)
        talks = [self.conversation(held_out) for _ in range(self.runs)]
        every = [t for talk in talks for t in talk]
        return {
            "profile": self.settings_summary(),
            "runs": self.runs,
            "press": {"preroll_s": PREROLL_S, "trailing_quiet_s": 0.0, "chunk_s": CHUNK_S,
                      "trailing_silence": "trimmed: the key comes up with the last word"},
            "classes": classes,
            "stt_after_release_ratio": _median3(ratios),
            "hold_sweep": sweep,
            "conversation": conversation_report(talks),
            "longest_gap_ms": stats([t["longest_gap_ms"] for t in every]),
            "transcript_wer": wer(self.heard),
            "to_device": "measured" if self.sink.speaker is not None
            else "no output device opened: to_device_ms not measured",
            "load_ms": self.session.load_times_ms(),
            "peak_memory_mb": peak_memory_mb(),
            "machine": {
                "platform": platform.platform(),
                "cpus": host.cpu_count(),
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
            for stage in STAGES
        } | {"stt_live": s.stt.live, "llm_pause_for_first_audio": s.llm.pause_for_first_audio}


def _median3(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def _ratio_of_medians(a, b) -> float | None:
    a, b = [x for x in a if x is not None], [x for x in b if x is not None]
    if not a or not b or statistics.median(b) == 0:
        return None
    return round(statistics.median(a) / statistics.median(b), 3)


def conversation_report(talks: list[list[dict]]) -> dict:
    """By turn number over the runs' conversations; the last run's words beside them."""
    rows = []
    for n in range(1, max(len(t) for t in talks) + 1):
        recs = [t[n - 1] for t in talks if len(t) >= n]
        tokens = [r["prompt_tokens_evaluated_at_release"] for r in recs]
        tokens = [x for x in tokens if x is not None]
        last = recs[-1]
        rows.append({
            "turn": n,
            "release_to_first_audio_ms": stats(
                [r["timings_ms"]["release_to_first_audio"] for r in recs]),
            "to_device_ms": stats([r["to_device_ms"] for r in recs]),
            "prompt_tokens_evaluated_at_release": statistics.median(tokens) if tokens else None,
            "ideal_ms": stats([r["ideal_ms"] for r in recs]),
            "question": last["question"],
            "transcript": last["transcript"],
            "reply": last["reply"],
            "_raw": {
                "release_to_first_audio_ms": [r["timings_ms"]["release_to_first_audio"]
                                              for r in recs],
                "to_device_ms": [r["to_device_ms"] for r in recs],
            },
        })
    groups = {key: by_group([r["_raw"] | {"turn": r["turn"]} for r in rows], key)
              for key in ("release_to_first_audio_ms", "to_device_ms")}
    for r in rows:
        del r["_raw"]
    return {"by_turn": rows, "by_group": groups}


def bench_command(args, settings: Settings) -> int:
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (checked before minutes of measuring)
        except ImportError:
            raise S2SError('--plot needs matplotlib: pip install "s2s-desktop[plot]"') from None
    chosen = read_questions(args.questions) if getattr(args, "questions", None) else None
    questions = spoken_questions(cache_dir() / "bench-questions", chosen)
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
