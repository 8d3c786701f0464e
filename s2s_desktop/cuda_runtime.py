"""NVIDIA's CUDA libraries for faster-whisper, downloaded on first use (no Qt).

The installers ship CPU-only. CTranslate2 (under faster-whisper) runs on an NVIDIA GPU when it
can load cuBLAS 12 (and, for CTranslate2 4.5-4.6.2, cuDNN 9). Instead of a CUDA installer we
fetch NVIDIA's own runtime wheels from PyPI (`nvidia-cublas-cu12`, `nvidia-cudnn-cu12`),
check their sha256, and keep only their shared libraries (plus licences) in
`<user data dir>/cuda/cu12/`. `activate()` then makes them loadable before CTranslate2 needs
them: CTranslate2 dlopens `libcublas.so.12` / `cublas64_12.dll` by name on first use, and a
library already loaded under that name is the one it gets.

The index is PyPI's JSON API at S2S_CUDA_INDEX_URL (default https://pypi.org): any mirror that
serves `/pypi/<name>/json` works.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import config
from .errors import S2SError
from .models import download as dl
from .models.download import human_size

log = logging.getLogger(__name__)

INDEX_ENV = "S2S_CUDA_INDEX_URL"
DEFAULT_INDEX = "https://pypi.org"
FOLDER = "cu12"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
RETRIES = 3  # per wheel, for cut or stalled transfers (each resumes where it stopped)
# Unpacked libraries take ~1.5x their wheel (measured on the pinned wheels: 1.46-1.49).
UNPACKED_RATIO = 1.5
INSTALL_HINT = "run `s2s-desktop cuda install` again"


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

# Load order on Linux (a library's dependencies first); anything else comes after.
LOAD_ORDER = (
    "cudart",
    "cublasLt",
    "cublas",
    "nvrtc",
    "cudnn_graph",
    "cudnn_engines_precompiled",
    "cudnn_engines_runtime_compiled",
    "cudnn_heuristic",
    "cudnn_ops",
    "cudnn_cnn",
    "cudnn_adv",
    "cudnn",
)
# NVBLAS replaces the CPU BLAS (sgemm_, ...) of whatever loads it: never kept.
SKIP_LIBS = re.compile(r"^(lib)?nvblas", re.IGNORECASE)
LICENSE_NAMES = re.compile(r"^(licen[sc]e|notice|copying)[^/]*$", re.IGNORECASE)


class CudaError(S2SError):
    """Downloading or installing the CUDA libraries failed; the message says what to do."""


class CudaUnsupported(CudaError):
    """This system cannot use the downloadable CUDA libraries."""


class CudaCancelled(CudaError):
    """The user cancelled; partial downloads are kept for a resume."""


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


@dataclass
class Plan:
    """What `install()` would download, shown to the user before anything is fetched."""

    folder: Path
    platform: str
    index: str
    wheels: list[Wheel]
    ctranslate2: str | None  # the CTranslate2 version the package set was chosen for
    up_to_date: bool  # these very versions are installed already
    free_bytes: int

    @property
    def download_bytes(self) -> int:
        return sum(w.size for w in self.wheels)

    @property
    def disk_bytes(self) -> int:
        """About this much once unpacked (the wheels are deleted after)."""
        return int(self.download_bytes * UNPACKED_RATIO)

    def to_json(self) -> dict:
        return {
            "folder": str(self.folder),
            "platform": self.platform,
            "index": self.index,
            "ctranslate2": self.ctranslate2,
            "up_to_date": self.up_to_date,
            "download_bytes": self.download_bytes,
            "disk_bytes_estimate": self.disk_bytes,
            "free_bytes": self.free_bytes,
            "packages": [w.to_json() for w in self.wheels],
        }


@dataclass
class CudaStatus:
    installed: bool
    folder: Path
    versions: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    size_bytes: int = 0
    problem: str | None = None  # why a folder that is there cannot be used

    def has(self, packages: list[Package]) -> bool:
        """These very versions are installed (and usable)."""
        return self.installed and all(self.versions.get(p.name) == p.version for p in packages)

    def to_json(self) -> dict:
        return {
            "installed": self.installed,
            "folder": str(self.folder),
            "versions": self.versions,
            "files": self.files,
            "size_bytes": self.size_bytes,
            "problem": self.problem,
        }


@dataclass
class CudaProgress:
    step: str  # "download" or "unpack"
    name: str  # the wheel's file name
    done: int
    total: int | None
    speed_bps: float = 0.0
    index: int = 1  # which wheel, of `count`
    count: int = 1

    @property
    def fraction(self) -> float | None:
        return self.done / self.total if self.total else None


ProgressFn = Callable[[CudaProgress], None]


# ---------------------------------------------------------------- where and what


def install_dir() -> Path:
    return config.data_dir() / "cuda" / FOLDER


def download_dir() -> Path:
    return config.cache_dir() / "cuda-wheels"


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
        raise _unreachable(url, exc) from exc
    try:
        with resp:
            body = resp.read(64 * 1024 * 1024)
        return json.loads(body)
    except (OSError, ValueError) as exc:
        raise CudaError(f"{url} did not answer with PyPI's JSON ({exc}): try again later") from exc


def _unreachable(url: str, exc: BaseException) -> CudaError:
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


def _free_bytes(path: Path) -> int:
    for p in (path, *path.parents):
        if p.exists():
            return shutil.disk_usage(p).free
    return 0


def plan(with_cudnn: bool | None = None, ct2_version: str | None = None) -> Plan:
    """Resolve what to download for this platform (asks the index; downloads nothing)."""
    key = platform_key()
    if ct2_version is None:
        ct2_version = ctranslate2_version()
    packages = required_packages(ct2_version, with_cudnn)
    index = index_url()
    wheels = [resolve(p, key, index) for p in packages]
    up_to_date = status().has(packages)
    return Plan(
        install_dir(), key, index, wheels, ct2_version, up_to_date, _free_bytes(install_dir())
    )


# ---------------------------------------------------------------- install


def _selected_members(z: zipfile.ZipFile, key: str) -> tuple[list, list]:
    """(libraries, licence files) of a wheel: nvidia/<lib>/{lib,bin}/<library>, and the
    licence texts in its .dist-info."""
    sub, lib_re = (
        ("bin", re.compile(r"^[\w.+-]+\.dll$", re.IGNORECASE))
        if key == "win_amd64"
        else ("lib", re.compile(r"^lib[\w.+-]+\.so(\.\d+)*$"))
    )
    libs, licences = [], []
    for info in z.infolist():
        parts = info.filename.split("/")
        if info.is_dir():
            continue
        if (
            len(parts) == 4
            and parts[0] == "nvidia"
            and parts[2] == sub
            and lib_re.match(parts[3])
            and not SKIP_LIBS.match(parts[3])
        ):
            libs.append(info)
        elif len(parts) >= 2 and parts[0].endswith(".dist-info") and LICENSE_NAMES.match(parts[-1]):
            licences.append(info)
    return libs, licences


def _copy_member(z, info, dest: Path, cancel, on_bytes) -> None:
    with z.open(info) as src, open(dest, "wb") as out:
        while chunk := src.read(dl.CHUNK * 4):
            if cancel is not None and cancel.is_set():
                raise CudaCancelled("cancelled while unpacking; nothing was installed")
            out.write(chunk)
            on_bytes(len(chunk))
        out.flush()
        os.fsync(out.fileno())


def _unpack(wheel: Wheel, path: Path, staging: Path, key: str, cancel, report) -> list[dict]:
    try:
        z = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        path.unlink(missing_ok=True)
        raise CudaError(f"{wheel.filename} is not a valid wheel ({exc}); {INSTALL_HINT}") from exc
    with z:
        libs, licences = _selected_members(z, key)
        if not libs:
            raise CudaError(
                f"{wheel.filename} holds no {key} libraries: the index serves an unexpected "
                "file; nothing was installed"
            )
        total = sum(i.file_size for i in libs + licences)
        dl.check_free_space(staging, total)
        done = 0

        def on_bytes(n: int) -> None:
            nonlocal done
            done += n
            report(done, total)

        files = []
        (staging / "licenses").mkdir(exist_ok=True)
        try:
            for info in libs:
                name = info.filename.rsplit("/", 1)[1]
                if (staging / name).exists():
                    raise CudaError(f"two wheels both hold {name}: nothing was installed")
                _copy_member(z, info, staging / name, cancel, on_bytes)
                files.append({"name": name, "size": info.file_size, "package": wheel.package.name})
            for info in licences:
                name = f"licenses/{wheel.package.name}-{info.filename.rsplit('/', 1)[1]}"
                _copy_member(z, info, staging / name, cancel, on_bytes)
                files.append({"name": name, "size": info.file_size, "package": wheel.package.name})
        except zipfile.BadZipFile as exc:  # a CRC error: the bytes on disk changed since the check
            path.unlink(missing_ok=True)
            raise CudaError(f"{wheel.filename} is damaged ({exc}); {INSTALL_HINT}") from exc
        report(total, total)
        return files


def _download_error(wheel: Wheel, index: str, exc: dl.DownloadError) -> CudaError:
    cause = exc.__cause__
    if isinstance(exc, dl.DownloadCancelled):
        return CudaCancelled(
            f"download of {wheel.filename} cancelled; the partial file is kept: run "
            "`s2s-desktop cuda install` again to resume"
        )
    if isinstance(exc, dl.ChecksumMismatch):
        return CudaError(
            f"{wheel.filename} does not match the sha256 {host_of(index)} lists for it "
            f"({wheel.sha256[:12]}…): the download was deleted and nothing was installed; "
            f"{INSTALL_HINT}, and if it fails again the index or a proxy serves a wrong file"
        )
    if isinstance(cause, urllib.error.HTTPError):
        return CudaError(
            f"{host_of(wheel.url)} answered HTTP {cause.code} {cause.reason} for {wheel.filename}: "
            f"nothing was installed; try again later or set {INDEX_ENV} to another index"
        )
    if isinstance(exc, dl.HubUnreachable):
        return _unreachable(wheel.url, cause if cause is not None else exc)
    if isinstance(exc, dl.NotEnoughSpace):
        return CudaError(
            f"not enough free space in {download_dir()} for {wheel.filename} "
            f"({human_size(wheel.size)}): free some space; nothing was installed"
        )
    text = str(exc).replace(", " + dl.IMPORT_HINT, "").replace(dl.IMPORT_HINT, "")
    return CudaError(f"{text.rstrip(' ,;')}; nothing was installed")


def _clean_leftovers(parent: Path) -> None:
    """Staging or half-removed folders of an earlier run that was killed."""
    for p in parent.glob(f".{FOLDER}-*"):
        shutil.rmtree(p, ignore_errors=True)


def _check_space(p: Plan, parts: dict[str, int]) -> None:
    cache, target = download_dir(), install_dir()
    fetch = sum(w.size - parts.get(w.filename, 0) for w in p.wheels)
    unpack = p.disk_bytes
    for folder in (cache, target.parent):  # not `target`: an empty one would look damaged
        folder.mkdir(parents=True, exist_ok=True)
    same = os.stat(cache).st_dev == os.stat(target.parent).st_dev
    needs = [(target.parent, fetch + unpack)] if same else [(cache, fetch), (target.parent, unpack)]
    for folder, need in needs:
        free = shutil.disk_usage(folder).free
        if need + dl.SPACE_MARGIN > free:
            raise CudaError(
                f"not enough free space in {folder}: the CUDA libraries need about "
                f"{human_size(need)} there (download and unpacked), {human_size(free)} is free"
            )


def install(
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    *,
    from_plan: Plan | None = None,
    with_cudnn: bool | None = None,
) -> CudaStatus:
    """Download, check and unpack the libraries of `from_plan` (or of a fresh `plan()`).
    The folder changes only when every wheel is downloaded, verified and unpacked; partial
    downloads stay in the cache for a resume. Raises CudaError."""
    p = from_plan or plan(with_cudnn=with_cudnn)
    if p.up_to_date:
        return status()
    cache, target = download_dir(), install_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(target.parent)
    parts = {}
    for w in p.wheels:
        for candidate in (cache / w.filename, cache / (w.filename + ".part")):
            if candidate.is_file():
                parts[w.filename] = min(candidate.stat().st_size, w.size)
    _check_space(p, parts)

    paths = []
    for i, w in enumerate(p.wheels, 1):

        def on_download(d: dl.DownloadProgress, w=w, i=i) -> None:
            if progress is not None:
                progress(
                    CudaProgress(
                        "download", w.filename, d.done, w.size, d.speed_bps, i, len(p.wheels)
                    )
                )

        dest = cache / w.filename
        if dest.is_file() and dl.cache.file_digest(dest) == w.sha256:
            on_download(dl.DownloadProgress(w.filename, w.size, w.size, 0.0))  # from a failed run
        else:
            dest.unlink(missing_ok=True)
            try:
                dl.download_file(
                    w.url,
                    dest,
                    expected_sha256=w.sha256,
                    progress=on_download,
                    cancel=cancel,
                    retries=RETRIES,
                    name=w.filename,
                    trust_hub_digest=False,
                )
            except dl.DownloadError as exc:
                raise _download_error(w, p.index, exc) from exc
        paths.append(dest)

    staging = Path(tempfile.mkdtemp(prefix=f".{FOLDER}-staging-", dir=target.parent))
    try:
        files = []
        for i, (w, path) in enumerate(zip(p.wheels, paths, strict=True), 1):

            def on_unpack(done: int, total: int, w=w, i=i) -> None:
                if progress is not None:
                    progress(CudaProgress("unpack", w.filename, done, total, 0.0, i, len(p.wheels)))

            files += _unpack(w, path, staging, p.platform, cancel, on_unpack)
        manifest = {
            "format": MANIFEST_FORMAT,
            "platform": p.platform,
            "ctranslate2": p.ctranslate2,
            "index": p.index,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "packages": [w.to_json() for w in p.wheels],
            "files": files,
        }
        config.atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=2))
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for path in paths:  # the libraries are in place: the wheels only cost space now
        path.unlink(missing_ok=True)
    st = status()
    log.info("CUDA libraries installed in %s: %s", target, st.versions)
    return st


def _swap_in(staging: Path, target: Path) -> None:
    old = None
    try:
        if target.exists():
            old = target.with_name(f".{FOLDER}-old-{os.getpid()}-{time.monotonic_ns()}")
            os.replace(target, old)
        os.replace(staging, target)
    except OSError as exc:
        if old is not None and not target.exists():
            with contextlib.suppress(OSError):
                os.replace(old, target)
        raise CudaError(
            f"cannot replace {target} ({exc}): close s2s-desktop (it may be using the "
            f"libraries) and {INSTALL_HINT}"
        ) from exc
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------- status, remove


def _read_manifest(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def status(folder: Path | None = None) -> CudaStatus:
    """Whether the libraries are installed and complete, their versions and size on disk."""
    folder = folder or install_dir()
    st = CudaStatus(False, folder)
    if not folder.is_dir():
        return st
    st.size_bytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    data = _read_manifest(folder)
    if data is None or data.get("format") != MANIFEST_FORMAT:
        st.problem = f"{folder} has no readable {MANIFEST}: {INSTALL_HINT}"
        return st
    st.versions = {p["name"]: p["version"] for p in data.get("packages", [])}
    st.files = [f["name"] for f in data.get("files", [])]
    with contextlib.suppress(CudaUnsupported):
        if data.get("platform") != platform_key():
            st.problem = f"{folder} holds libraries for {data.get('platform')}: {INSTALL_HINT}"
            return st
    for f in data.get("files", []):
        path = folder / f["name"]
        if not path.is_file() or path.stat().st_size != f["size"]:
            st.problem = f"{path} is missing or damaged: {INSTALL_HINT}"
            return st
    st.installed = True
    return st


def is_installed() -> bool:
    return status().installed


def remove() -> int:
    """Delete the installed libraries and any cached wheels; returns the bytes freed."""
    target = install_dir()
    freed = 0
    if target.exists():
        freed = status(target).size_bytes
        trash = target.with_name(f".{FOLDER}-removing-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.replace(target, trash)  # never a half-deleted folder under the real name
        except OSError as exc:
            raise CudaError(
                f"cannot remove {target} ({exc}): close s2s-desktop (it may be using the "
                "libraries) and try again"
            ) from exc
        shutil.rmtree(trash, ignore_errors=True)
    cache = download_dir()
    if cache.exists():
        freed += sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
        shutil.rmtree(cache, ignore_errors=True)
    _ACTIVATED.discard(str(target))
    return freed


# ---------------------------------------------------------------- activate


_ACTIVATED: set[str] = set()  # folders whose libraries are loaded
_KEEP: list = []  # DLL directory handles and loaded libraries live as long as the process
_LOCK = threading.Lock()


def load_rank(name: str) -> tuple[int, str]:
    """Sort key: dependencies before the libraries that need them."""
    stem = re.sub(r"^lib", "", name).split(".", 1)[0]
    stem = re.sub(r"64_\d+$", "", stem)  # cublasLt64_12 -> cublasLt, cudnn_ops64_9 -> cudnn_ops
    try:
        return LOAD_ORDER.index(stem), name
    except ValueError:
        return len(LOAD_ORDER), name


def _load_all(paths: list[Path], loader) -> dict[str, str]:
    """Load each library; one that fails is retried after the others (a dependency may have
    come in since). Returns {file name: error} for those that never loaded."""
    pending, errors = list(paths), {}
    while pending:
        failed = []
        for path in pending:
            try:
                _KEEP.append(loader(str(path)))
                errors.pop(path.name, None)
            except OSError as exc:
                errors[path.name] = str(exc)
                failed.append(path)
        if len(failed) == len(pending):
            break
        pending = failed
    return errors


def activate(folder: Path | None = None) -> str | None:
    """Make the downloaded libraries loadable for CTranslate2. None when done (or done before),
    else the reason they cannot be used. Never raises."""
    try:
        folder = folder or install_dir()
        with _LOCK:
            key = str(folder)
            if key in _ACTIVATED:
                return None
            reason = _activate(folder)
            if reason:  # not remembered: a later install in this process may fix it
                log.warning("CUDA libraries in %s not used: %s", folder, reason)
            else:
                _ACTIVATED.add(key)
            return reason
    except Exception as exc:  # noqa: BLE001 - the app must keep running on the CPU
        return f"activating the CUDA libraries failed unexpectedly: {exc}"


def _activate(folder: Path) -> str | None:
    if sys.platform not in ("win32",) and not sys.platform.startswith("linux"):
        return f"the downloaded CUDA libraries are for Windows and Linux, not {sys.platform}"
    st = status(folder)
    if not st.installed:
        return st.problem or "the CUDA libraries are not installed (s2s-desktop cuda install)"
    suffix = ".dll" if sys.platform == "win32" else ".so"
    libs = sorted(
        (folder / n for n in st.files if "/" not in n and suffix in n),
        key=lambda p: load_rank(p.name),
    )
    if sys.platform == "win32":
        # add_dll_directory serves Python's own loads; CTranslate2's plain LoadLibraryA
        # searches PATH, and a DLL loaded here already is found by its name.
        _KEEP.append(os.add_dll_directory(str(folder)))
        path = os.environ.get("PATH", "")
        if str(folder).lower() not in [p.lower() for p in path.split(os.pathsep)]:
            os.environ["PATH"] = str(folder) + os.pathsep + path
        errors = _load_all(libs, ctypes.WinDLL)
    else:
        # dlopen by name ("libcublas.so.12") returns a library already loaded under that name.
        errors = _load_all(libs, lambda p: ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL))
    if not errors:
        log.info("CUDA libraries from %s loaded: %s", folder, ", ".join(p.name for p in libs))
        return None
    text = "; ".join(f"{name}: {err}" for name, err in errors.items())
    if "libcuda.so" in text or "nvcuda" in text.lower():
        return f"the NVIDIA driver is not installed or not loadable ({text})"
    return f"cannot load {', '.join(errors)} ({text}): {INSTALL_HINT}"
