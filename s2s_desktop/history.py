"""Conversation history: `history.jsonl` in the user data dir, one JSON line per finished turn.

Each line goes out in one write + fsync on a file only the user can read, so a crash leaves at
most one torn last line; unreadable lines are skipped and reported, never fatal. An
interrupted reply is stored as far as it was spoken. A question is written as soon as it is
transcribed (reason "unanswered"); the finished turn's line, with the same id, replaces it
when read back, so a crash mid-reply keeps the question.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .config import data_dir
from .pipeline.turns import FinishedTurn
from .states import TurnReason

log = logging.getLogger(__name__)

FILENAME = "history.jsonl"


@dataclass
class Exchange:
    """One finished turn as the user saw it."""

    user: str
    assistant: str
    reason: str = TurnReason.OK  # ok | interrupted | error | unanswered
    time: float = field(default_factory=time.time)  # wall clock (seconds since the epoch)
    timings_ms: dict = field(default_factory=dict)
    error: str = ""
    id: str = ""  # the same for a turn's question line and its finished line
    stt_while_speaking: bool = False  # the transcript was ready at release (live STT)
    tool_calls: list[dict] = field(default_factory=list)  # ToolResult.to_dict() each
    answered_by: str = ""

    @classmethod
    def from_turn(cls, rec: FinishedTurn, id: str = "") -> Exchange | None:
        """From a finished pipeline turn; None for turns with nothing worth keeping."""
        transcript = rec.transcript.strip()
        if not transcript or rec.reason == TurnReason.NO_SPEECH:
            return None
        return cls(
            user=transcript,
            assistant=rec.kept_reply().strip(),
            reason=rec.reason,
            timings_ms={k: v for k, v in rec.timings_ms.items() if v is not None},
            error=rec.error,
            id=id,
            stt_while_speaking=rec.stt_reused_partial,
            tool_calls=[dict(c) for c in rec.tool_calls],
            answered_by=rec.answered_by or "",
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "time": round(self.time, 3),
                "user": self.user,
                "assistant": self.assistant,
                "reason": self.reason,
                "timings_ms": self.timings_ms,
                "error": self.error,
                **({"id": self.id} if self.id else {}),
                **({"stt_while_speaking": True} if self.stt_while_speaking else {}),
                **({"tool_calls": self.tool_calls} if self.tool_calls else {}),
                **({"answered_by": self.answered_by} if self.answered_by else {}),
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, line: str) -> Exchange:
        data = json.loads(line)
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("user"), str)
            or not isinstance(data.get("assistant"), str)
        ):
            raise ValueError("not a history record")
        timings = data.get("timings_ms")
        return cls(
            user=data["user"],
            assistant=data["assistant"],
            reason=str(data.get("reason", TurnReason.OK)),
            time=float(data.get("time", 0.0)),
            timings_ms=timings if isinstance(timings, dict) else {},
            error=str(data.get("error", "")),
            id=str(data.get("id", "")),
            stt_while_speaking=bool(data.get("stt_while_speaking", False)),
            tool_calls=[c for c in data.get("tool_calls") or [] if isinstance(c, dict)],
            answered_by=str(data.get("answered_by") or ""),
        )


def current_conversation(exchanges: list[Exchange]) -> list[tuple[str, str]]:
    """The exchanges the LLM sees again after a restart: those since the last "new
    conversation", answered (in full, or as far as they were spoken)."""
    marks = [i + 1 for i, e in enumerate(exchanges) if e.reason == TurnReason.NEW_CONVERSATION]
    kept = exchanges[max(marks, default=0) :]
    return [
        (e.user, e.assistant)
        for e in kept
        if e.reason in (TurnReason.OK, TurnReason.INTERRUPTED)
    ]


class History:
    def __init__(self, path: Path | None = None, enabled: bool = True):
        self.path = Path(path) if path is not None else data_dir() / FILENAME
        self.enabled = enabled
        self._needs_newline = False  # the file ends in a torn line: start ours on a new one

    def load(self) -> tuple[list[Exchange], list[str]]:
        """All readable exchanges, oldest first, and a list of problems (for a notice)."""
        if not self.path.exists():
            return [], []
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            return [], [f"Could not read the conversation history ({exc})"]
        self._needs_newline = bool(raw) and not raw.endswith(b"\n")
        out, bad = [], 0
        where: dict[str, int] = {}  # id -> index: a turn's finished line replaces its question
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                exchange = Exchange.from_json(line.decode("utf-8"))
            except (ValueError, UnicodeDecodeError, TypeError):
                bad += 1
                continue
            if exchange.id and exchange.id in where:
                out[where[exchange.id]] = exchange
            else:
                if exchange.id:
                    where[exchange.id] = len(out)
                out.append(exchange)
        problems = []
        if bad:
            problems.append(
                f"Skipped {bad} unreadable line{'s' if bad > 1 else ''} "
                f"in the conversation history ({self.path})"
            )
            log.warning("history: %d unreadable lines skipped in %s", bad, self.path)
        return out, problems

    def append(self, exchange: Exchange) -> bool:
        """Add one line; True when it was written (False when history is off or failed)."""
        if not self.enabled:
            return False
        data = exchange.to_json().encode("utf-8") + b"\n"
        if self._needs_newline:
            data = b"\n" + data
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, 0o600)  # private even if an older file was not
                os.write(fd, data)  # one write: a line is whole or absent
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("history: could not write %s (%s)", self.path, exc)
            return False
        self._needs_newline = False
        return True

    def clear(self) -> None:
        """Forget every exchange: the file is removed."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        self._needs_newline = False
