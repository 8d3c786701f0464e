"""PyInstaller runtime hook: stand-ins for modules a flavour leaves out of the bundle.

Two packages import something heavy at their top for a feature this app never uses:
- faster-whisper imports PyAV (43-66 MB of FFmpeg) only to decode audio *files*; the app hands
  it numpy arrays.
- mlx-whisper's `transcribe` imports `timing`, which imports numba, llvmlite and scipy
  (~170 MB), only for word timestamps; the app never asks for them.

The flavour excludes those (packaging/flavours.py, `standins`). This finder sits last on
sys.meta_path, so it answers only when the real module is not in the bundle. Importing works;
using the feature raises an error that says what this build left out.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

LEFT_OUT = {
    "av": "decoding audio files with PyAV (FFmpeg)",
    "mlx_whisper.timing": "word timestamps (numba, scipy)",
}


class LeftOutOfBundle(ImportError):
    def __init__(self, fullname: str):
        super().__init__(
            f"{LEFT_OUT[fullname]} is not part of this build of S2S Desktop "
            f"('{fullname}' was left out to keep the installer small)",
            name=fullname,
        )


def _refuse(fullname: str):
    def refuse(*_args, **_kwargs):
        raise LeftOutOfBundle(fullname)

    return refuse


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise LeftOutOfBundle(self.__name__)


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return _StandInModule(spec.name)

    def exec_module(self, module):
        if module.__name__ == "mlx_whisper.timing":
            module.add_word_timestamps = _refuse(module.__name__)


class StandInFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in LEFT_OUT:
            return None
        return importlib.machinery.ModuleSpec(fullname, _StandInLoader())


def install() -> None:
    if not any(isinstance(f, StandInFinder) for f in sys.meta_path):
        sys.meta_path.append(StandInFinder())


install()
