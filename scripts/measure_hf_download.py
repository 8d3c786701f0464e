"""What huggingface_hub's own downloader does with a cancelled or stalled transfer, measured on
loopback against a Hub-shaped server (HEAD + /resolve/ redirect + a paced CDN with Range).

    python scripts/measure_hf_download.py [--size-mb 24] [--rate-mbps 4]

Prints, for `hf_hub_download` with a progress hook (`tqdm_class`) that cancels by raising:
how long after the cancel the transfer stopped, what is left in the cache, and which byte the
next download starts from; then the same for our own `download_file`. docs/models.md quotes it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO, NAME = "org/model", "model.bin"


class Cancelled(Exception):
    pass


def serve(data: bytes, rate_bps: float, requests: list):
    sha = hashlib.sha256(data).hexdigest()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _resolve(self, body: bool):
            port = self.server.server_address[1]
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{port}/cdn/{NAME}")  # another host
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{sha}"')
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self):
            self._resolve(False)

        def do_GET(self):
            if "/resolve/" in self.path:
                return self._resolve(True)
            rng = self.headers.get("Range")
            requests.append(rng)
            start = int(rng.split("=")[1].split("-")[0]) if rng else 0
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            t0, sent = time.monotonic(), 0
            try:
                for pos in range(start, len(data), 16384):
                    piece = data[pos : pos + 16384]
                    self.wfile.write(piece)
                    sent += len(piece)
                    ahead = sent / rate_bps - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def measure_hf(url: str, cache: Path, requests: list, cancel_after: int) -> dict:
    from huggingface_hub import hf_hub_download
    from tqdm.auto import tqdm

    cancel = threading.Event()
    state = {"done": 0, "cancel_at": None}

    class Hook(tqdm):  # the progress hook: the only place a caller's code runs mid-transfer
        def update(self, n=1):
            state["done"] += n or 0
            if cancel.is_set():
                raise Cancelled
            return super().update(n)

    threading.Timer(cancel_after, lambda: (cancel.set(), state.update(cancel_at=time.monotonic()))).start()
    try:
        hf_hub_download(REPO, NAME, cache_dir=cache, endpoint=url, token=False, tqdm_class=Hook)
    except Cancelled:
        pass
    stopped = time.monotonic()
    left = sorted(p.name for p in (cache / "models--org--model" / "blobs").iterdir())
    left_bytes = sum((cache / "models--org--model" / "blobs" / n).stat().st_size for n in left)
    requests.clear()
    hf_hub_download(REPO, NAME, cache_dir=cache, endpoint=url, token=False)
    return {
        "stop_after_cancel_s": round(stopped - state["cancel_at"], 2),
        "progress_reports_before_cancel": state["done"],
        "left_in_blobs": left,
        "left_bytes": left_bytes,
        "next_download_range": requests[0] if requests else None,
    }


def measure_ours(url: str, folder: Path, requests: list, cancel_after: int) -> dict:
    from s2s_desktop.models.download import DownloadCancelled, download_file

    cancel = threading.Event()
    state = {}
    threading.Timer(cancel_after, lambda: (cancel.set(), state.update(t=time.monotonic()))).start()
    dest = folder / NAME
    try:
        download_file(f"{url}/{REPO}/resolve/main/{NAME}", dest, cancel=cancel)
    except DownloadCancelled:
        pass
    stopped = time.monotonic()
    part = dest.with_name(NAME + ".part")
    left = part.stat().st_size if part.exists() else 0
    requests.clear()
    download_file(f"{url}/{REPO}/resolve/main/{NAME}", dest)
    return {
        "stop_after_cancel_s": round(stopped - state["t"], 2),
        "left_bytes": left,
        "next_download_range": requests[0] if requests else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=float, default=24)
    ap.add_argument("--rate-mbps", type=float, default=4)
    ap.add_argument("--cancel-after", type=float, default=2.5)
    args = ap.parse_args()
    data = random.Random(1).randbytes(int(args.size_mb * 1e6))
    requests: list = []
    server, url = serve(data, args.rate_mbps * 1e6, requests)
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    import huggingface_hub

    print(f"huggingface_hub {huggingface_hub.__version__}; {args.size_mb:g} MB file at "
          f"{args.rate_mbps:g} MB/s, cancel after {args.cancel_after:g} s")
    with tempfile.TemporaryDirectory() as tmp:
        print("hf_hub_download:", measure_hf(url, Path(tmp) / "hub", requests, args.cancel_after))
        print("download_file:  ", measure_ours(url, Path(tmp), requests, args.cancel_after))
    server.shutdown()


if __name__ == "__main__":
    main()
