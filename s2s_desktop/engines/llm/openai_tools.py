"""Tool calls over the OpenAI chat API: the `tools` a request lists, messages with their
arguments as JSON strings (as the API wants them), and the streamed `tool_calls` fragments
put back together into ToolCall records."""

from __future__ import annotations

import json

from .tool_calls import ToolCall, _call_from


def api_messages(messages: list[dict]) -> list[dict]:
    """Chat messages as the API takes them: a call's arguments as a JSON string."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            m = {**m, "tool_calls": [
                {**c, "function": {**c["function"], "arguments": json.dumps(
                    c["function"].get("arguments") or {}, ensure_ascii=False)}}
                for c in m["tool_calls"]]}
        out.append(m)
    return out


class ToolCallFragments:
    """Collects `delta.tool_calls` pieces by index (name and id come first, the arguments'
    JSON in pieces after)."""

    def __init__(self):
        self._parts: dict[int, dict] = {}

    def add(self, fragments: list[dict]) -> None:
        for frag in fragments or []:
            part = self._parts.setdefault(int(frag.get("index", len(self._parts))),
                                          {"id": "", "name": "", "arguments": ""})
            part["id"] = frag.get("id") or part["id"]
            fn = frag.get("function") or {}
            part["name"] += fn.get("name") or ""
            args = fn.get("arguments")
            part["arguments"] += args if isinstance(args, str) else json.dumps(args or {})

    def calls(self) -> list[ToolCall]:
        out = []
        for _, part in sorted(self._parts.items()):
            call = _call_from({"name": part["name"], "arguments": part["arguments"]},
                              part["arguments"]) or ToolCall(part["name"], {},
                                                             problem="the call has no name")
            out.append(ToolCall(call.name, call.arguments, id=part["id"] or call.id,
                                problem=call.problem))
        return out
