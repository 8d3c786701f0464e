"""Plan, download, verify and unpack NVIDIA's wheels into the install folder; it changes only
once every wheel is in (partial downloads stay in the cache for a resume)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.error
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..models import download as dl
from ..models.download import human_size
from . import INSTALL_HINT, CudaCancelled, CudaError, store, wheels
from .store import FOLDER, MANIFEST, MANIFEST_FORMAT, CudaStatus, download_dir, install_dir
from .wheels import INDEX_ENV, Wheel, host_of

log = logging.getLogger(__name__)

RETRIES = 3  # per wheel, for cut or stalled transfers (each resumes where it stopped)
# Unpacked libraries take ~1.5x their wheel (measured on the pinned wheels: 1.46-1.49).
UNPACKED_RATIO = 1.5
# NVBLAS replaces the CPU BLAS (sgemm_, ...) of whatever loads it: never kept.
SKIP_LIBS = re.compile(r"^(lib)?nvblas", re.IGNORECASE)
LICENSE_NAMES = re.compile(r"^(licen[sc]e|notice|copying)[^/]*$", re.IGNORECASE)


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


def _free_bytes(path: Path) -> int:
    for p in (path, *path.parents):
        if p.exists():
            return shutil.disk_usage(p).free
    return 0


def plan(with_cudnn: bool | None = None, ct2_version: str | None = None) -> Plan:
    """Resolve what to download for this platform (asks the index; downloads nothing)."""
    key = wheels.platform_key()
    if ct2_version is None:
        ct2_version = wheels.ctranslate2_version()
    packages = wheels.required_packages(ct2_version, with_cudnn)
    index = wheels.index_url()
    found = [wheels.resolve(p, key, index) for p in packages]
    up_to_date = store.status().has(packages)
    return Plan(
        install_dir(), key, index, found, ct2_version, up_to_date, _free_bytes(install_dir())
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
        return wheels.unreachable(wheel.url, cause if cause is not None else exc)
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
        return store.status()
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
    st = store.status()
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
