"""NVIDIA's CUDA libraries for faster-whisper, downloaded on first use (no Qt).

The installers ship CPU-only. CTranslate2 (under faster-whisper) runs on an NVIDIA GPU when it
can load cuBLAS 12 (and, for CTranslate2 4.5-4.6.2, cuDNN 9). Instead of a CUDA installer we
fetch NVIDIA's own runtime wheels from PyPI (`nvidia-cublas-cu12`, `nvidia-cudnn-cu12`),
check their sha256, and keep only their shared libraries (plus licences) in
`<user data dir>/cuda/cu12/`. `activate()` then makes them loadable before CTranslate2 needs
them: CTranslate2 dlopens `libcublas.so.12` / `cublas64_12.dll` by name on first use, and a
library already loaded under that name is the one it gets.

The index is PyPI's JSON API at S2S_CUDA_INDEX_URL (default https://pypi.org): any mirror that
serves `/pypi/<name>/json` works.

Modules: `wheels` (which packages and wheels, asked of the index), `store` (the install folder,
its manifest, status and removal), `install` (plan, download, verify, unpack, swap in),
`activate` (load the libraries into this process).
"""

from __future__ import annotations

from ..errors import S2SError

INSTALL_HINT = "run `s2s-desktop cuda install` again"


class CudaError(S2SError):
    """Downloading or installing the CUDA libraries failed; the message says what to do."""


class CudaUnsupported(CudaError):
    """This system cannot use the downloadable CUDA libraries."""


class CudaCancelled(CudaError):
    """The user cancelled; partial downloads are kept for a resume."""


from . import activate, install, store, wheels  # noqa: E402, F401 - they import the errors above
