"""Make the downloaded libraries loadable before CTranslate2 needs them: it dlopens
`libcublas.so.12` / `cublas64_12.dll` by name on first use, and a library already loaded under
that name is the one it gets."""

from __future__ import annotations

import ctypes
import logging
import os
import re
import sys
import threading
from pathlib import Path

from . import INSTALL_HINT, store

log = logging.getLogger(__name__)

# Load order on Linux (a library's dependencies first); anything else comes after.
LOAD_ORDER = (
    "cudart",
    "cublasLt",
    "cublas",
    "nvrtc",
    "cudnn_graph",
    "cudnn_engines_precompiled",
    "cudnn_engines_runtime_compiled",
    "cudnn_heuristic",
    "cudnn_ops",
    "cudnn_cnn",
    "cudnn_adv",
    "cudnn",
)


_ACTIVATED: set[str] = set()  # folders whose libraries are loaded
_KEEP: list = []  # DLL directory handles and loaded libraries live as long as the process
_LOCK = threading.Lock()


def forget(folder: Path) -> None:
    """`folder` was removed: a later install in this process loads its libraries again."""
    _ACTIVATED.discard(str(folder))


def load_rank(name: str) -> tuple[int, str]:
    """Sort key: dependencies before the libraries that need them."""
    stem = re.sub(r"^lib", "", name).split(".", 1)[0]
    stem = re.sub(r"64_\d+$", "", stem)  # cublasLt64_12 -> cublasLt, cudnn_ops64_9 -> cudnn_ops
    try:
        return LOAD_ORDER.index(stem), name
    except ValueError:
        return len(LOAD_ORDER), name


def _load_all(paths: list[Path], loader) -> dict[str, str]:
    """Load each library; one that fails is retried after the others (a dependency may have
    come in since). Returns {file name: error} for those that never loaded."""
    pending, errors = list(paths), {}
    while pending:
        failed = []
        for path in pending:
            try:
                _KEEP.append(loader(str(path)))
                errors.pop(path.name, None)
            except OSError as exc:
                errors[path.name] = str(exc)
                failed.append(path)
        if len(failed) == len(pending):
            break
        pending = failed
    return errors


def activate(folder: Path | None = None) -> str | None:
    """Make the downloaded libraries loadable for CTranslate2. None when done (or done before),
    else the reason they cannot be used. Never raises."""
    try:
        folder = folder or store.install_dir()
        with _LOCK:
            key = str(folder)
            if key in _ACTIVATED:
                return None
            reason = _activate(folder)
            if reason:  # not remembered: a later install in this process may fix it
                log.warning("CUDA libraries in %s not used: %s", folder, reason)
            else:
                _ACTIVATED.add(key)
            return reason
    except Exception as exc:  # noqa: BLE001 - the app must keep running on the CPU
        return f"activating the CUDA libraries failed unexpectedly: {exc}"


def _activate(folder: Path) -> str | None:
    if sys.platform not in ("win32",) and not sys.platform.startswith("linux"):
        return f"the downloaded CUDA libraries are for Windows and Linux, not {sys.platform}"
    st = store.status(folder)
    if not st.installed:
        return st.problem or "the CUDA libraries are not installed (s2s-desktop cuda install)"
    suffix = ".dll" if sys.platform == "win32" else ".so"
    libs = sorted(
        (folder / n for n in st.files if "/" not in n and suffix in n),
        key=lambda p: load_rank(p.name),
    )
    if sys.platform == "win32":
        # add_dll_directory serves Python's own loads; CTranslate2's plain LoadLibraryA
        # searches PATH, and a DLL loaded here already is found by its name.
        _KEEP.append(os.add_dll_directory(str(folder)))
        path = os.environ.get("PATH", "")
        if str(folder).lower() not in [p.lower() for p in path.split(os.pathsep)]:
            os.environ["PATH"] = str(folder) + os.pathsep + path
        errors = _load_all(libs, ctypes.WinDLL)
    else:
        # dlopen by name ("libcublas.so.12") returns a library already loaded under that name.
        errors = _load_all(libs, lambda p: ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL))
    if not errors:
        log.info("CUDA libraries from %s loaded: %s", folder, ", ".join(p.name for p in libs))
        return None
    text = "; ".join(f"{name}: {err}" for name, err in errors.items())
    if "libcuda.so" in text or "nvcuda" in text.lower():
        return f"the NVIDIA driver is not installed or not loadable ({text})"
    return f"cannot load {', '.join(errors)} ({text}): {INSTALL_HINT}"
