"""Turn bookkeeping shared by the stages: which turns are live (barge-in), what each turn
did and when (timings from the data), and the conversation the LLM sees."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum

from ..states import TurnReason
from .cores import CoreShare


class AnsweredBy(StrEnum):
    """Who wrote a turn's reply (`answered_by` in `run --json`)."""

    LOCAL = "local"
    LLM = "llm"
    TOOL = "tool"  # the LLM answered from a tool's result (the calculator, an MCP server, …)


@dataclass(frozen=True)
class TurnContext:
    """What the stages share about one running turn, the flows against the turn's direction
    named in one place: its stop, the first-audio gate (TTS → LLM) and the core share (LLM and
    TTS on one CPU). `TurnClock.context(turn)` gives every stage the same one."""

    turn: int
    # set when the turn becomes stale (barge-in, Stop): generation stops at the next step
    stop: threading.Event
    # set when the turn's first speech chunk exists (or the turn is cancelled): the LLM may
    # wait on it so, on few cores, the first piece's synthesis gets the CPU
    first_audio: threading.Event
    cores: CoreShare  # the LLM's threads while TTS synthesizes on the CPU


class TurnClock:
    """Turn ids and staleness. A new turn or an interrupt makes every older turn stale; stages
    drop stale messages and each turn's stop Event is set so generation ends at the next step."""

    def __init__(self, cores: CoreShare | None = None):
        self._lock = threading.Lock()
        self.current = 0
        self._live_from = 1
        self.cores = cores or CoreShare()
        self._contexts: dict[int, TurnContext] = {}

    def new_turn(self) -> int:
        with self._lock:
            self.current += 1
            self._cancel_before(self.current)
            return self.current

    def cancel_all(self) -> int:
        """Make every turn so far stale; returns the last cancelled turn id."""
        with self._lock:
            self._cancel_before(self.current + 1)
            return self.current

    def _cancel_before(self, turn: int) -> None:
        self._live_from = turn
        for t in [t for t in self._contexts if t < turn]:
            ctx = self._contexts.pop(t)
            ctx.stop.set()
            ctx.first_audio.set()

    def is_stale(self, turn: int) -> bool:
        return turn < self._live_from

    def context(self, turn: int) -> TurnContext:
        """The turn's shared context (made on first use). A stale turn's has both events set:
        whoever waits must not wait."""
        with self._lock:
            ctx = self._contexts.get(turn)
            if ctx is None:
                ctx = TurnContext(turn, threading.Event(), threading.Event(), self.cores)
                if turn < self._live_from:
                    ctx.stop.set()
                    ctx.first_audio.set()
                else:
                    self._contexts[turn] = ctx
            return ctx

    def forget(self, turn: int) -> None:
        with self._lock:
            self._contexts.pop(turn, None)


# Timings reported per turn: name -> (from mark, to mark)
TIMING_SPANS = {
    "vad": ("vad_start", "vad_end"),
    "stt": ("stt_start", "stt_end"),
    "stt_after_release": ("vad_end", "stt_end"),
    "llm_first_token": ("llm_start", "llm_first_token"),
    "first_sentence": ("llm_start", "first_sentence"),
    "llm_total": ("llm_start", "llm_end"),
    "tts_first_chunk": ("tts_first_start", "tts_first_chunk"),
    "release_to_first_audio": ("released", "first_audio"),
    "total": ("released", "end"),
}


@dataclass(frozen=True)
class FinishedTurn:
    """A closed turn as it leaves the pipeline (`PipelineEvents.turn_finished`): a snapshot of
    its TurnRecord, so readers in any thread see it whole and unchanging. `to_dict()` is the
    JSON record of `run --json`, the benchmark and `s2s-desktop ask --json`."""

    turn: int
    source: str = ""
    transcript: str = ""
    language: str | None = None
    reply: str = ""
    spoken: str = ""  # the pieces that were played, joined
    reason: TurnReason = TurnReason.OK
    error: str = ""
    tokens: int = 0
    prompt_tokens_evaluated_at_release: int | None = None  # None: the LLM did not say
    stt_reused_partial: bool = False
    answered_by: str | None = None  # AnsweredBy: local commands or the LLM; None: no answer
    # the turn's tool calls: ToolResult.to_dict() (name, arguments, result or error, ms)
    tool_calls: tuple[dict, ...] = ()
    timings_ms: dict[str, float | None] = field(default_factory=dict)

    def kept_reply(self) -> str:
        """The reply as the conversation keeps it: an interrupted reply as far as it was
        spoken, any other the reply as written (whole when ok; what there was on an error)."""
        return self.spoken if self.reason == TurnReason.INTERRUPTED else self.reply

    def to_dict(self) -> dict:
        return {
            "turn": self.turn,
            "input": self.source,
            "transcript": self.transcript,
            "language": self.language,
            "reply": self.reply,
            "spoken": self.spoken,
            "reason": str(self.reason),
            "stt_reused_partial": self.stt_reused_partial,
            "prompt_tokens_evaluated_at_release": self.prompt_tokens_evaluated_at_release,
            "answered_by": self.answered_by,
            "tool_calls": [dict(c) for c in self.tool_calls],
            "error": self.error,
            "timings_ms": dict(self.timings_ms),
        }

    @classmethod
    def from_dict(cls, data: dict) -> FinishedTurn:
        """From `to_dict()`'s JSON (an `ask` reply); `tokens` is not in it."""
        return cls(
            turn=int(data.get("turn") or 0),
            source=data.get("input") or "",
            transcript=data.get("transcript") or "",
            language=data.get("language"),
            reply=data.get("reply") or "",
            spoken=data.get("spoken") or "",
            reason=TurnReason(data.get("reason") or TurnReason.OK),
            error=data.get("error") or "",
            prompt_tokens_evaluated_at_release=data.get("prompt_tokens_evaluated_at_release"),
            stt_reused_partial=bool(data.get("stt_reused_partial")),
            answered_by=data.get("answered_by"),
            tool_calls=tuple(data.get("tool_calls") or ()),
            timings_ms=dict(data.get("timings_ms") or {}),
        )


