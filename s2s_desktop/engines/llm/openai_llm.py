"""LLM over an OpenAI-compatible server (llama.cpp server, Ollama, LM Studio, vLLM, ...).

Streams /chat/completions as server-sent events. Setting the stop Event closes the
connection at once (a watcher thread shuts the socket), so the server stops generating too.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator

from ..base import LLMEngine, LLMOptions
from ..openai_http import (
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    Request,
    ServerError,
    abort_on,
    parse_base_url,
    plain_http_warning,
)
from .openai_tools import ToolCallFragments, api_messages

log = logging.getLogger(__name__)

WHAT = "LLM server"


class OpenAILLM(LLMEngine):
    name = "openai"
    quant_note = "The server decides."
    connect_timeout = CONNECT_TIMEOUT_S
    read_timeout = READ_TIMEOUT_S

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.endpoint = parse_base_url(settings.base_url, "llm.base_url")
        self.warnings: list[str] = []
        self.last_stats: dict = {}
        warning = plain_http_warning(self.endpoint, WHAT)
        if warning:
            log.warning(warning)
            self.warnings.append(warning)

    def load(self) -> None:
        # Nothing to load here; the first request tells whether the server is there.
        self.loaded = True

    def describe(self) -> str:
        return f"{self.settings.model or 'default model'} at {self.endpoint.base_url}"

    tool_calls_in_text = False  # the server parses them: they come as `tool_calls`

    def can_call_tools(self) -> bool:
        return True  # the server says so with an error if its model cannot

    def stream(self, messages: list[dict], stop: threading.Event,
               options: LLMOptions) -> Iterator[str]:
        if stop.is_set():
            return
        payload = {
            "messages": messages,
            "stream": True,
            "max_tokens": int(options.max_new_tokens),
            "temperature": float(options.temperature),
        }
        if self.settings.model:
            payload["model"] = self.settings.model
        if self.offered_tools:
            payload["tools"], payload["messages"] = self.offered_tools, api_messages(messages)
        calls = ToolCallFragments()
        request = Request(self.endpoint, WHAT, self.connect_timeout, self.read_timeout)
        done = abort_on(stop, request)
        t0 = time.monotonic()
        stats = {"tokens": 0, "first_token_s": None, "finish": None}
        self.last_stats = stats
        try:
            resp = request.open(
                "/chat/completions",
                json.dumps(payload).encode(),
                "application/json",
                self.settings.api_key,
            )
            if resp is None:  # stopped while connecting
                stats["finish"] = "cancelled"
                return
            for delta, finish, tool_parts in _sse_deltas(request):
                if stop.is_set():
                    break
                if finish:
                    stats["finish"] = finish
                calls.add(tool_parts)
                if delta:
                    stats["tokens"] += 1
                    if stats["first_token_s"] is None:
                        stats["first_token_s"] = time.monotonic() - t0
                    yield delta
            if not stop.is_set():
                yield from calls.calls()
        finally:
            done.set()
            request.close()
            stats["total_s"] = time.monotonic() - t0
            if stop.is_set():
                stats["finish"] = "cancelled"


def _sse_deltas(request: Request) -> Iterator[tuple[str, str | None, list]]:
    """(text delta, finish_reason, tool-call fragments) from an SSE body; a plain JSON body (a server that ignores
    "stream") is taken as one delta."""
    data_lines: list[str] = []
    first = True
    while True:
        raw = request.readline()
        if not raw:
            if data_lines:
                yield from _event("\n".join(data_lines))
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if first and line.startswith("{"):
            rest = line + "".join(iter(lambda: request.readline().decode("utf-8", "replace"), ""))
            yield from _event(rest)
            return
        first = False
        if not line:  # blank line ends an event
            if data_lines:
                event, data_lines = "\n".join(data_lines), []
                if event.strip() == "[DONE]":
                    return
                yield from _event(event)
        elif line.startswith("data:"):
            data_lines.append(line[5:].lstrip(" "))
        # other fields (event:, id:, retry:) and comments (":") carry nothing we need


def _event(data: str) -> Iterator[tuple[str, str | None, list]]:
    if data.strip() == "[DONE]":
        return
    try:
        chunk = json.loads(data)
    except ValueError:
        raise ServerError(f"the {WHAT} sent something that is not JSON: {data[:120]!r}") from None
    if not isinstance(chunk, dict):
        return
    if "error" in chunk:
        err = chunk["error"]
        message = err.get("message", err) if isinstance(err, dict) else err
        raise ServerError(f"the {WHAT} failed mid-reply: {message}")
    for choice in chunk.get("choices") or []:
        part = choice.get("delta") or choice.get("message") or {}
        text = part.get("content") or choice.get("text") or ""
        yield text, choice.get("finish_reason"), part.get("tool_calls") or []
