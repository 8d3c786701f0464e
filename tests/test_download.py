"""The downloader against a real HTTP server on loopback that serves real bytes with Range
support, cuts connections, ignores Range or stalls on demand; and the whole Hub path
(HF_ENDPOINT → HF cache layout → list/verify/delete) through the model manager."""

from __future__ import annotations

import hashlib
import json
import random
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from s2s_desktop.models import cache, download
from s2s_desktop.models.catalog import Catalog, CatalogEntry, CatalogFile
from s2s_desktop.models.download import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
    NotEnoughSpace,
    download_file,
)
from s2s_desktop.models.manager import ModelManager
from s2s_desktop.models.resolve import package_path, resolve_model
from tests.helpers.slow_hub import lfs_info, send_repo_api

COMMIT = "0123456789abcdef0123456789abcdef01234567"
BIG = random.Random(7).randbytes(3_000_000)  # a few MB of real bytes
REAL = (package_path("faster_whisper") / "assets" / "silero_vad_v6.onnx").read_bytes()
CONFIG = json.dumps({"model_type": "whisper", "note": "a small git-stored file"}).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """What the client sees of huggingface.co: the API, /resolve/ redirects, a CDN with Range."""

    def __init__(self):
        self.repos: dict[str, dict[str, bytes]] = {}
        self.lfs: set[str] = set()  # file names announced with their sha256 (X-Linked-Etag)
        self.requests: list[dict] = []
        self.cut_after: dict[str, int] = {}  # file: close the socket after N body bytes, once
        self.stall_after: dict[str, int] = {}  # file: stop sending after N bytes, once
        self.corrupt: set[str] = set()  # files whose bytes the CDN flips
        self.ignore_range = False
        self.api = True
        self.cdn_host = ""  # redirect to another host name (as the Hub's CDN is)
        self.release = threading.Event()  # ends stalls when the test is over
        self.lock = threading.Lock()

    def reset(self):
        self.requests.clear()
        self.cut_after.clear()
        self.stall_after.clear()
        self.corrupt.clear()
        self.ignore_range, self.api, self.cdn_host = False, True, ""

    def seen(self, name: str) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("/" + name) and r["cdn"]]


