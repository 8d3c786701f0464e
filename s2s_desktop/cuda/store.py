"""The install folder of the CUDA libraries: where it is, its manifest, whether it is complete,
and its removal."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from . import INSTALL_HINT, CudaError, CudaUnsupported, wheels
from .wheels import Package

FOLDER = "cu12"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


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


def install_dir() -> Path:
    return config.data_dir() / "cuda" / FOLDER


def download_dir() -> Path:
    return config.cache_dir() / "cuda-wheels"


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
        if data.get("platform") != wheels.platform_key():
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
    from .activate import forget  # activate reads the store: imported here, not at the top

    forget(target)
    return freed
