"""Models too big for one wheel: parts shipped by several pip packages, joined at first use.

A catalog package entry with `joined` (the starter Whisper base: `model.bin` in two packages)
is assembled into the app's cache folder the first time its `pkg:` reference is resolved: each
part is checked against its pinned sha256 while it is copied, the joined file against its own,
and the entry's small files (config, tokenizer) are copied beside it, checked the same way.
The checks are remembered by size and mtime (`cache.record_checks`), so a later load reads
nothing again unless a file changed. No hub, no network.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path, PurePosixPath

from .. import config
from ..errors import ModelLoadError, ModelNotFound, S2SError
from . import cache
from .catalog import CatalogEntry, CatalogPart, load_catalog
from .resolve import package_path

log = logging.getLogger(__name__)

REINSTALL = 'pip install --force-reinstall "s2s-desktop[starter]"'


def joined_folder(entry: CatalogEntry) -> Path:
    """Where the entry's model is assembled: the app's cache, one folder per catalog id."""
    return config.cache_dir() / "joined" / entry.id


def entry_for_ref(ref: str) -> CatalogEntry | None:
    """The catalog entry whose model is joined from parts and has this `pkg:` reference."""
    try:
        catalog = load_catalog()
    except S2SError:
        return None
    return next((e for e in catalog if e.joined is not None and e.ref == ref), None)


def part_path(part: CatalogPart) -> Path | None:
    root = package_path(part.module)
    return None if root is None else root / part.name


def source_files(entry: CatalogEntry) -> list[tuple[Path | None, Path]]:
    """(file in its package, copy in the model folder) for the entry's small files."""
    module, _, sub = entry.ref[4:].partition("/")
    root = package_path(module)
    out = []
    for f in entry.files or ():
        rel = PurePosixPath(f.name)
        inside = rel.relative_to(sub) if sub and rel.is_relative_to(sub) else rel
        out.append((root / f.name if root else None, joined_folder(entry) / inside))
    return out


def _missing_packages(entry: CatalogEntry) -> list[str]:
    names = [] if package_path(entry.ref[4:].partition("/")[0]) else [entry.package]
    for part in entry.joined.parts:
        path = part_path(part)
        if (path is None or not path.is_file()) and part.package not in names:
            names.append(part.package)
    return names


def is_ready(entry: CatalogEntry) -> bool:
    """Every file of the joined model is there and passed its check since it last changed."""
    folder = joined_folder(entry)
    paths = [dest for _, dest in source_files(entry)] + [folder / entry.joined.name]
    return all(p.is_file() for p in paths) and cache.recorded_checks(paths) is True


def _damaged(what: str, package: str, got: str, want: str) -> ModelLoadError:
    return ModelLoadError(
        f"{what} from the pip package {package} is damaged (sha256 {got[:12]}…, expected "
        f"{want[:12]}…): reinstall it with pip install --force-reinstall {package}"
    )


def _copy_checked(src: Path, dest: Path, sha256: str | None, package: str) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        while block := fin.read(cache.CHUNK):
            digest.update(block)
            fout.write(block)
    if sha256 and digest.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise _damaged(src.name, package, digest.hexdigest(), sha256)
    os.replace(tmp, dest)


def _join(entry: CatalogEntry, dest: Path) -> None:
    joined = entry.joined
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    whole = hashlib.sha256()
    try:
        with open(tmp, "wb") as fout:
            for part in joined.parts:
                digest = hashlib.sha256()
                with open(part_path(part), "rb") as fin:
                    while block := fin.read(cache.CHUNK):
                        digest.update(block)
                        whole.update(block)
                        fout.write(block)
                if digest.hexdigest() != part.sha256:
                    raise _damaged(part.name, part.package, digest.hexdigest(), part.sha256)
        if whole.hexdigest() != joined.sha256:
            raise ModelLoadError(
                f"{joined.name} joined from {', '.join(p.package for p in joined.parts)} is not "
                f"the file the catalog pins (sha256 {whole.hexdigest()[:12]}…): {REINSTALL}"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def ensure_joined(entry: CatalogEntry) -> Path:
    """The entry's model folder, assembled and checked now if it is not already."""
    folder = joined_folder(entry)
    if is_ready(entry):
        return folder
    missing = _missing_packages(entry)
    if missing:
        raise ModelNotFound(
            f"{entry.stage} model '{entry.name}' needs the pip package(s) {', '.join(missing)}: "
            f'pip install {" ".join(missing)} (or pip install "s2s-desktop[starter]")'
        )
    need = sum(p.size for p in entry.joined.parts)
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.disk_usage(folder).free < need:
        raise ModelLoadError(
            f"joining {entry.name} needs {need // 2**20} MB free in {folder}: free some space"
        )
    log.info("joining %s into %s (first use)", entry.name, folder)
    for (src, dest), f in zip(source_files(entry), entry.files or (), strict=True):
        _copy_checked(src, dest, f.sha256, entry.package)
    target = folder / entry.joined.name
    _join(entry, target)
    cache.record_checks({p: True for p in [dest for _, dest in source_files(entry)] + [target]})
    return folder
