"""A small stand-in for the Hugging Face Hub on loopback, paced so a download takes long enough
to watch (and cancel): the repo API, `/resolve/` with Range, the Hub's commit and sha256
headers. Files are bytes, or a size whose bytes are made on the fly (for big, fake downloads).

    hub = SlowHub({"org/name": {"model.bin": data}}, rate_bps=2_000_000).start()
    os.environ["HF_ENDPOINT"] = hub.url
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
PIECE = 16 * 1024


def made_bytes(start: int, end: int) -> bytes:
    """Bytes [start, end) of a generated file: a repeating pattern, cheap at any offset."""
    block = bytes(range(251)) * 66  # 16566 bytes; 251 is prime, so the pattern never aligns
    out = bytearray()
    pos = start
    while pos < end:
        i = pos % len(block)
        take = min(end - pos, len(block) - i)
        out += block[i : i + take]
        pos += take
    return bytes(out)


class SlowHub:
    def __init__(self, repos: dict[str, dict[str, bytes | int]], rate_bps: float | None = None):
        self.repos = repos
        self.rate_bps = rate_bps
        self.flowing = threading.Event()  # cleared: the server stops sending, mid-file
        self.flowing.set()
        self.requests: list[dict] = []
        self.server: ThreadingHTTPServer | None = None
        self.url = ""

    def size(self, repo: str, name: str) -> int:
        f = self.repos[repo][name]
        return f if isinstance(f, int) else len(f)

    def read(self, repo: str, name: str, start: int, end: int) -> bytes:
        f = self.repos[repo][name]
        return made_bytes(start, end) if isinstance(f, int) else f[start:end]

    def sha256(self, repo: str, name: str) -> str | None:
        f = self.repos[repo][name]
        return None if isinstance(f, int) else hashlib.sha256(f).hexdigest()

    def start(self) -> SlowHub:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def stop(self) -> None:
        self.flowing.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def lfs_info(sha256: str, size: int) -> dict:
    """A sibling's "lfs" entry as the Hub sends it (huggingface_hub requires pointerSize)."""
    return {"sha256": sha256, "size": size, "pointerSize": 134}


def send_repo_api(handler: BaseHTTPRequestHandler, repo: str, siblings: list[dict], commit: str):
    """The Hub API's answer for a repo revision: its commit and its files."""
    body = json.dumps({"id": repo, "sha": commit, "siblings": siblings}).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _handler(hub: SlowHub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            path = urllib.parse.unquote(self.path.split("?")[0])
            hub.requests.append({"path": path, "range": self.headers.get("Range")})
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"] and len(parts) >= 6:
                return self.api("/".join(parts[2:4]))
            if len(parts) >= 5 and parts[2] == "resolve":
                return self.file("/".join(parts[:2]), "/".join(parts[4:]))
            return self.send_error(404)

        def api(self, repo):
            if repo not in hub.repos:
                return self.send_error(404)
            siblings = []
            for name in hub.repos[repo]:
                s = {"rfilename": name, "size": hub.size(repo, name)}
                if hub.sha256(repo, name):
                    s["lfs"] = lfs_info(hub.sha256(repo, name), hub.size(repo, name))
                siblings.append(s)
            send_repo_api(self, repo, siblings, COMMIT)

        def file(self, repo, name):
            if name not in hub.repos.get(repo, {}):
                return self.send_error(404)
            size = hub.size(repo, name)
            rng = self.headers.get("Range")
            start = int(rng.split("=")[1].split("-")[0]) if rng else 0
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(size - start))
            self.send_header("X-Repo-Commit", COMMIT)
            if hub.sha256(repo, name):
                self.send_header("X-Linked-Etag", f'"{hub.sha256(repo, name)}"')
            self.end_headers()
            t0, sent = time.monotonic(), 0
            try:
                for pos in range(start, size, PIECE):
                    while not hub.flowing.wait(0.05):
                        pass
                    piece = hub.read(repo, name, pos, min(size, pos + PIECE))
                    self.wfile.write(piece)
                    sent += len(piece)
                    if hub.rate_bps:  # pace to the rate, measured from the first byte
                        ahead = sent / hub.rate_bps - (time.monotonic() - t0)
                        if ahead > 0:
                            time.sleep(ahead)
            except OSError:
                pass  # the client went away (cancel)

    return Handler
