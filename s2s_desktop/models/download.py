"""Qt-free downloads: progress, cancel, resume, checksum, free-space check, atomic placement.

`download_file` fetches one URL into `dest`: bytes go to `dest.part`, which survives a cancel or
a cut so the next try resumes with an HTTP Range request; a server that ignores Range (200
instead of 206) restarts the file from 0. The file reaches its final name only after its size
and digest match, by os.replace, so a half-written or wrong file never sits there.
hub.py builds on it for the Hugging Face Hub.

Network: proxies from the environment (HTTPS_PROXY, NO_PROXY, ...), the system's
certificates through `truststore` when installed. Every socket wait is
bounded (connect/header timeout, then a stall timeout per read), so offline means a clear error.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import ipaddress
import logging
import os
import shutil
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

from ..errors import S2SError
from . import cache

log = logging.getLogger(__name__)

IMPORT_HINT = "or fetch the files on another machine and run `s2s-desktop models import PATH`"
CHUNK = 256 * 1024
SPACE_MARGIN = 64 * 1024 * 1024  # keep some room for everything else on the disk


class DownloadError(S2SError):
    """A download failed; the message says why and what to do."""


class HubUnreachable(DownloadError):
    """No connection to the server at all (offline, refused, DNS, proxy, connect timeout)."""


class DownloadCancelled(DownloadError):
    """The user cancelled; the partial file is kept for a later resume."""


class ChecksumMismatch(DownloadError):
    """The bytes do not match the expected digest; the file was deleted."""


class NotEnoughSpace(DownloadError):
    """The disk cannot hold the download."""


@dataclass
class DownloadProgress:
    filename: str
    done: int  # bytes on disk so far, resumed bytes included
    total: int | None  # None while the size is unknown
    speed_bps: float  # recent transfer rate

    @property
    def fraction(self) -> float | None:
        return self.done / self.total if self.total else None


ProgressFn = Callable[[DownloadProgress], None]


@dataclass
class DownloadResult:
    path: Path
    size: int
    sha256: str
    headers: dict[str, str] = field(default_factory=dict)  # redirect hops, then the final reply


def human_size(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


# ---------------------------------------------------------------- network


def ssl_context() -> ssl.SSLContext:
    """The OS trust store (corporate CAs included) when truststore is installed."""
    try:
        import truststore

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ImportError:
        return ssl.create_default_context()


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects, remember each hop's headers, and keep the token on its own host."""

    def __init__(self):
        self.hops: list[Message] = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.hops.append(headers)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            old_host = urllib.parse.urlsplit(req.full_url).hostname
            if urllib.parse.urlsplit(new.full_url).hostname != old_host:
                new.remove_header("Authorization")
        return new


def open_url(url: str, headers: dict[str, str], timeout: float):
    """Open `url`; returns (response, redirect hop headers)."""
    host = urllib.parse.urlsplit(url).hostname
    proxies = {} if _is_loopback(host) else urllib.request.getproxies()
    redirects = _Redirects()
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler(proxies),
        urllib.request.HTTPSHandler(context=ssl_context()),
        redirects,
    )
    req = urllib.request.Request(url, headers={"User-Agent": "s2s-desktop", **headers})
    resp = opener.open(req, timeout=timeout)
    return resp, redirects.hops


def response_socket(resp) -> socket.socket | None:
    raw = getattr(getattr(resp, "fp", None), "raw", None)
    return getattr(raw, "_sock", None)


class _CancelWatch:
    """While a read blocks, a set cancel event shuts the socket so the read returns at once."""

    def __init__(self, cancel: threading.Event | None, sock: socket.socket | None):
        self.cancel, self.sock = cancel, sock
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self):
        if self.cancel is not None and self.sock is not None:
            self.thread = threading.Thread(target=self._watch, daemon=True, name="dl-cancel")
            self.thread.start()
        return self

    def _watch(self):
        while not self.done.wait(0.1):
            if self.cancel.is_set():
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return

    def __exit__(self, *exc):
        self.done.set()
        if self.thread is not None:
            self.thread.join(timeout=1)


