"""The Hugging Face Hub side of downloads: endpoint, token and the repo's file list come from
`huggingface_hub`; the bytes come through our resumable `download.download_file` (why:
docs/models.md, "Why our own transfer"), placed in the shared HF cache layout (blobs + snapshot
links + refs, see cache.py) so every other HF tool of the user sees them.
"""

from __future__ import annotations

import hashlib
import os
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from . import cache
from .download import (
    IMPORT_HINT,
    ChecksumMismatch,
    DownloadError,
    ProgressFn,
    clean_etag,
    download_file,
    header,
    http_status_error,
    hub_sha256,
    network_error,
    ssl_context,
)

DEFAULT_ENDPOINT = "https://huggingface.co"


def hf_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hf_offline() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on")


def hf_token() -> str | None:
    """The user's Hub token as huggingface_hub finds it (HF_TOKEN, `hf auth login`)."""
    from huggingface_hub import get_token

    return get_token()


def hf_file_url(repo_id: str, revision: str, filename: str, endpoint: str | None = None) -> str:
    return "{}/{}/resolve/{}/{}".format(
        (endpoint or hf_endpoint()).rstrip("/"),
        repo_id,
        urllib.parse.quote(revision, safe=""),
        urllib.parse.quote(filename),
    )


@dataclass
class RepoFile:
    name: str
    size: int | None = None
    sha256: str | None = None  # LFS files
    blob_id: str | None = None  # git object id (non-LFS files are stored under it)


@dataclass
class RepoInfo:
    commit: str | None
    files: dict[str, RepoFile]


def _auth_headers() -> dict[str, str]:
    token = hf_token()
    return {"Authorization": f"Bearer {token}"} if token else {}


def refuse_if_offline() -> None:
    if hf_offline():
        raise DownloadError(f"downloads are off (HF_HUB_OFFLINE is set): unset it, {IMPORT_HINT}")


_SESSION_LOCK = threading.Lock()
_session_set = False


def _http_library():
    """The HTTP client module huggingface_hub runs on: httpx2 (2.x), httpx (1.x) or requests."""
    import importlib

    for name in ("httpx2", "httpx", "requests"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Its 'could not talk to the server' errors (requests' are OSErrors already)."""
    lib = _http_library()
    error = getattr(lib, "TransportError", None)
    return (OSError, error) if isinstance(error, type) else (OSError,)


def _use_system_certificates() -> None:
    """huggingface_hub's HTTP client trusts what our downloads trust (the OS store, with
    truststore), and reads proxies from the environment as they do (huggingface_hub 1.x+)."""
    global _session_set
    with _SESSION_LOCK:
        if _session_set:
            return
        _session_set = True
        import huggingface_hub

        lib = _http_library()
        factory = getattr(huggingface_hub, "set_client_factory", None)
        if factory is None or not hasattr(lib, "Client"):
            return  # 0.x on requests: it reads the certificates itself
        factory(lambda: lib.Client(verify=ssl_context(), follow_redirects=True, timeout=None))


def fetch_repo_info(repo_id: str, revision: str = "main", timeout: float = 10.0) -> RepoInfo:
    """The commit a revision points at and its files with sizes and digests (the Hub API,
    through huggingface_hub)."""
    refuse_if_offline()
    from huggingface_hub import HfApi
    from huggingface_hub.utils import HfHubHTTPError

    _use_system_certificates()
    endpoint = hf_endpoint()
    url = f"{endpoint}/api/models/{repo_id}/revision/{urllib.parse.quote(revision, safe='')}"
    try:
        info = HfApi(endpoint=endpoint, token=hf_token() or False).model_info(
            repo_id, revision=revision, files_metadata=True, timeout=timeout
        )
    except HfHubHTTPError as exc:
        response = exc.response  # httpx's or requests' reply
        reason = getattr(response, "reason_phrase", None) or getattr(response, "reason", "")
        raise http_status_error(url, response.status_code, reason) from exc
    except _transport_errors() as exc:
        raise network_error(url, exc) from exc
    except (ValueError, KeyError, TypeError) as exc:  # a mirror whose API answers otherwise
        raise DownloadError(f"{url} did not answer with the repo's file list ({exc})") from exc
    files = {
        s.rfilename: RepoFile(
            s.rfilename,
            s.lfs.size if s.lfs else s.size,
            s.lfs.sha256 if s.lfs else None,
            s.blob_id,
        )
        for s in info.siblings or []
    }
    commit = info.sha
    return RepoInfo(
        commit if isinstance(commit, str) and cache.HEX40.match(commit) else None, files
    )


@dataclass
class HubDownload:
    path: Path  # the file in the snapshot
    verified: bool  # its digest matched a reference (catalog, Hub sha256 or git oid)


def hf_download(
    repo_id: str,
    filename: str,
    revision: str = "main",
    *,
    commit: str | None = None,
    sha256: str | None = None,
    md5: str | None = None,
    size: int | None = None,
    blob_id: str | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    hub_cache: Path | None = None,
    **kwargs,
) -> HubDownload:
    """Put `filename` of `repo_id` into the HF cache layout, resuming and verifying it."""
    refuse_if_offline()
    root = hub_cache or cache.hf_hub_cache()
    blobs = cache.repo_dir(repo_id, root) / "blobs"
    if commit is None and cache.HEX40.match(revision):
        commit = revision
    known = sha256 or blob_id  # the Hub stores a file under its sha256 (LFS) or git oid
    if known and (blobs / known).is_file():
        commit = commit or cache.read_ref(repo_id, revision, root)
        if commit and (size is None or (blobs / known).stat().st_size == size):
            path = cache.link_blob(repo_id, commit, filename, blobs / known, root)
            cache.write_ref(repo_id, revision, commit, root)
            return HubDownload(path, False)
    key = known or "s2s-" + hashlib.sha1(f"{commit or revision}/{filename}".encode()).hexdigest()
    result = download_file(
        hf_file_url(repo_id, commit or revision, filename),
        blobs / (known or f"{key}.tmpblob"),
        part_path=blobs / f"{key}.part",
        expected_sha256=sha256,
        expected_md5=md5,
        expected_size=size,
        progress=progress,
        cancel=cancel,
        headers=_auth_headers(),
        name=filename,
        **kwargs,
    )
    announced = hub_sha256(result.headers)
    verified = bool(sha256 or md5 or announced)
    name = known or announced or result.sha256
    if not sha256 and blob_id:  # a plain git file: its oid (from the API) is the reference
        if cache.git_blob_sha1(result.path) != blob_id:
            result.path.unlink()
            raise ChecksumMismatch(
                f"{filename} does not match the Hub's git object id {blob_id[:12]}…; the file "
                f"was deleted: download it again, {IMPORT_HINT}"
            )
        verified = True
    elif not (sha256 or announced):
        # The Hub's ETag of a git file is its oid; a mirror's may be anything, so it only
        # names the blob (as huggingface_hub does) when the bytes prove it.
        etag = clean_etag(header(result.headers, "ETag"))
        if cache.HEX40.match(etag) and cache.git_blob_sha1(result.path) == etag:
            name, verified = etag, True
    blob = blobs / name
    if blob != result.path:
        os.replace(result.path, blob)
    os.chmod(blob, 0o644)
    if commit is None:
        announced_commit = clean_etag(header(result.headers, "X-Repo-Commit"))
        commit = announced_commit if cache.HEX40.match(announced_commit) else revision
    path = cache.link_blob(repo_id, commit, filename, blob, root)
    cache.write_ref(repo_id, revision, commit, root)
    return HubDownload(path, verified)
