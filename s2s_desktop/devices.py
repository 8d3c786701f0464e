"""Compute devices: which device each stage runs on, refusals with reasons, CPU fallback.

A stage's own `device` wins over the global `settings.device`. `auto` picks MLX on Apple
Silicon where the stage's backend has an MLX implementation (else MPS for torch backends, CPU
for the rest), CUDA where an NVIDIA GPU is usable, else CPU. Detection is cheap (no torch
import, except on Apple Silicon where only torch can say whether MPS works) and cached; tests
inject a `Platform` instead.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import platform as _platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .engines import registry
from .errors import DeviceUnavailable, SettingsError, is_gpu_failure
from .states import STAGES

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Platform:
    """What this machine offers. Built by `detect_platform()`; tests build their own."""

    system: str  # platform.system(): "Linux", "Darwin", "Windows"
    machine: str  # "x86_64", "AMD64", "arm64", "aarch64"
    cuda_count: int = 0
    has_mps: bool = False  # torch with the MPS backend on Apple Silicon
    has_mlx: bool = False  # the mlx package is installed (Metal on macOS, CPU/CUDA elsewhere)

    @property
    def apple_silicon(self) -> bool:
        return self.system == "Darwin" and self.machine == "arm64"


def _cuda_count() -> int:
    """NVIDIA GPUs usable here, asking the cheapest library that can tell."""
    if sys.platform == "darwin":
        return 0
    try:  # ships with faster-whisper; answers in milliseconds, no CUDA context
        import ctranslate2

        n = int(ctranslate2.get_cuda_device_count())
        if n:
            return n
    except Exception as exc:  # noqa: BLE001 - a broken CUDA install counts as no GPU
        log.debug("ctranslate2 CUDA probe failed: %s", exc)
    torch = sys.modules.get("torch")  # only if something already paid for importing it
    if torch is not None:
        try:
            return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
        except Exception as exc:  # noqa: BLE001
            log.debug("torch CUDA probe failed: %s", exc)
    try:  # onnxruntime-gpu lists its CUDA provider even without a GPU: also need a device node
        import onnxruntime

        if "CUDAExecutionProvider" in onnxruntime.get_available_providers() and (
            os.path.exists("/dev/nvidia0") or sys.platform == "win32"
        ):
            return 1
    except Exception as exc:  # noqa: BLE001
        log.debug("onnxruntime CUDA probe failed: %s", exc)
    return 0


def _has_mps(system: str, machine: str) -> bool:
    """Whether torch can use the Apple GPU. Only torch knows: a Mac VM (GitHub's arm64
    runners: a paravirtual Metal device) or an older macOS has no MPS even where torch is
    installed, so torch is imported here (on Apple Silicon only; once, detection is cached)."""
    if system != "Darwin" or machine != "arm64" or importlib.util.find_spec("torch") is None:
        return False
    try:
        import torch

        return bool(torch.backends.mps.is_available())
    except Exception as exc:  # noqa: BLE001 - a broken torch install means no MPS, not a crash
        log.warning("torch could not say whether MPS is available (%s): not using mps", exc)
        return False


@functools.lru_cache(maxsize=1)
def detect_platform() -> Platform:
    system, machine = _platform.system(), _platform.machine()
    return Platform(
        system=system,
        machine=machine,
        cuda_count=_cuda_count(),
        has_mps=_has_mps(system, machine),
        has_mlx=importlib.util.find_spec("mlx") is not None,
    )


# ---------------------------------------------------------------- resolution


def _stage_section(settings, stage: str):
    if stage not in STAGES:
        raise SettingsError(f"unknown stage '{stage}': choose one of {', '.join(STAGES)}")
    return getattr(settings, stage)


def _refuse_unavailable(kind: str, index: int | None, plat: Platform, where: str) -> None:
    """Raise DeviceUnavailable if the device itself is not on this machine."""
    if kind == "cuda":
        if plat.system == "Darwin":
            raise DeviceUnavailable(
                f"{where}: CUDA does not exist on macOS; use mlx (Apple GPU), mps or cpu"
            )
        if plat.cuda_count == 0:
            raise DeviceUnavailable(
                f"{where}: no usable NVIDIA GPU found (driver or CUDA libraries missing?); "
                "use cpu, or install the NVIDIA driver"
            )
        if index is not None and index >= plat.cuda_count:
            raise DeviceUnavailable(
                f"{where}: cuda:{index} does not exist; this machine has {plat.cuda_count} "
                f"GPU(s): cuda:0 … cuda:{plat.cuda_count - 1}"
            )
    elif kind == "mps":
        if not plat.apple_silicon:
            raise DeviceUnavailable(f"{where}: mps needs a Mac with Apple Silicon; use cpu")
        if not plat.has_mps:
            raise DeviceUnavailable(
                f"{where}: mps needs PyTorch with MPS support (macOS 12.3+): "
                'pip install "s2s-desktop[torch]", or use mlx/cpu'
            )
    elif kind == "mlx" and not plat.apple_silicon and not plat.has_mlx:
        raise DeviceUnavailable(
            f"{where}: mlx needs a Mac with Apple Silicon (on Linux only the slow "
            'CPU build: pip install "mlx[cpu]"); use cpu or cuda'
        )


def _parse(device: str, where: str) -> tuple[str, int | None]:
    kind, _, idx = device.strip().lower().partition(":")
    if kind not in ("auto", "cpu", "cuda", "mps", "mlx") or (idx and kind != "cuda"):
        raise SettingsError(f"{where}: '{device}' is not one of auto, cpu, cuda, cuda:N, mps, mlx")
    if idx and not idx.isdigit():
        raise SettingsError(f"{where}: '{device}' needs a GPU number, like cuda:0")
    return kind, (int(idx) if idx else None)


def _auto(stage: str, backend: str, supported: tuple[str, ...], plat: Platform) -> str:
    if plat.apple_silicon:
        if "mlx" in supported:
            return "mlx"
        if "mps" in supported and plat.has_mps:
            return "mps"
    elif plat.cuda_count and "cuda" in supported:
        return "cuda"
    if "cpu" in supported:
        return "cpu"
    if "mlx" in supported and plat.has_mlx:  # MLX's own CPU backend off Apple Silicon
        return "mlx"
    alt = registry.alternative(stage, "cpu") or "another backend"
    raise DeviceUnavailable(
        f"{stage}: backend '{backend}' needs a Mac with Apple Silicon (MLX); "
        f"choose {alt} for this machine"
    )


def resolve_device(stage: str, settings, platform: Platform | None = None) -> str:
    """Concrete device ("cpu", "cuda", "cuda:N", "mps", "mlx") for `stage`, or DeviceUnavailable
    with the reason and what to choose instead."""
    plat = platform or detect_platform()
    section = _stage_section(settings, stage)
    backend = section.backend
    own = (section.device or "").strip()
    if own:
        requested, where = own, f"{stage}.device"
    elif stage == "vad":  # a few ms per clip on CPU: a GPU round trip would cost more
        requested, where = "cpu", "vad.device"
    else:
        requested, where = settings.device or "auto", "device"
    kind, index = _parse(requested, where)
    supported = registry.engine_class(stage, backend).devices  # SettingsError if unknown
    if not supported:
        return "cpu"  # remote API or nothing to run: any request is fine
    if kind == "auto":
        return _auto(stage, backend, supported, plat)
    _refuse_unavailable(kind, index, plat, where)
    if kind not in supported:
        alt = registry.alternative(stage, kind)
        hint = f"choose the {alt} backend" if alt and alt != backend else "choose another device"
        can = ", ".join(supported)
        raise DeviceUnavailable(
            f"{stage}: backend '{backend}' cannot run on {kind} (it runs on {can}); {hint} "
            f"or set {stage}.device to one of {can}"
        )
    return requested.strip().lower()


def validate_devices(settings, platform: Platform | None = None) -> list[str]:
    """Problems with the device settings, one line each, for the settings dialog."""
    problems = []
    for stage in STAGES:
        try:
            resolve_device(stage, settings, platform)
        except (DeviceUnavailable, SettingsError) as exc:
            problems.append(str(exc))
    return problems


# ---------------------------------------------------------------- fallback to CPU


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "…"


def load_with_fallback(
    make_engine: Callable[[str], Any],
    device: str,
    notice: Callable[[str], None],
    label: str | None = None,
    warmup: bool = True,
):
    """Build `make_engine(device)`, load (and warm up) it; on a GPU failure build and load it on
    the CPU instead and say so through `notice`. Other errors are raised unchanged."""
    engine = None
    try:
        engine = make_engine(device)
        engine.load()
        if warmup:
            engine.warmup()
        return engine
    except BaseException as exc:
        if device == "cpu" or not is_gpu_failure(exc):
            raise
        first = exc
    name = label or getattr(engine, "name", None) or "engine"
    if engine is not None:
        try:
            engine.unload()  # give the GPU memory back before the CPU copy loads
        except Exception as exc:  # noqa: BLE001
            log.debug("unload after GPU failure failed: %s", exc)
    log.warning("%s failed on %s, falling back to CPU", name, device, exc_info=first)
    try:
        engine = make_engine("cpu")
        engine.load()
        if warmup:
            engine.warmup()
    except DeviceUnavailable as exc:  # the backend has no CPU mode (e.g. MLX): report both
        raise DeviceUnavailable(
            f"{name} could not use {device} ({_short(first)}); {exc}"
        ) from first
    notice(f"{name} could not use {device} ({_short(first)}); running on CPU instead")
    return engine


# ---------------------------------------------------------------- listing


def _total_ram() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine() or "CPU"


def _cuda_devices(count: int) -> list[dict]:
    """Names and memory of the NVIDIA GPUs: nvidia-smi, else an already imported torch."""
    try:
        res = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        out = []
        for i, line in enumerate(res.stdout.strip().splitlines()):
            name, _, mib = line.rpartition(",")
            out.append(
                {"name": name.strip(), "kind": f"cuda:{i}", "memory_bytes": int(float(mib)) * 2**20}
            )
        if out:
            return out
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    torch = sys.modules.get("torch")  # ships with the driver: nvidia-smi is nearly always there
    if torch is not None:
        try:
            out = []
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                out.append({"name": p.name, "kind": f"cuda:{i}", "memory_bytes": p.total_memory})
            if out:
                return out
        except Exception as exc:  # noqa: BLE001
            log.debug("torch could not list CUDA devices: %s", exc)
    return [{"name": "NVIDIA GPU", "kind": f"cuda:{i}", "memory_bytes": None} for i in range(count)]


def compute_devices(platform: Platform | None = None) -> list[dict]:
    """Every compute device here: name, kind (what to put in a device setting), memory_bytes."""
    plat = platform or detect_platform()
    ram = _total_ram()
    out = [{"name": _cpu_name(), "kind": "cpu", "memory_bytes": ram}]
    if plat.cuda_count:
        out += _cuda_devices(plat.cuda_count)
    if plat.apple_silicon:  # unified memory: the GPU shares the machine's RAM
        if plat.has_mlx:
            out.append({"name": "Apple GPU (MLX, Metal)", "kind": "mlx", "memory_bytes": ram})
        if plat.has_mps:
            out.append({"name": "Apple GPU (PyTorch MPS)", "kind": "mps", "memory_bytes": ram})
    elif plat.has_mlx:
        out.append({"name": "MLX (CPU build)", "kind": "mlx", "memory_bytes": ram})
    return out
