"""Turn a model reference from the settings into a local path.

A reference is one of:
- a local path (file or folder), `~` expanded;
- `pkg:MODULE/SUBPATH`: a file or folder inside an installed Python package (the starter set);
  for a catalog model joined from several packages' parts, the folder it is joined into
  (`models/joined.py`);
- a Hugging Face repo id `org/name`, looked up in the local HF cache only — downloads go
  through the model manager, never behind the user's back. A folder imported with
  `s2s-desktop models import` as a copy of that repo stands in for it when the cache lacks it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from ..errors import ModelNotFound


def package_path(module: str) -> Path | None:
    """Folder of an installed package, found without importing it (some __init__s are heavy)."""
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    # A PyInstaller bundle ships model packages as files only, without their code.
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen and (Path(frozen) / module).is_dir():
        return Path(frozen) / module
    return None


def looks_like_repo_id(ref: str) -> bool:
    parts = ref.split("/")
    return (
        len(parts) == 2
        and all(parts)
        and not ref.startswith((".", "/", "~"))
        and not Path(ref).expanduser().exists()
    )


def hf_cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """Path of a cached snapshot of `repo_id` in the HF cache, or None (never downloads)."""
    from .cache import hf_hub_cache, snapshot_for

    # The cache folder is read from the environment now: huggingface_hub reads it at import.
    snap = snapshot_for(repo_id, revision or "main", hf_hub_cache())
    if snap is not None:
        return snap
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return Path(
            snapshot_download(
                repo_id, revision=revision, local_files_only=True, cache_dir=hf_hub_cache()
            )
        )
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        return None


def _in_import(root: Path, file: str) -> Path:
    """`file` inside an imported copy, whose layout may be flat where the repo has folders."""
    if root.is_file():
        return root
    exact = root / file
    flat = root / Path(file).name
    return flat if not exact.exists() and flat.exists() else exact


def resolve_model(ref: str, stage: str, file: str = "") -> Path:
    """Local path for `ref` (+ optional `file` inside it). Raises ModelNotFound with what to do."""
    if not ref:
        raise ModelNotFound(
            f"no {stage} model is set: choose one in Settings → Models "
            f"or pass --set {stage}.model=PATH"
        )
    if ref.startswith("pkg:"):
        from .joined import ensure_joined, entry_for_ref

        joined = entry_for_ref(ref)
        if joined is not None:
            folder = ensure_joined(joined)
            return folder / file if file else folder
        module, _, sub = ref[4:].partition("/")
        root = package_path(module)
        if root is None:
            pip_name = module.replace("_", "-")
            raise ModelNotFound(
                f"{stage} model package '{pip_name}' is not installed: "
                f'pip install {pip_name} (or pip install "s2s-desktop[starter]")'
            )
        path = root / sub if sub else root
    elif looks_like_repo_id(ref):
        snap = hf_cached_snapshot(ref)
        if snap is None:
            from .cache import imported_folder_for_repo

            imported = imported_folder_for_repo(ref)
            if imported is None:
                raise ModelNotFound(
                    f"{stage} model '{ref}' is not downloaded: "
                    f"run `s2s-desktop models download {ref}` or open Models…"
                )
            path = _in_import(imported, file) if file else imported
            file = ""
        else:
            path = snap
    else:
        path = Path(os.path.expanduser(ref))
    if file:
        path = path / file
    if not path.exists():
        raise ModelNotFound(
            f"{stage} model not found at {path}: check {stage}.model "
            "(a file, a folder, or a downloaded Hub id)"
        )
    return path
