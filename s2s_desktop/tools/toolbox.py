"""The tools on offer in one place: by name, with the user's on/off choices, checked
arguments, a time limit per call and the permission rule (read-only tools run unasked,
writing tools only when the user allows them)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from ..engines.llm.tool_calls import ToolCall
from .spec import CallOutcome, Tool, ToolError, ToolResult, ToolSpec

log = logging.getLogger(__name__)

POLL_S = 0.05

# asks the user before a writing call: (tool, call, the turn's stop) → allowed; it returns
# False at once when `stop` is set (Stop, barge-in)
AskUser = Callable[[Tool, ToolCall, threading.Event], bool]
_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
               "object": dict, "array": list}


def argument_problem(spec: ToolSpec, arguments: dict) -> str:
    """Why `arguments` do not fit the tool's schema ("" when they do): required names,
    unknown names and top-level types are checked."""
    props = spec.parameters.get("properties") or {}
    missing = [n for n in spec.parameters.get("required") or [] if n not in arguments]
    if missing:
        return f"{spec.name} needs {', '.join(missing)}"
    for name, value in arguments.items():
        if name not in props:
            if spec.parameters.get("additionalProperties") is False or props:
                return f"{spec.name} takes no argument '{name}' (it takes {', '.join(props)})"
            continue
        expected = _JSON_TYPES.get(props[name].get("type", ""))
        if expected and (not isinstance(value, expected)
                         or (isinstance(value, bool) and expected is not bool)):
            return f"{spec.name}: '{name}' must be a {props[name]['type']}, not {value!r}"
    return ""


class ToolBox:
    """Tools by name. `disabled`: names the user switched off; `auto_approved`: writing
    tools that may run unasked (an MCP server's autoApprove)."""

    def __init__(self, tools: Iterable[Tool] = (), disabled: Iterable[str] = (),
                 auto_approved: Iterable[str] = (), time_limit_s: float = 15.0):
        self._tools: dict[str, Tool] = {}
        self._lock = threading.Lock()  # MCP servers add their tools from their own thread
        self.disabled = set(disabled)
        self.auto_approved = set(auto_approved)
        self.time_limit_s = time_limit_s
        # called when a turn lists the tools: MCP servers that failed start again meanwhile
        self.refresh: Callable[[], object] = lambda: None
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        with self._lock:
            self._tools[tool.spec.name] = tool

    def remove_source(self, source: str) -> None:
        with self._lock:
            for name in [n for n, t in self._tools.items() if t.spec.source == source]:
                del self._tools[name]

    def all_tools(self) -> list[Tool]:
        """Every tool, switched on or off (Settings and `s2s-desktop tools` list them all)."""
        with self._lock:
            return list(self._tools.values())

    def offered(self) -> list[Tool]:
        """The tools the model is offered: those switched on."""
        return [t for t in self.all_tools() if t.spec.name not in self.disabled]

    def get(self, name: str) -> Tool | None:
        with self._lock:
            tool = self._tools.get(name)
        return None if tool is None or name in self.disabled else tool

    def needs_permission(self, tool: Tool) -> bool:
        return not tool.spec.read_only and tool.spec.name not in self.auto_approved

    def check(self, call: ToolCall) -> ToolResult | None:
        """A result for a call that must not run (unknown name, bad arguments); None when
        it may."""
        if call.problem:
            return ToolResult(call, CallOutcome.BAD_ARGUMENTS, call.problem)
        tool = self.get(call.name)
        if tool is None:
            names = ", ".join(t.spec.name for t in self.offered())
            return ToolResult(call, CallOutcome.UNKNOWN,
                              f"there is no tool '{call.name}' (the tools are: {names})")
        problem = argument_problem(tool.spec, call.arguments)
        if problem:
            return ToolResult(call, CallOutcome.BAD_ARGUMENTS, problem)
        return None

    def start(self, call: ToolCall, stop: threading.Event) -> RunningCall:
        """Start a checked call in its own thread; `RunningCall.wait` gives its result."""
        return RunningCall(self.all_by_name()[call.name], call, stop, self.time_limit_s)

    def all_by_name(self) -> dict[str, Tool]:
        with self._lock:
            return dict(self._tools)

    def run(self, call: ToolCall, stop: threading.Event) -> ToolResult:
        """A checked call run to its end (or its time limit, or `stop`)."""
        return self.start(call, stop).wait()


class RunningCall:
    """One call running in its own thread, bounded by the tool box's time limit; `stop`
    abandons it (CANCELLED: the turn goes on without waiting for the tool)."""

    def __init__(self, tool: Tool, call: ToolCall, stop: threading.Event, time_limit_s: float):
        self.call, self.stop, self.time_limit_s = call, stop, time_limit_s
        self._box: dict = {}
        self._done = threading.Event()
        self._t0 = time.monotonic()
        threading.Thread(target=self._work, args=(tool,), name=f"tool-{call.name}",
                         daemon=True).start()

    def _work(self, tool: Tool) -> None:
        try:
            self._box["text"] = tool.run(dict(self.call.arguments), self.stop)
        except ToolError as exc:
            self._box["error"] = str(exc)
        except Exception as exc:  # a tool's bug must not end the turn
            log.warning("tool %s failed", self.call.name, exc_info=True)
            self._box["error"] = f"{type(exc).__name__}: {exc}"
        self._done.set()

    def wait(self, seconds: float | None = None) -> ToolResult | None:
        """The result, or None when it still runs after `seconds` (None: wait to the end)."""
        until = None if seconds is None else time.monotonic() + seconds
        while not self._done.wait(POLL_S):
            now = time.monotonic()
            waited = now - self._t0
            if self.stop.is_set():
                return ToolResult(self.call, CallOutcome.CANCELLED, "stopped", waited * 1000)
            if waited > self.time_limit_s:
                return ToolResult(self.call, CallOutcome.TIMED_OUT,
                                  f"{self.call.name} took longer than {self.time_limit_s:g} s",
                                  waited * 1000)
            if until is not None and now >= until:
                return None
        ms = (time.monotonic() - self._t0) * 1000
        if "error" in self._box:
            return ToolResult(self.call, CallOutcome.ERROR, self._box["error"], ms)
        return ToolResult(self.call, CallOutcome.OK, str(self._box.get("text", "")), ms)
