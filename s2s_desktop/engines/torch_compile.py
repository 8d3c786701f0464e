"""Optional torch.compile for the torch engines (`llm.compile`, `tts.compile`).

Compilation is lazy in torch: `torch.compile` itself never fails, the first call does (no C++
compiler, an op inductor cannot lower). So an engine compiles inside its warm-up: the
modules' forwards are swapped for compiled ones, the warm-up request runs through them (the
slow compile happens at load, not on the first press), and on any failure the eager forwards
come back and a warning is logged — the user gets a slower model, never a crash.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from .base import require

log = logging.getLogger(__name__)


def use_user_cache_dirs() -> Path:
    """Point inductor's (and triton's) caches at the user cache dir before anything compiles;
    a TORCHINDUCTOR_CACHE_DIR the user chose is kept."""
    from ..config import cache_dir

    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is not None:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        # inductor writes its /tmp default into the environment on first use: not a choice
        if os.path.abspath(current) == os.path.abspath(default_cache_dir()):
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]
    default = cache_dir() / "torchinductor"  # never inside the installed package
    default.mkdir(parents=True, exist_ok=True)
    inductor = Path(os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(default)))
    triton = cache_dir() / "triton"
    os.environ.setdefault("TRITON_CACHE_DIR", str(triton))
    return inductor


def compile_mode(device: str) -> str | None:
    """CUDA graphs cut the per-token launch overhead on GPUs; the CPU gets the default mode."""
    return "reduce-overhead" if device.startswith("cuda") else None


def _short(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"{type(exc).__name__}: {text[:200]}"


def compile_with_fallback(
    modules: Sequence,
    device: str,
    label: str,
    warm: Callable[[], object],
    backend: str = "torch",
) -> bool:
    """Compile each module's forward, then run `warm()` through the compiled path.

    Returns True when `warm()` ran compiled. On any failure the eager forwards are put back,
    a warning names the reason, and False is returned: the caller then warms up eagerly."""
    torch = require("torch", backend, "torch", "torch")
    used = use_user_cache_dirs()
    saved = []  # (module, forward kept in its __dict__ or None) to undo the swap
    try:
        for module in modules:
            saved.append((module, module.__dict__.get("forward")))
            module.forward = torch.compile(module.forward, mode=compile_mode(device), dynamic=True)
        warm()
    except Exception as exc:  # noqa: BLE001 - any compile failure means: run eagerly
        for module, own in saved:
            if own is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = own
        log.warning(
            "%s: torch.compile failed (%s); running without compilation", label, _short(exc)
        )
        return False
    # a later recompile (a new input shape) that fails runs that call eagerly instead of
    # failing the turn; only the engines of this app compile in its process
    torch._dynamo.config.suppress_errors = True
    log.info("%s compiled with torch.compile on %s (cache %s)", label, device, used)
    return True
