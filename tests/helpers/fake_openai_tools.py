"""A tiny OpenAI-compatible chat server for the spoken tool tests: it streams a `tool_calls`
reply when the question asks for a tool it was offered, and a short answer once it has read
the tool's result, the way a tool-capable model behind `llm.backend=openai` does. Scripted,
so the app's real path (the OpenAI backend, the tool rounds, MCP, permission, TTS, the
speaker) is tested without a slow real model. Every request is kept with the monotonic time it
came (the same clock as the speaker recording's).
"""

from __future__ import annotations

import http.server
import json
import threading
import time

# (words in the question, tool, arguments): the first whose words are heard and whose tool
# is offered is called
CALLS = (
    (("note", "save"), "save_note", {"text": "buy milk"}),  # "save an Internet S by milk"
    (("shelf", "books", "count"), "shelf_slow", {"seconds": 3}),
)
NO_TOOL_ANSWER = "I can save notes and count the books on the shelf."


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def reply_to(payload: dict) -> list[bytes]:
    """The streamed chunks for one request."""
    messages = payload["messages"]
    last = messages[-1]
    offered = {t["function"]["name"] for t in payload.get("tools", [])}
    if last["role"] == "tool":
        result = str(last.get("content", ""))
        text = "I did not do that." if result.startswith("Error") else f"All done: {result}."
        return [_chunk({"content": text}, "stop")]
    heard = str(last.get("content", "")).lower()
    for words, name, arguments in CALLS:
        if name in offered and any(w in heard for w in words):
            call = {"index": 0, "id": f"call-{name}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)}}
            return [_chunk({"tool_calls": [call]}, "tool_calls")]
    return [_chunk({"content": NO_TOOL_ANSWER}, "stop")]


class FakeToolModel:
    """The server on a free local port, in a thread; `requests` holds (time, payload)."""

    def __init__(self):
        self.requests: list[tuple[float, dict]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append((time.monotonic(), payload))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in reply_to(payload):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def since(self, t0: float) -> list[tuple[float, dict]]:
        return [(t, p) for t, p in self.requests if t >= t0]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
