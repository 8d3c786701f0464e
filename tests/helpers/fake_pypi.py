"""A stand-in for PyPI's JSON API on loopback with tiny wheels shaped like NVIDIA's CUDA ones
(fake .so/.dll files under nvidia/<lib>/...), for the cuda package and its Settings group.

    index = FakeIndex()
    publish(index)  # cuBLAS and cuDNN, Linux and Windows wheels
    os.environ[cuda.wheels.INDEX_ENV] = index.url
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from s2s_desktop import cuda

LINUX_TAG = "manylinux_2_27_x86_64"
# what an install of the published Linux wheels leaves: no headers, no __init__.py, no NVBLAS
INSTALLED_LINUX = {
    "libcublas.so.12",
    "libcublasLt.so.12",
    "libcudnn.so.9",
    "libcudnn_ops.so.9",
    "licenses/nvidia-cublas-cu12-License.txt",
    "licenses/nvidia-cudnn-cu12-License.txt",
    "manifest.json",
}


class FakeIndex:
    """`/pypi/<name>/json` like PyPI's, and `/packages/<file>` with Range support. A path in
    `cut` gets its next response stopped half way (the connection closes); one in `hold` sends
    half, then waits for its Event (so a test can cancel mid-download at a known point)."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.json: dict[str, dict] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.cut: set[str] = set()
        self.hold: dict[str, threading.Event] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def release(
        self, package: cuda.wheels.Package, wheels: dict[str, bytes], relative=False, sha=None
    ):
        entries = []
        for name, data in wheels.items():
            self.files[f"/packages/{name}"] = data
            entries.append(
                {
                    "filename": name,
                    "packagetype": "bdist_wheel",
                    # the real mirror answers with URLs relative to the JSON's own
                    "url": f"../../packages/{name}" if relative else f"{self.url}/packages/{name}",
                    "size": len(data),
                    "digests": {"sha256": sha or hashlib.sha256(data).hexdigest()},
                    "yanked": False,
                }
            )
        self.json[package.name] = {
            "info": {"name": package.name, "version": "99.0"},
            "releases": {package.version: entries, "0.0.1.dev5": []},
            "urls": [],
        }

    def wheel_gets(self) -> list[tuple[str, str | None]]:
        return [r for r in self.requests if r[0].startswith("/packages/")]

    def stop(self):
        for event in self.hold.values():
            event.set()
        self.server.shutdown()
        self.server.server_close()


def _handler(index: FakeIndex):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            index.requests.append((self.path, self.headers.get("Range")))
            if self.path.startswith("/pypi/"):
                name = self.path.split("/")[2]
                if name not in index.json:
                    return self.send_error(404)
                body = json.dumps(index.json[name]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self.wfile.write(body)
            data = index.files.get(self.path)
            if data is None:
                return self.send_error(404)
            start = 0
            rng = self.headers.get("Range")
            if rng:
                start = int(rng.split("=")[1].split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            body = data[start:]
            if self.path in index.cut:
                index.cut.discard(self.path)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            held = index.hold.get(self.path)
            if held is not None:
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                held.wait(60)
                body = body[len(body) // 2 :]
            try:
                self.wfile.write(body)
            except OSError:  # the client hung up (a cancel): nothing to report
                self.close_connection = True

    return Handler


def make_wheel(
    package: cuda.wheels.Package, lib: str, libs: dict[str, bytes], windows=False
) -> bytes:
    """A wheel shaped like NVIDIA's: headers, __init__.py files, libraries, licence, METADATA."""
    dist = f"{package.name.replace('-', '_')}-{package.version}.dist-info"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("nvidia/__init__.py", "")
        z.writestr(f"nvidia/{lib}/__init__.py", "")
        z.writestr(f"nvidia/{lib}/include/{lib}.h", "/* header */\n")
        for name, data in libs.items():
            z.writestr(f"nvidia/{lib}/{'bin' if windows else 'lib'}/{name}", data)
        z.writestr(f"{dist}/License.txt", f"licence of {package.name}\n")
        z.writestr(f"{dist}/METADATA", f"Name: {package.name}\nVersion: {package.version}\n")
        z.writestr(f"{dist}/RECORD", "")
    return buf.getvalue()


def wheel_name(package: cuda.wheels.Package, tag: str) -> str:
    return f"{package.name.replace('-', '_')}-{package.version}-py3-none-{tag}.whl"


def blob(n: int, seed: int) -> bytes:
    return hashlib.sha256(str(seed).encode()).digest() * (n // 32)


CUBLAS_LIBS = {
    "libcublas.so.12": blob(96_000, 1),
    "libcublasLt.so.12": blob(160_000, 2),
    "libnvblas.so.12": blob(3_200, 3),  # must never be kept
}
CUDNN_LIBS = {"libcudnn.so.9": blob(6_400, 4), "libcudnn_ops.so.9": blob(32_000, 5)}


def publish(index: FakeIndex, cublas_libs=None, relative=True, sha=None) -> dict[str, bytes]:
    """Both pinned packages, each with a Linux and a Windows wheel; returns the Linux wheels."""
    cublas = make_wheel(cuda.wheels.CUBLAS, "cublas", cublas_libs or CUBLAS_LIBS)
    cudnn = make_wheel(cuda.wheels.CUDNN, "cudnn", CUDNN_LIBS)
    win = make_wheel(cuda.wheels.CUBLAS, "cublas", {"cublas64_12.dll": b"MZ" * 100}, windows=True)
    index.release(
        cuda.wheels.CUBLAS,
        {
            wheel_name(cuda.wheels.CUBLAS, "win_amd64"): win,
            wheel_name(cuda.wheels.CUBLAS, LINUX_TAG): cublas,
        },
        relative=relative,
        sha=sha,
    )
    index.release(
        cuda.wheels.CUDNN,
        {
            wheel_name(cuda.wheels.CUDNN, "win_amd64"): win,
            wheel_name(cuda.wheels.CUDNN, LINUX_TAG): cudnn,
        },
    )
    return {
        wheel_name(cuda.wheels.CUBLAS, LINUX_TAG): cublas,
        wheel_name(cuda.wheels.CUDNN, LINUX_TAG): cudnn,
    }


def serve_index(tmp_path, monkeypatch) -> FakeIndex:
    """A FakeIndex that the cuda package asks, with its install folder and wheel cache under
    tmp_path and a CTranslate2 that uses cuDNN (the caller stops the index)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the fake wheels are Linux ones")
    for var in ("S2S_DATA_DIR", "S2S_CACHE_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    fake = FakeIndex()
    monkeypatch.setenv(cuda.wheels.INDEX_ENV, fake.url)
    monkeypatch.setattr(cuda.wheels, "ctranslate2_version", lambda: "4.6.0")
    return fake


def installed_files() -> set[str]:
    root = cuda.store.install_dir()
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