def make_handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            proxied = self.path.startswith("http://")  # an absolute URI: we are the proxy
            path = urllib.parse.urlsplit(self.path).path if proxied else self.path.split("?")[0]
            with hub.lock:
                hub.requests.append(
                    {
                        "path": path,
                        "range": self.headers.get("Range"),
                        "cdn": path.startswith("/cdn/"),
                        "auth": self.headers.get("Authorization"),
                        "proxied": proxied,
                        "host": self.headers.get("Host"),
                    }
                )
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
                return self.api(f"{parts[2]}/{parts[3]}")
            if parts[0] == "cdn":
                return self.cdn("/".join(parts[1:3]), "/".join(parts[3:]))
            if len(parts) >= 5 and parts[2] == "resolve":
                repo, name = "/".join(parts[:2]), "/".join(parts[4:])
                if name not in hub.repos.get(repo, {}):
                    return self.send_error(404)
                data = hub.repos[repo][name]
                self.send_response(302)  # as the Hub does: metadata here, bytes on the CDN
                where = (
                    f"http://{hub.cdn_host}:{self.server.server_address[1]}" if hub.cdn_host else ""
                )
                self.send_header("Location", f"{where}/cdn/{repo}/{name}")
                self.send_header("X-Repo-Commit", COMMIT)
                if name in hub.lfs:
                    self.send_header("X-Linked-Etag", f'"{sha256(data)}"')
                    self.send_header("X-Linked-Size", str(len(data)))
                else:
                    self.send_header("ETag", f'"{git_oid(data)}"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            return self.send_error(404)

        def api(self, repo):
            if not hub.api or repo not in hub.repos:
                return self.send_error(404)
            siblings = []
            for name, data in hub.repos[repo].items():
                s = {"rfilename": name, "size": len(data), "blobId": git_oid(data)}
                if name in hub.lfs:
                    s["lfs"] = lfs_info(sha256(data), len(data))
                siblings.append(s)
            send_repo_api(self, repo, siblings, COMMIT)

        def cdn(self, repo, name):
            data = hub.repos.get(repo, {}).get(name)
            if data is None:
                return self.send_error(404)
            rng = self.headers.get("Range")
            with hub.lock:
                cut = hub.cut_after.pop(name, None)
                stall = hub.stall_after.pop(name, None)
            start = 0
            if rng and not hub.ignore_range:
                start = int(rng.split("=")[1].split("-")[0])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            body = data[start:]
            if name in hub.corrupt:
                body = bytes([body[0] ^ 0xFF]) + body[1:]
            limit = cut if cut is not None else stall
            try:
                for i in range(0, len(body), 64 * 1024):
                    piece = body[i : i + 64 * 1024]
                    if limit is not None and i + len(piece) > limit:
                        self.wfile.write(piece[: max(0, limit - i)])
                        self.wfile.flush()
                        if stall is not None:
                            hub.release.wait(5)  # bounded: a silent server, not a dead test
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return None
                    self.wfile.write(piece)
            except OSError:
                pass  # the client went away (cancel)
            return None

    return Handler


@pytest.fixture(scope="module")
def hub():
    h = FakeHub()
    h.repos["test-org/tiny-whisper"] = {"model.bin": BIG, "config.json": CONFIG}
    h.repos["test-org/real"] = {"silero_vad_v6.onnx": REAL}
    h.lfs = {"model.bin", "silero_vad_v6.onnx"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(h))
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    h.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield h
    h.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def env(hub, tmp_path, monkeypatch):
    hub.reset()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("S2S_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("S2S_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def url(hub, repo, name):
    return f"{hub.url}/{repo}/resolve/main/{name}"


def test_fresh_download_reports_progress_and_places_the_file(hub, tmp_path):
    seen = []
    dest = tmp_path / "out" / "model.bin"
    result = download_file(
        url(hub, "test-org/tiny-whisper", "model.bin"),
        dest,
        expected_sha256=sha256(BIG),
        progress=seen.append,
    )
    assert dest.read_bytes() == BIG and result.sha256 == sha256(BIG)
    assert not dest.with_name("model.bin.part").exists()
    assert seen[-1].done == seen[-1].total == len(BIG)
    assert all(a.done <= b.done for a, b in zip(seen, seen[1:], strict=False))
    assert seen[-1].speed_bps > 0


def test_a_cut_connection_resumes_with_a_range_request(hub, tmp_path):
    hub.cut_after["model.bin"] = 1_000_000
    dest = tmp_path / "model.bin"
    download_file(
        url(hub, "test-org/tiny-whisper", "model.bin"), dest, expected_sha256=sha256(BIG), retries=2
    )
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == sha256(BIG)
    first, second = hub.seen("model.bin")
    assert first["range"] is None
    resumed_at = int(second["range"].split("=")[1].rstrip("-"))
    assert 0 < resumed_at <= 1_000_000  # only the missing bytes were asked for again


def test_a_cut_without_retries_keeps_the_part_and_a_later_call_resumes(hub, tmp_path):
    hub.cut_after["silero_vad_v6.onnx"] = 500_000
    dest = tmp_path / "vad.onnx"
    with pytest.raises(DownloadError, match="resume"):
        download_file(
            url(hub, "test-org/real", "silero_vad_v6.onnx"),
            dest,
            expected_sha256=sha256(REAL),
            retries=0,
        )
    part = tmp_path / "vad.onnx.part"
    kept = part.stat().st_size
    assert not dest.exists() and 0 < kept <= 500_000
    download_file(
        url(hub, "test-org/real", "silero_vad_v6.onnx"), dest, expected_sha256=sha256(REAL)
    )
    assert dest.read_bytes() == REAL and not part.exists()
    assert hub.seen("silero_vad_v6.onnx")[-1]["range"] == f"bytes={kept}-"


def test_a_server_that_ignores_range_restarts_cleanly_from_zero(hub, tmp_path):
    dest = tmp_path / "model.bin"
    (tmp_path / "model.bin.part").write_bytes(b"\xff" * 700_000)  # stale bytes from before
    hub.ignore_range = True
    download_file(url(hub, "test-org/tiny-whisper", "model.bin"), dest, expected_sha256=sha256(BIG))
    assert dest.read_bytes() == BIG  # not the stale prefix + the whole file
    assert hub.seen("model.bin")[0]["range"] == "bytes=700000-"


def test_a_wrong_checksum_leaves_nothing_that_could_pass_as_valid(hub, tmp_path):
    dest = tmp_path / "model.bin"
    with pytest.raises(ChecksumMismatch, match="deleted"):
        download_file(
            url(hub, "test-org/tiny-whisper", "model.bin"), dest, expected_sha256="0" * 64
        )
    assert list(tmp_path.iterdir()) == []  # no final file, no .part to resume from


def test_the_hub_announced_digest_rejects_corrupt_bytes(hub, tmp_path):
    hub.corrupt.add("silero_vad_v6.onnx")  # the redirect announces REAL's sha256; the CDN lies
    with pytest.raises(ChecksumMismatch):
        download_file(url(hub, "test-org/real", "silero_vad_v6.onnx"), tmp_path / "v.onnx")
    assert list(tmp_path.iterdir()) == []


def test_cancel_keeps_the_part_and_the_next_download_resumes(hub, tmp_path):
    cancel = threading.Event()
    dest = tmp_path / "model.bin"

    def stop_early(p):
        if p.done > 0:  # the first progress report: some bytes are on disk
            cancel.set()

    with pytest.raises(DownloadCancelled, match="resume"):
        download_file(
            url(hub, "test-org/tiny-whisper", "model.bin"),
            dest,
            expected_sha256=sha256(BIG),
            progress=stop_early,
            cancel=cancel,
        )
    part = tmp_path / "model.bin.part"
    kept = part.stat().st_size
    assert not dest.exists() and 0 < kept < len(BIG)
    download_file(url(hub, "test-org/tiny-whisper", "model.bin"), dest, expected_sha256=sha256(BIG))
    assert dest.read_bytes() == BIG
    assert hub.seen("model.bin")[-1]["range"] == f"bytes={kept}-"


def test_cancel_wakes_a_read_that_is_stalled(hub, tmp_path):
    hub.stall_after["model.bin"] = 300_000
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(DownloadCancelled):
        download_file(
            url(hub, "test-org/tiny-whisper", "model.bin"),
            tmp_path / "m.bin",
            cancel=cancel,
            read_timeout=20,
        )
    assert time.monotonic() - t0 < 3  # not the 20 s stall timeout


def test_a_stalled_server_is_a_cut_then_resumed(hub, tmp_path):
    hub.stall_after["model.bin"] = 300_000
    dest = tmp_path / "m.bin"
    t0 = time.monotonic()
    download_file(
        url(hub, "test-org/tiny-whisper", "model.bin"),
        dest,
        expected_sha256=sha256(BIG),
        read_timeout=0.5,
        retries=1,
    )
    assert dest.read_bytes() == BIG and time.monotonic() - t0 < 5
    assert hub.seen("model.bin")[-1]["range"] == "bytes=300000-"


def test_an_unreachable_server_fails_fast_and_names_the_import_path(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    t0 = time.monotonic()
    with pytest.raises(DownloadError, match="models import PATH"):
        download_file(f"http://127.0.0.1:{port}/x/y/resolve/main/f", tmp_path / "f")
    assert time.monotonic() - t0 < 3


def test_a_server_that_never_answers_times_out(tmp_path):
    with socket.socket() as listener:  # accepts connections (backlog) but never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(DownloadError, match="models import"):
            download_file(
                f"http://127.0.0.1:{port}/f", tmp_path / "f", connect_timeout=0.5, retries=0
            )
        assert time.monotonic() - t0 < 3


def test_not_enough_space_is_refused_before_writing(hub, tmp_path, monkeypatch):
    import collections

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(download.shutil, "disk_usage", lambda p: usage(10**9, 10**9, 1000))
    with pytest.raises(NotEnoughSpace, match="free some space"):
        download_file(url(hub, "test-org/tiny-whisper", "model.bin"), tmp_path / "m.bin")
    assert not (tmp_path / "m.bin").exists()
    assert not (tmp_path / "m.bin.part").exists()


# ---------------------------------------------------------------- the whole Hub path


def tiny_catalog(sha: str | None = None) -> Catalog:
    return Catalog(
        [
            CatalogEntry(
                id="tiny-whisper-test",
                name="tiny test",
                stage="stt",
                backend="faster-whisper",
                source="hf",
                repo="test-org/tiny-whisper",
                revision="main",
                files=(CatalogFile("model.bin", len(BIG), sha), CatalogFile("config.json")),
                size_bytes=len(BIG) + len(CONFIG),
                size_approx=False,
                settings={"stt.model": "test-org/tiny-whisper"},
            )
        ]
    )


def test_manager_download_fills_the_hf_cache_that_other_hf_tools_read(hub, env):
    from huggingface_hub import try_to_load_from_cache

    from s2s_desktop import config

    settings = config.Settings()
    settings.stt.model = "test-org/tiny-whisper"
    mgr = ModelManager(catalog=tiny_catalog(sha256(BIG)), settings=settings)
    before = {m.id: m for m in mgr.list()}["tiny-whisper-test"]
    assert not before.installed and before.used_by_settings
    seen = []
    folder = mgr.download("tiny-whisper-test", progress=seen.append)

    hub_dir = env / "hf" / "hub"
    repo = hub_dir / "models--test-org--tiny-whisper"
    assert folder == repo / "snapshots" / COMMIT
    assert (repo / "refs" / "main").read_text() == COMMIT
    assert (repo / "blobs" / sha256(BIG)).read_bytes() == BIG
    assert (repo / "blobs" / git_oid(CONFIG)).read_bytes() == CONFIG
    assert (folder / "model.bin").is_symlink()
    assert try_to_load_from_cache("test-org/tiny-whisper", "model.bin", cache_dir=hub_dir) == str(
        folder / "model.bin"
    )
    assert resolve_model("test-org/tiny-whisper", "stt") == folder
    assert seen[-1].done == seen[-1].total == len(BIG) + len(CONFIG)

    m = {m.id: m for m in mgr.list()}["tiny-whisper-test"]
    assert m.installed and m.verified is True and m.path == folder
    assert m.to_json()["installed"] is True and m.size_on_disk == len(BIG) + len(CONFIG)
    assert mgr.verify("tiny-whisper-test").ok is True

    with open(repo / "blobs" / sha256(BIG), "r+b") as f:  # bit rot
        f.seek(12345)
        f.write(b"\x00")
    report = mgr.verify("tiny-whisper-test")
    assert report.ok is False and [f.name for f in report.bad] == ["model.bin"]
    assert {m.id: m for m in mgr.list()}["tiny-whisper-test"].verified is False

    removed = mgr.delete("tiny-whisper-test")
    assert removed == [repo] and not repo.exists()
    assert not {m.id: m for m in mgr.list()}["tiny-whisper-test"].installed


def test_manager_download_without_the_api_uses_the_catalog_and_hub_headers(hub, env):
    hub.api = False  # a mirror that only serves /resolve/
    hub.cut_after["model.bin"] = 2_000_000
    mgr = ModelManager(catalog=tiny_catalog(None))
    folder = mgr.download("tiny-whisper-test")
    assert folder.name == COMMIT  # from the X-Repo-Commit header of the redirect
    assert (folder / "model.bin").read_bytes() == BIG
    assert hub.seen("model.bin")[-1]["range"] is not None
    m = {m.id: m for m in mgr.list()}["tiny-whisper-test"]
    assert m.installed and m.verified is True  # model.bin checked against X-Linked-Etag
    # config.json has no digest here: verify falls back to its blob name (git oid)
    assert mgr.verify("tiny-whisper-test").ok is True


def test_a_wrong_catalog_checksum_leaves_the_model_not_installed(hub, env):
    mgr = ModelManager(catalog=tiny_catalog("f" * 64))
    with pytest.raises(ChecksumMismatch):
        mgr.download("tiny-whisper-test")
    m = {m.id: m for m in mgr.list()}["tiny-whisper-test"]
    assert not m.installed
    blobs = env / "hf" / "hub" / "models--test-org--tiny-whisper" / "blobs"
    assert [p.name for p in blobs.iterdir()] == []


def test_a_repo_id_outside_the_catalog_downloads_the_named_file(hub, env):
    mgr = ModelManager(catalog=Catalog([]))
    folder = mgr.download("test-org/real", files=["silero_vad_v6.onnx"])
    assert (folder / "silero_vad_v6.onnx").read_bytes() == REAL
    listed = {m.id: m for m in mgr.list()}["test-org/real"]
    assert listed.source == "cache" and listed.installed and listed.stage == "vad"
    assert mgr.delete("test-org/real") and not cache.repo_dir("test-org/real").exists()


def test_proxies_from_the_environment_are_used(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", hub.url)  # the fake hub also answers as a forward proxy
    monkeypatch.setenv("http_proxy", hub.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    dest = tmp_path / "vad.onnx"
    download_file("http://hub.invalid/test-org/real/resolve/main/silero_vad_v6.onnx", dest)
    assert dest.read_bytes() == REAL
    assert [r["host"] for r in hub.requests] == ["hub.invalid", "hub.invalid"]
    assert all(r["proxied"] for r in hub.requests)


def test_the_token_goes_to_the_hub_but_not_to_the_cdn_host(hub, env, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    hub.cdn_host = "localhost"  # another host name than 127.0.0.1
    ModelManager(catalog=tiny_catalog(sha256(BIG))).download("tiny-whisper-test")
    api = [r for r in hub.requests if r["path"].startswith("/api/")]
    resolve = [r for r in hub.requests if "/resolve/" in r["path"]]
    cdn = [r for r in hub.requests if r["cdn"]]
    assert api and resolve and cdn
    assert all(r["auth"] == "Bearer hf_secret" for r in api + resolve)
    assert all(r["auth"] is None and r["host"].startswith("localhost") for r in cdn)


def test_https_trusts_the_system_certificate_store(hub, tmp_path, monkeypatch):
    """A CA the OS trusts (here via SSL_CERT_FILE, which truststore honours on Linux) works;
    a certificate nobody trusts is a clear error."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(hub))
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    try:
        https = f"https://127.0.0.1:{server.server_address[1]}"
        file_url = f"{https}/test-org/real/resolve/main/silero_vad_v6.onnx"
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        download_file(file_url, tmp_path / "ok.onnx")
        assert (tmp_path / "ok.onnx").read_bytes() == REAL
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
        with pytest.raises(DownloadError, match="certificate this computer does not trust"):
            download_file(file_url, tmp_path / "bad.onnx", retries=0)
    finally:
        server.shutdown()
        server.server_close()


def test_offline_mode_refuses_at_once_with_the_import_hint(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DownloadError, match="models import PATH"):
        ModelManager(catalog=tiny_catalog()).download("tiny-whisper-test")
    assert hub.requests == []
