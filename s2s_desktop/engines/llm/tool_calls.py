"""Tool calls as LLMs write them: the record a backend hands to the LLM stage, the parser for
chat-template output (Qwen/Hermes `<tool_call>{json}</tool_call>`, or a bare `{"name": …,
"arguments": …}` reply), and a sniffer that keeps a tool call out of the spoken text while
the reply streams."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
_ids = itertools.count(1)


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. `problem` is set when what it wrote could not be read
    as a call (the call is then not executed; the model is told why)."""

    name: str
    arguments: dict = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"call_{next(_ids)}")
    problem: str = ""

    def to_message(self) -> dict:
        """The OpenAI `tool_calls` entry (arguments as a dict: chat templates `tojson` it;
        the OpenAI backend turns it into a string)."""
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": dict(self.arguments)}}


def template_takes_tools(template: str | None) -> bool:
    """A chat template that renders a `tools` list (Qwen2.5, Llama 3.1, Hermes, …)."""
    return bool(template) and re.search(r"\btools\b", template) is not None


def _call_from(obj, raw: str) -> ToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return ToolCall(obj["name"], {}, problem=f"arguments are not JSON: {args[:80]!r}")
    if not isinstance(args, dict):
        return ToolCall(obj["name"], {}, problem=f"arguments are not an object: {raw[:80]!r}")
    return ToolCall(obj["name"], args)


def _json_objects(text: str) -> list:
    """The JSON values written one after another in `text` (whitespace between)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    text = text.strip()
    while i < len(text):
        value, end = decoder.raw_decode(text, i)
        out.append(value)
        i = end
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
    return out


def parse_tool_calls(text: str) -> list[ToolCall]:
    """The tool calls in a model's reply; [] when it wrote none. A call block whose JSON is
    broken gives a ToolCall with `problem` set (name "" when even that is unreadable)."""
    stripped = text.strip()
    blocks = re.findall(re.escape(OPEN_TAG) + r"(.*?)(?:" + re.escape(CLOSE_TAG) + r"|$)",
                        stripped, flags=re.S)
    if not blocks:
        if not stripped.startswith("{"):
            return []
        blocks = [stripped]
        bare = True
    else:
        bare = False
    calls: list[ToolCall] = []
    for block in blocks:
        block = block.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
        try:
            values = _json_objects(block)
        except ValueError:
            name = re.search(r'"name"\s*:\s*"([^"]+)"', block)
            if bare and name is None:
                return []  # a reply that merely starts with "{": text, not a call
            calls.append(ToolCall(name.group(1) if name else "", {},
                                  problem=f"the call is not valid JSON: {block[:80]!r}"))
            continue
        for value in values:
            call = _call_from(value, block)
            if call is None:
                if bare:  # an object beside a bare call (a result the model made up): dropped
                    continue
                call = ToolCall("", {}, problem=f"a call needs a name: {block[:80]!r}")
            calls.append(call)
    return calls  # bare JSON with no call in it: [] (the reply is text)


class ToolCallSniffer:
    """Splits a streamed reply into text to speak and tool calls: text before a `<tool_call>`
    tag is passed on, the tag and what follows are held for `finish()`. A reply that starts
    with "{" is held whole (a bare JSON call, as small models write it)."""

    def __init__(self):
        self._pending = ""
        self._held = ""
        self._capturing = False
        self._started = False

    @property
    def call_begun(self) -> bool:
        """The reply has started a tool call (a `<tool_call>` tag or a bare "{")."""
        return self._capturing

    def feed(self, delta: str) -> str:
        if self._capturing:
            self._held += delta
            return ""
        self._pending += delta
        at = self._pending.find(OPEN_TAG)
        if at >= 0:
            out, self._held = self._pending[:at], self._pending[at:]
            self._pending, self._capturing = "", True
            return out
        if not self._started:
            head = self._pending.lstrip()
            if not head:
                return ""
            if head.startswith("{") or OPEN_TAG.startswith(head[: len(OPEN_TAG)]):
                if head.startswith("{"):
                    self._held, self._pending, self._capturing = head, "", True
                return ""
            self._started = True
        keep = next((n for n in range(min(len(OPEN_TAG) - 1, len(self._pending)), 0, -1)
                     if OPEN_TAG.startswith(self._pending[-n:])), 0)
        out = self._pending[: len(self._pending) - keep]
        self._pending = self._pending[len(out):]
        return out

    def finish(self) -> tuple[str, list[ToolCall]]:
        """(text still to speak, the calls). Held text that is no call is given back."""
        calls = parse_tool_calls(self._held) if self._held else []
        rest = self._pending + ("" if calls else self._held)
        self._pending = self._held = ""
        return rest, calls
