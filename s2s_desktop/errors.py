"""Typed, user-facing errors. Each message says what went wrong and what to do next."""

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
