"""Typed, user-facing errors. Each message says what went wrong and what to do next."""

import re
import sys


class S2SError(Exception):
    """Base of every error the UI or CLI shows to the user as one clear line."""


class ModelNotFound(S2SError):
    """A model path, package or cache entry does not exist."""


class ModelLoadError(S2SError):
    """Model files exist but could not be loaded (corrupt, truncated, wrong format)."""


class BackendUnavailable(S2SError):
    """The Python package a backend needs is not installed."""

    def __init__(self, backend: str, package: str, extra: str | None = None):
        hint = f'pip install "s2s-desktop[{extra}]"' if extra else f"pip install {package}"
        if getattr(sys, "frozen", False):  # an installer build: pip cannot add to it
            hint = (
                "this installer does not include it; choose another backend in "
                f"Settings, or use the pip install ({hint})"
            )
        super().__init__(f"backend '{backend}' needs the package '{package}': {hint}")
        self.backend, self.package, self.extra = backend, package, extra


class DeviceUnavailable(S2SError):
    """The requested compute device cannot be used here."""


class UnsafeModelFormat(S2SError):
    """Weights in a format that can run code on load (pickle): never loaded."""


class AudioInputError(S2SError):
    """The input file or microphone cannot be read."""


class AudioDeviceError(S2SError):
    """No usable audio device, or it went away."""


class SettingsError(S2SError):
    """A setting key or value is invalid."""


# what GPU failures say (the GPU→CPU fallback in devices.py, qwen3-tts's own retry)
_GPU_WORDS = re.compile(
    r"cuda|cublas|cudnn|cudart|cufft|curand|nvrtc|nvidia|nccl|\bmps\b|metal|"
    r"out of memory|outofmemory|no kernel image|device-side|hip error|rocm",
    re.IGNORECASE,
)
_NOT_GPU = (ModelNotFound, ModelLoadError, BackendUnavailable, UnsafeModelFormat, SettingsError)


def is_gpu_failure(exc: BaseException) -> bool:
    """True when `exc` looks like the accelerator failing (OOM, missing CUDA libraries, driver),
    so running the same model on the CPU is worth a try."""
    if isinstance(exc, DeviceUnavailable):
        return True
    if isinstance(exc, _NOT_GPU) or isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return False
    seen: BaseException | None = exc
    for _ in range(5):  # the GPU error is often the cause of a wrapper
        if seen is None:
            break
        text = f"{type(seen).__name__}: {seen}"
        if _GPU_WORDS.search(text):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
