"""What a tool is and what calling it gave: typed records shared by the tool box, the LLM
stage, the history and `run --json`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from ..engines.llm.tool_calls import ToolCall

BUILT_IN = "built-in"


class CallOutcome(StrEnum):
    """How one tool call ended."""

    OK = "ok"
    ERROR = "error"  # the tool ran and failed
    DENIED = "denied"  # a writing tool the user (or the policy) did not allow
    UNKNOWN = "unknown tool"  # the model named a tool that does not exist
    BAD_ARGUMENTS = "bad arguments"  # the model's arguments do not fit the tool
    TIMED_OUT = "timed out"
    CANCELLED = "cancelled"  # Stop or barge-in while it ran


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model and the user see it. `read_only`: it only reads (runs unasked);
    otherwise it changes something and asks first. `parameters`: a JSON schema object."""

    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    read_only: bool = True
    source: str = BUILT_IN  # "built-in" or the MCP server's name

    def schema(self) -> dict:
        """The OpenAI function-tool entry chat templates and servers take."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "source": self.source,
                "read_only": self.read_only, "parameters": self.parameters}


# runs a call: (arguments, stop) → the result as text; raises ToolError on a failure
ToolFunction = Callable[[dict, threading.Event], str]


class ToolError(Exception):
    """A tool could not do what was asked; the message is told to the model and the user."""


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    run: ToolFunction
    # what the user is asked before a writing call: arguments → "save the note 'buy milk'"
    describe: Callable[[dict], str] | None = None

    def question(self, arguments: dict) -> str:
        """The spoken question before a writing call."""
        what = self.describe(arguments) if self.describe else f"use {self.spec.name}"
        return f"Shall I {what}?"


@dataclass(frozen=True)
class ToolResult:
    """One call as it ended: `text` is the result (OK) or what went wrong."""

    call: ToolCall
    outcome: CallOutcome
    text: str
    ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome == CallOutcome.OK

    def to_dict(self) -> dict:
        """The `tool_calls` entry of `run --json` and the history."""
        out = {"name": self.call.name, "arguments": dict(self.call.arguments),
               "outcome": str(self.outcome), "ms": round(self.ms, 1)}
        out["result" if self.ok else "error"] = self.text
        return out
