"""Importing a model the user already has: recognise what a folder or file holds, match it to
the catalog (so an offline copy of a catalog repo stands in for the download), and record it
in `models.json` (see cache.py), registered where it is or copied into the app's data folder.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from .. import config
from ..engines import registry
from ..errors import S2SError
from . import cache, download
from .catalog import Catalog, CatalogEntry


def detect_model_kind(path: Path) -> tuple[str, str] | None:
    """(stage, backend) of a model file or folder, from the files it holds; None if unknown.
    Each backend's class says which layouts it runs (`recognises`)."""
    return registry.recognise(path)


EXPECTED_LAYOUTS = (
    "model.bin + config.json (CTranslate2 Whisper), a .gguf file (LLM), a .onnx voice with its "
    ".onnx.json (Piper), config.json + .safetensors (transformers), or a models--org--name "
    "folder from a Hugging Face cache"
)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "model"


def model_files(src: Path) -> list[Path]:
    """The files that make up the model at `src` (a folder, or a file and its sidecars)."""
    if src.is_dir():
        return sorted(cache._walk_files(src))
    files = [src]
    sidecar = src.with_name(src.name + ".json")
    if sidecar.is_file():
        files.append(sidecar)
    return files


def is_hf_cache_repo(src: Path) -> bool:
    return src.is_dir() and src.name.startswith("models--") and (src / "snapshots").is_dir()


def copy_hf_cache_repo(src: Path) -> str:
    """Merge a models--org--name folder (another machine's HF cache) into ours; its repo id."""
    root = cache.hf_hub_cache()
    download.check_free_space(root, cache.tree_size(src))
    shutil.copytree(src, root / src.name, symlinks=True, dirs_exist_ok=True)
    return src.name[len("models--") :].replace("--", "/", 1)


def match_catalog(
    catalog: Catalog, stage: str, files: list[dict], as_id: str | None
) -> CatalogEntry | None:
    """The catalog entry these files are a copy of: same names, digests where known, and
    a size near the catalog's when names alone are ambiguous (whisper base vs small)."""
    by_name = {f["name"].rsplit("/", 1)[-1]: f for f in files}
    total = sum(f["size"] for f in files)
    candidates = []
    for e in catalog:
        if e.source != "hf" or not e.files or e.stage != stage or (as_id and e.id != as_id):
            continue
        wanted = [(f, by_name.get(f.name.rsplit("/", 1)[-1])) for f in e.files]
        if any(have is None for _, have in wanted):
            continue
        if any(
            (f.sha256 and f.sha256 != have["sha256"]) or (f.size and f.size != have["size"])
            for f, have in wanted
        ):
            continue
        candidates.append(e)
    if as_id and not candidates:
        raise S2SError(
            f"{as_id}: the folder's files do not match that catalog entry (names, sizes or sha256)"
        )
    if len(candidates) > 1:
        candidates = [
            e
            for e in candidates
            if e.size_bytes and abs(total - e.size_bytes) <= 0.15 * e.size_bytes
        ]
    return candidates[0] if len(candidates) == 1 else None


def copy_into_data_dir(src: Path, files: list[dict], model_id: str) -> Path:
    root = config.data_dir() / "models"
    download.check_free_space(root, sum(f["size"] for f in files))
    tmp, final = root / f".{model_id}.importing", root / model_id
    cache.remove_tree(tmp)
    base = src if src.is_dir() else src.parent
    for f in files:
        (tmp / f["name"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(base / f["name"], tmp / f["name"])
    os.replace(tmp, final)  # the folder appears whole or not at all
    return final if src.is_dir() else final / src.name


def register(
    catalog: Catalog, src: Path, copy: bool, as_id: str | None
) -> tuple[dict, CatalogEntry | None]:
    """Record the model at `src` in models.json; returns (the record, its catalog entry)."""
    kind = detect_model_kind(src)
    if kind is None:
        raise S2SError(f"{src} does not look like a model: expected {EXPECTED_LAYOUTS}")
    stage, backend = kind
    base = src if src.is_dir() else src.parent
    files = [
        {
            "name": p.relative_to(base).as_posix(),
            "size": p.stat().st_size,
            "sha256": cache.file_digest(p),
        }
        for p in model_files(src)
    ]
    entry = match_catalog(catalog, stage, files, as_id)
    with cache.STATE_LOCK:
        imports = cache.load_imports()
        taken = {r["id"] for r in imports if r["path"] != str(src)} | {e.id for e in catalog}
        model_id = base_id = "local-" + _slug(src.stem if src.is_file() else src.name)
        n = 2
        while model_id in taken:
            model_id, n = f"{base_id}~{n}", n + 1
        where = copy_into_data_dir(src, files, model_id) if copy else src
        record = {
            "id": model_id,
            "name": src.name,
            "stage": stage,
            "backend": backend,
            "path": str(where),
            "copied": copy,
            "source_path": str(src),
            "catalog_id": entry.id if entry else None,
            "repo": entry.repo if entry else None,
            "files": files,
            "size_bytes": sum(f["size"] for f in files),
            "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        cache.save_imports([r for r in imports if r["path"] != str(where)] + [record])
    if entry is not None:  # files that matched a catalog sha256 are verified already
        known = {f.name.rsplit("/", 1)[-1] for f in entry.files or () if f.sha256}
        where_base = where if where.is_dir() else where.parent
        cache.record_checks(
            {where_base / f["name"]: True for f in files if f["name"].rsplit("/", 1)[-1] in known}
        )
    return record, entry