def header(headers: dict[str, str], name: str) -> str | None:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


def clean_etag(value: str | None) -> str:
    if not value:
        return ""
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"').lower()


def hub_sha256(headers: dict[str, str]) -> str | None:
    """The sha256 the Hub announces for an LFS file (its linked ETag), if any."""
    for name in ("X-Linked-Etag", "ETag"):
        tag = clean_etag(header(headers, name))
        if cache.HEX64.match(tag):
            return tag
    return None


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """(start, total) of 'bytes START-END/TOTAL' or 'bytes */TOTAL'."""
    if not value or not value.startswith("bytes"):
        return None, None
    spec = value[5:].strip()
    rng, _, total = spec.partition("/")
    start = int(rng.split("-")[0]) if rng and rng != "*" and rng.split("-")[0].isdigit() else None
    return start, (int(total) if total.isdigit() else None)


def check_free_space(folder: Path, needed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if needed + SPACE_MARGIN > free:
        raise NotEnoughSpace(
            f"not enough free space in {folder}: the download needs {human_size(needed)}, "
            f"{human_size(free)} is free; free some space or set HF_HOME to a larger disk"
        )


def network_error(url: str, exc: BaseException) -> DownloadError:
    host = urllib.parse.urlsplit(url).netloc
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ssl.SSLCertVerificationError):
        return HubUnreachable(
            f"{host} has a certificate this computer does not trust ({reason.verify_message}): "
            "add your organisation's root certificate to the system store, "
            f"{IMPORT_HINT}"
        )
    return HubUnreachable(
        f"cannot reach {host} ({reason}): check the network, the proxy (HTTPS_PROXY) "
        f"or HF_ENDPOINT, {IMPORT_HINT}"
    )


def http_error(url: str, exc: urllib.error.HTTPError) -> DownloadError:
    return http_status_error(url, exc.code, exc.reason)


def http_status_error(url: str, code: int, reason: str) -> DownloadError:
    if code in (401, 403):
        return DownloadError(
            f"{url} refused access ({code}): the model may be gated: accept its licence "
            f"on the model page and set HF_TOKEN, {IMPORT_HINT}"
        )
    if code == 404:
        return DownloadError(f"{url} was not found (404): the repo, revision or file name is wrong")
    return DownloadError(f"{url} answered HTTP {code} {reason}: try again later, {IMPORT_HINT}")


def _is_connect_failure(exc: BaseException) -> bool:
    """Refused, unresolvable, unroutable or a connect timeout (urllib wraps only the request
    phase in URLError): retrying at once will not help, and the user should hear it now."""
    return isinstance(exc, urllib.error.URLError)