@dataclass
class TurnRecord:
    """One turn's bookkeeping while it runs, written by the stages; `finished_view()` is what
    leaves the pipeline once it is closed."""

    turn: int
    source: str = ""
    transcript: str = ""
    language: str | None = None
    reply: str = ""
    spoken: list[str] = field(default_factory=list)  # the pieces whose audio was played
    reason: TurnReason | None = None  # set when the turn is closed
    error: str = ""
    tokens: int = 0
    prompt_tokens_evaluated_at_release: int | None = None  # None: the LLM did not say
    stt_reused_partial: bool = False
    answered_by: str | None = None  # AnsweredBy: local commands or the LLM; None: no answer
    tool_calls: list[dict] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.reason is not None

    def timings_ms(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for name, (a, b) in TIMING_SPANS.items():
            if a in self.marks and b in self.marks:
                out[name] = round((self.marks[b] - self.marks[a]) * 1000.0, 1)
            else:
                out[name] = None
        llm = out.get("llm_total")
        if llm and self.tokens > 1 and "llm_first_token" in self.marks:
            gen_s = self.marks["llm_end"] - self.marks["llm_first_token"]
            out["llm_tokens_per_s"] = round((self.tokens - 1) / gen_s, 1) if gen_s > 0 else None
        return out

    def finished_view(self) -> FinishedTurn:
        """The closed turn as readers outside the pipeline see it."""
        if self.reason is None:
            raise ValueError(f"turn {self.turn} is not finished")
        return FinishedTurn(
            turn=self.turn,
            source=self.source,
            transcript=self.transcript,
            language=self.language,
            reply=self.reply,
            spoken=" ".join(self.spoken),
            reason=self.reason,
            error=self.error,
            tokens=self.tokens,
            prompt_tokens_evaluated_at_release=self.prompt_tokens_evaluated_at_release,
            stt_reused_partial=self.stt_reused_partial,
            answered_by=self.answered_by,
            tool_calls=tuple(self.tool_calls),
            timings_ms=self.timings_ms(),
        )


class TurnBook:
    """Records of recent turns, written by the stages from their own threads."""

    KEEP = 64

    def __init__(self):
        self._lock = threading.Lock()
        self._records: dict[int, TurnRecord] = {}

    def open(self, turn: int, source: str = "", released: float | None = None) -> TurnRecord:
        with self._lock:
            rec = TurnRecord(turn=turn, source=source)
            if released is not None:  # live turns are marked at release instead
                rec.marks["released"] = released
            self._records[turn] = rec
            for old in sorted(self._records)[: -self.KEEP]:
                del self._records[old]
            return rec

    def get(self, turn: int) -> TurnRecord | None:
        with self._lock:
            return self._records.get(turn)

    def mark(self, turn: int, name: str, when: float | None = None, first: bool = True) -> None:
        with self._lock:
            rec = self._records.get(turn)
            if rec is not None and not (first and name in rec.marks):
                rec.marks[name] = when if when is not None else time.monotonic()

    def update(self, turn: int, **fields) -> None:
        with self._lock:
            rec = self._records.get(turn)
            if rec is not None:
                for k, v in fields.items():
                    setattr(rec, k, v)

    def finish(self, turn: int, reason: TurnReason | str, error: str = "") -> TurnRecord | None:
        """Close a turn once; returns the record the first time, None afterwards."""
        with self._lock:
            rec = self._records.get(turn)
            if rec is None or rec.finished:
                return None
            rec.reason = TurnReason(reason)
            rec.error = error
            rec.marks.setdefault("end", time.monotonic())
            return rec

    def unfinished(self) -> list[int]:
        with self._lock:
            return [t for t, r in self._records.items() if not r.finished]


class Conversation:
    """Completed exchanges the LLM sees. An interrupted reply is kept as far as it was spoken.
    Past KEEP exchanges the oldest half goes at once (the prompt window counts from the start,
    so trimming one a turn would shift it every turn)."""

    KEEP = 200

    def __init__(self, exchanges: list[tuple[str, str]] | None = None):
        self._lock = threading.Lock()
        self._exchanges: list[tuple[str, str]] = list(exchanges or [])

    def exchanges(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._exchanges)

    def add(self, user: str, assistant: str) -> None:
        if not user:
            return
        with self._lock:
            self._exchanges.append((user, assistant))
            if len(self._exchanges) > self.KEEP:
                del self._exchanges[: self.KEEP // 2]

    def clear(self) -> None:
        with self._lock:
            self._exchanges.clear()

    def last_reply(self) -> str:
        """The assistant's last non-empty reply ("say that again")."""
        with self._lock:
            return next((a for _, a in reversed(self._exchanges) if a), "")
