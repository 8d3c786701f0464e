"""What is on disk: the shared Hugging Face cache, imported folders, verification records.

The HF cache layout (the same one `huggingface_hub` writes, so every HF tool shares files):
    <hub cache>/models--org--name/blobs/<sha256 or git oid>         the bytes, once
    <hub cache>/models--org--name/snapshots/<commit>/<file>          link to ../../blobs/<id>
    <hub cache>/models--org--name/refs/<branch>                      text: the commit it points at
Imported models are recorded in `models.json` in the config folder; file checks done by the
manager are remembered in `verified.json` in the cache folder, keyed by path, size and mtime.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import config

log = logging.getLogger(__name__)

HEX40 = re.compile(r"^[0-9a-f]{40}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")
PARTIAL_SUFFIXES = (".part", ".incomplete", ".tmpblob")  # ours, huggingface_hub's, ours
CHUNK = 1 << 20
STATE_LOCK = threading.RLock()  # models.json / verified.json: read-modify-write, one at a time


# ---------------------------------------------------------------- HF cache layout


def hf_hub_cache() -> Path:
    """The hub cache folder, read from the environment now (huggingface_hub reads it at import)."""
    env = os.environ
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return Path(os.path.expandvars(os.path.expanduser(env[var])))
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface",
    )
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def repo_folder_name(repo_id: str) -> str:
    return "models--" + repo_id.replace("/", "--")


def repo_dir(repo_id: str, cache: Path | None = None) -> Path:
    return (cache or hf_hub_cache()) / repo_folder_name(repo_id)


def read_ref(repo_id: str, revision: str, cache: Path | None = None) -> str | None:
    """Commit a revision points at in the cache (a commit is its own answer), or None."""
    if HEX40.match(revision):
        return revision
    ref = repo_dir(repo_id, cache) / "refs" / revision
    try:
        return ref.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def write_ref(repo_id: str, revision: str, commit: str, cache: Path | None = None) -> None:
    if revision == commit or HEX40.match(revision):
        return
    ref = repo_dir(repo_id, cache) / "refs" / revision
    try:
        if ref.read_text(encoding="utf-8").strip() == commit:
            return
    except OSError:
        pass
    config.atomic_write_text(ref, commit)
    os.chmod(ref, 0o644)  # other HF tools of the same user read it


def snapshot_dir(repo_id: str, commit: str, cache: Path | None = None) -> Path:
    return repo_dir(repo_id, cache) / "snapshots" / commit


def snapshot_for(repo_id: str, revision: str = "main", cache: Path | None = None) -> Path | None:
    commit = read_ref(repo_id, revision, cache)
    if commit is None:
        return None
    snap = snapshot_dir(repo_id, commit, cache)
    return snap if snap.is_dir() else None


def find_snapshot(
    repo_id: str, revision: str, files: list[str] | None, cache: Path | None = None
) -> Path | None:
    """The snapshot holding `files`: the revision's own first, else any snapshot that has them."""
    preferred = snapshot_for(repo_id, revision, cache)
    candidates = [preferred] if preferred else []
    snaps = repo_dir(repo_id, cache) / "snapshots"
    if snaps.is_dir() and not HEX40.match(revision):
        candidates += sorted(
            (p for p in snaps.iterdir() if p.is_dir() and p != preferred),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
    for snap in candidates:
        if files is None:
            if any(_walk_files(snap)):
                return snap
        elif all((snap / f).is_file() for f in files):
            return snap
    return None


def link_blob(
    repo_id: str, commit: str, filename: str, blob: Path, cache: Path | None = None
) -> Path:
    """Make snapshots/<commit>/<filename> point at `blob`; atomic, replaces an older link."""
    target = snapshot_dir(repo_id, commit, cache) / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.s2s-link")
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    rel = os.path.relpath(blob, target.parent)
    try:
        os.symlink(rel, tmp)
    except (OSError, NotImplementedError):
        # No symlinks (Windows without developer mode): the file moves into the snapshot,
        # as huggingface_hub does there.
        os.replace(blob, tmp)
    os.replace(tmp, target)
    return target


# ---------------------------------------------------------------- scanning


@dataclass
class CachedFile:
    name: str  # path inside the snapshot
    path: Path  # the snapshot path (a link, usually)
    size: int
    blob: str  # blob file name (sha256 or git oid) when it is a link into blobs/, else ""


@dataclass
class CachedRevision:
    commit: str
    path: Path
    refs: list[str] = field(default_factory=list)
    files: list[CachedFile] = field(default_factory=list)


@dataclass
class CachedRepo:
    repo_id: str
    path: Path
    size_on_disk: int  # bytes of complete files, each blob counted once
    partial_bytes: int  # unfinished downloads (.part / .incomplete)
    revisions: list[CachedRevision] = field(default_factory=list)

    def files(self) -> set[str]:
        return {f.name for r in self.revisions for f in r.files}


def _walk_files(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.startswith("."):
                yield Path(dirpath) / name


def _blob_name(path: Path) -> str:
    if not path.is_symlink():
        return ""
    real = Path(os.path.realpath(path))
    return real.name if real.parent.name == "blobs" else ""


def scan_repo(folder: Path) -> CachedRepo | None:
    """Read one models--org--name folder; None when it is not a model repo folder."""
    if not folder.name.startswith("models--") or not folder.is_dir():
        return None
    repo_id = folder.name[len("models--") :].replace("--", "/", 1)
    refs: dict[str, list[str]] = {}
    refs_dir = folder / "refs"
    if refs_dir.is_dir():
        for ref in _walk_files(refs_dir):
            try:
                commit = ref.read_text(encoding="utf-8").strip()
            except OSError:
                continue
            refs.setdefault(commit, []).append(ref.relative_to(refs_dir).as_posix())
    size = partial = 0
    seen: set[str] = set()
    blobs = folder / "blobs"
    if blobs.is_dir():
        for blob in blobs.iterdir():
            if not blob.is_file():
                continue
            if blob.name.endswith(PARTIAL_SUFFIXES):
                partial += blob.stat().st_size
            else:
                size += blob.stat().st_size
                seen.add(str(blob.resolve()))
    revisions = []
    snaps = folder / "snapshots"
    if snaps.is_dir():
        for snap in sorted(p for p in snaps.iterdir() if p.is_dir()):
            rev = CachedRevision(commit=snap.name, path=snap, refs=refs.get(snap.name, []))
            for f in sorted(_walk_files(snap)):
                if not f.exists():  # a dangling link
                    continue
                real = str(f.resolve())
                fsize = f.stat().st_size
                if real not in seen:  # a plain file in the snapshot (no-symlink systems)
                    seen.add(real)
                    size += fsize
                rev.files.append(
                    CachedFile(f.relative_to(snap).as_posix(), f, fsize, _blob_name(f))
                )
            revisions.append(rev)
    return CachedRepo(repo_id, folder, size, partial, revisions)


def scan_hf_cache(cache: Path | None = None) -> list[CachedRepo]:
    """Every model repo in the HF hub cache (empty when there is no cache yet)."""
    root = cache or hf_hub_cache()
    if not root.is_dir():
        return []
    repos = []
    for folder in sorted(root.iterdir()):
        repo = scan_repo(folder)
        if repo is not None:
            repos.append(repo)
    return repos


def files_size(paths) -> int:
    total = 0
    for p in paths:
        try:
            total += Path(p).stat().st_size
        except OSError:
            pass
    return total


def tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return files_size(_walk_files(path)) if path.is_dir() else 0


# ---------------------------------------------------------------- hashing


def file_digest(path: Path, algo: str = "sha256") -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def git_blob_sha1(path: Path) -> str:
    """The git object id of a file: what the Hub names the blob of a non-LFS file."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- small JSON state files


def _read_json(path: Path, default):
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, type(default)) else default
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as exc:
        aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            os.replace(path, aside)
        except OSError:
            pass
        log.warning("%s is unreadable (%s); kept as %s", path, exc, aside.name)
        return default


def imports_path() -> Path:
    return config.config_dir() / "models.json"


def load_imports() -> list[dict]:
    """Imported models: [{id, stage, backend, path, copied, repo, catalog_id, files, ...}]."""
    data = _read_json(imports_path(), {})
    models = data.get("models", [])
    return [m for m in models if isinstance(m, dict) and m.get("id") and m.get("path")]


def save_imports(models: list[dict]) -> None:
    text = json.dumps({"version": 1, "models": models}, indent=2, sort_keys=True) + "\n"
    config.atomic_write_text(imports_path(), text)


def imported_folder_for_repo(repo_id: str) -> Path | None:
    """Where an imported copy of a catalog repo lives (an offline stand-in for the HF cache)."""
    for m in load_imports():
        path = Path(m["path"])
        if m.get("repo") == repo_id and path.exists():
            return path
    return None


def verified_path() -> Path:
    return config.cache_dir() / "verified.json"


def _file_key(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


def record_checks(results: dict[Path, bool]) -> None:
    """Remember that these files passed (True) or failed (False) a digest check."""
    if not results:
        return
    with STATE_LOCK:
        records = _read_json(verified_path(), {})
        for path, ok in results.items():
            key = _file_key(path)
            if key is not None:
                records[key[0]] = {"size": key[1], "mtime_ns": key[2], "ok": bool(ok)}
        records = {k: v for k, v in records.items() if os.path.exists(k)}  # forget deleted files
        text = json.dumps(records, indent=1, sort_keys=True) + "\n"
        config.atomic_write_text(verified_path(), text)


def recorded_checks(paths: list[Path]) -> bool | None:
    """True if every file passed its last check, False if any failed, None if any unchecked."""
    if not paths:
        return None
    records = _read_json(verified_path(), {})
    state: bool | None = True
    for p in paths:
        key = _file_key(p)
        rec = records.get(key[0]) if key else None
        if not isinstance(rec, dict) or rec.get("size") != key[1] or rec.get("mtime_ns") != key[2]:
            state = None
        elif not rec.get("ok"):
            return False
    return state


def delete_repo(repo_id: str, cache: Path | None = None) -> Path | None:
    """Remove a repo from the HF cache through huggingface_hub's cache API (its revisions,
    their blobs and refs); what that API does not list (unfinished downloads, a folder without
    snapshots) goes with the folder. Returns the folder, or None when it was not there."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.utils import CacheNotFound

    root = cache or hf_hub_cache()
    folder = repo_dir(repo_id, root)
    if not folder.exists():
        return None
    try:
        info = scan_cache_dir(root)
    except (CacheNotFound, OSError) as exc:
        log.debug("huggingface_hub cannot scan %s (%s): removing %s whole", root, exc, folder)
    else:
        commits = [
            rev.commit_hash
            for repo in info.repos
            if repo.repo_type == "model" and repo.repo_id == repo_id
            for rev in repo.revisions
        ]
        if commits:
            info.delete_revisions(*commits).execute()
    if folder.exists():
        remove_tree(folder)
    return folder


def remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