class _PartFile:
    """The .part file and a running digest of the bytes in it."""

    def __init__(self, path: Path):
        self.path = path
        self.sha256 = hashlib.sha256()
        self.md5 = hashlib.md5()
        self.size = 0
        if path.exists():  # resume: the digest must cover the bytes already there
            with open(path, "rb") as f:
                while chunk := f.read(cache.CHUNK):
                    self.add(chunk)

    def add(self, chunk: bytes) -> None:
        self.sha256.update(chunk)
        self.md5.update(chunk)
        self.size += len(chunk)

    def restart(self) -> None:
        self.sha256, self.md5, self.size = hashlib.sha256(), hashlib.md5(), 0
        if self.path.exists():
            os.truncate(self.path, 0)

    def discard(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


class RateMeter:
    """Transfer rate: the average so far for the first half second, then a smoothed rate."""

    def __init__(self):
        self.t0, self.b0, self.speed, self.warm = time.monotonic(), 0, 0.0, False

    def update(self, transferred: int) -> float:
        now = time.monotonic()
        dt = now - self.t0
        if dt >= 0.5:
            rate = (transferred - self.b0) / dt
            self.speed = 0.5 * self.speed + 0.5 * rate if self.warm else rate
            self.t0, self.b0, self.warm = now, transferred, True
        elif not self.warm and dt > 0:
            self.speed = (transferred - self.b0) / dt
        return self.speed


def download_file(
    url: str,
    dest: Path,
    *,
    expected_sha256: str | None = None,
    expected_md5: str | None = None,
    expected_size: int | None = None,
    part_path: Path | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    headers: dict[str, str] | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float = 30.0,
    retries: int = 3,
    name: str | None = None,
    trust_hub_digest: bool = True,
) -> DownloadResult:
    """Download `url` to `dest` (resuming `dest.part`). Raises DownloadError subclasses."""
    dest = Path(dest)
    part_file = Path(part_path or dest.with_name(dest.name + ".part"))
    with _claim(part_file):
        return _download(
            url,
            dest,
            part_file,
            expected_sha256=expected_sha256,
            expected_md5=expected_md5,
            expected_size=expected_size,
            progress=progress,
            cancel=cancel,
            headers=headers,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries=retries,
            name=name,
            trust_hub_digest=trust_hub_digest,
        )


_ACTIVE: set[str] = set()
_ACTIVE_LOCK = threading.Lock()


@contextlib.contextmanager
def _claim(part: Path):
    """One download per .part file in this process (two would interleave their bytes)."""
    key = os.path.abspath(part)
    with _ACTIVE_LOCK:
        if key in _ACTIVE:
            raise DownloadError(f"{part.name} is already being downloaded; wait for it to finish")
        _ACTIVE.add(key)
    try:
        yield
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.discard(key)


def _download(
    url,
    dest,
    part_file,
    *,
    expected_sha256,
    expected_md5,
    expected_size,
    progress,
    cancel,
    headers,
    connect_timeout,
    read_timeout,
    retries,
    name,
    trust_hub_digest,
) -> DownloadResult:
    part = _PartFile(part_file)
    part.path.parent.mkdir(parents=True, exist_ok=True)
    label = name or dest.name
    seen: dict[str, str] = {}
    attempt = 0
    total: int | None = expected_size
    rate = RateMeter()
    transferred = 0
    last_report = 0.0

    def report(force: bool = False) -> None:
        nonlocal last_report
        now = time.monotonic()
        if progress is not None and (force or now - last_report >= 0.1):
            last_report = now
            progress(DownloadProgress(label, part.size, total, rate.update(transferred)))

    def on_chunk(n: int) -> None:
        nonlocal transferred
        transferred += n
        report()

    while True:
        if cancel is not None and cancel.is_set():
            raise DownloadCancelled(f"download of {label} cancelled; run it again to resume")
        if expected_size is not None and part.size > expected_size:
            part.restart()  # longer than the file can be: not ours
        req_headers = dict(headers or {})
        if part.size:
            req_headers["Range"] = f"bytes={part.size}-"
        try:
            resp, hops = open_url(url, req_headers, connect_timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and part.size:
                _, whole = _content_range(exc.headers.get("Content-Range"))
                exc.close()
                if whole is not None and whole == part.size:
                    total = whole
                    break  # the part already holds the whole file
                part.restart()
                attempt += 1
                if attempt <= retries:
                    continue
            retryable = exc.code == 429 or exc.code >= 500
            if not retryable or attempt >= retries:
                raise http_error(url, exc) from exc
            attempt += 1
            _backoff(attempt, cancel)
            continue
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            if _is_connect_failure(exc) or attempt >= retries:
                raise network_error(url, exc) from exc
            attempt += 1
            _backoff(attempt, cancel)
            continue

        try:
            for hop in hops:
                seen.update(hop.items())
            seen.update(resp.headers.items())
            if expected_sha256 is None and trust_hub_digest:
                expected_sha256 = hub_sha256(seen)
            length = resp.headers.get("Content-Length")
            length = int(length) if length and length.isdigit() else None
            if resp.status == 206:
                start, whole = _content_range(resp.headers.get("Content-Range"))
                if start != part.size:  # not the range we asked for: start over cleanly
                    part.restart()
                    continue
                total = whole if whole is not None else total
                mode = "ab"
            else:
                if part.size:
                    log.info("%s ignored the Range request; downloading %s from 0", url, label)
                part.restart()
                total = length if length is not None else total
                mode = "wb"
            if expected_size is not None and total is not None and total != expected_size:
                part.discard()
                raise DownloadError(
                    f"{label}: the server sends {total} bytes but {expected_size} were expected: "
                    "the catalog entry is out of date or the mirror serves another file"
                )
            if total is not None:
                check_free_space(part.path.parent, total - part.size)
            try:
                _receive(resp, part, mode, read_timeout, cancel, label, on_chunk)
                if total is not None and part.size < total:
                    raise http.client.IncompleteRead(b"", total - part.size)
            except DownloadCancelled:
                raise
            except (OSError, http.client.HTTPException, ValueError) as exc:
                if cancel is not None and cancel.is_set():
                    raise DownloadCancelled(
                        f"download of {label} cancelled; run it again to resume"
                    ) from exc
                if attempt >= retries:
                    raise DownloadError(
                        f"download of {label} was cut at {human_size(part.size)} of "
                        f"{human_size(total)} ({type(exc).__name__}: {exc}); run it again to "
                        f"resume, {IMPORT_HINT}"
                    ) from exc
                attempt += 1
                log.info("download of %s cut (%s); resuming (try %d)", label, exc, attempt)
                _backoff(attempt, cancel)
                continue
        finally:
            resp.close()
        break

    report(force=True)
    _check_digest(part, label, expected_size, expected_sha256, expected_md5)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part.path, dest)
    return DownloadResult(dest, part.size, part.sha256.hexdigest(), seen)


def _receive(resp, part: _PartFile, mode: str, read_timeout: float, cancel, label, on_chunk):
    """Stream the body into the part file until the server is done (or cut, or cancelled)."""
    sock = response_socket(resp)
    if sock is not None:
        sock.settimeout(read_timeout)  # stall watchdog: no byte for this long = a cut
    with _CancelWatch(cancel, sock), open(part.path, mode) as f:
        while True:
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled(f"download of {label} cancelled; run it again to resume")
            chunk = resp.read1(CHUNK)  # whatever has arrived: a stall loses nothing
            if not chunk:
                break
            f.write(chunk)
            part.add(chunk)
            on_chunk(len(chunk))
        f.flush()
        os.fsync(f.fileno())


def _backoff(attempt: int, cancel: threading.Event | None) -> None:
    delay = min(0.5 * 2 ** (attempt - 1), 5.0)
    if cancel is not None:
        if cancel.wait(delay):
            raise DownloadCancelled("download cancelled; run it again to resume")
    else:
        time.sleep(delay)


def _check_digest(part: _PartFile, label, size, sha256, md5) -> None:
    problem = None
    if size is not None and part.size != size:
        problem = f"{part.size} bytes instead of {size}"
    elif sha256 and part.sha256.hexdigest() != sha256.lower():
        problem = f"sha256 {part.sha256.hexdigest()[:12]}… instead of {sha256[:12]}…"
    elif md5 and part.md5.hexdigest() != md5.lower():
        problem = f"md5 {part.md5.hexdigest()[:12]}… instead of {md5[:12]}…"
    if problem:
        part.discard()  # never kept: a resume would only extend wrong bytes
        raise ChecksumMismatch(
            f"{label} failed verification ({problem}); the file was deleted: download it "
            f"again, and if it fails again the mirror or catalog is wrong, {IMPORT_HINT}"
        )
