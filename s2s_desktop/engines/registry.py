"""Backend name → engine class: the one table of backends. What a backend is (stage, devices,
pip extra, model formats, where it is suggested) is declared on its class (see base.Engine);
devices, the importer and the settings read it through here. Adding a backend = its file +
one line below. Modules are imported when asked for: they import their packages only in
`load()`, so a missing optional package fails only when that backend is chosen."""

from __future__ import annotations

import importlib

from ..errors import SettingsError

BACKENDS: dict[str, dict[str, str]] = {
    "vad": {
        "silero-onnx": "s2s_desktop.engines.vad.silero_onnx:SileroOnnxVAD",
        "silero": "s2s_desktop.engines.vad.silero_torch:SileroTorchVAD",
        "none": "s2s_desktop.engines.vad.passthrough:PassthroughVAD",
    },
    "stt": {
        "faster-whisper": "s2s_desktop.engines.stt.faster_whisper:FasterWhisperSTT",
        "transformers": "s2s_desktop.engines.stt.transformers_whisper:TransformersWhisperSTT",
        "mlx-whisper": "s2s_desktop.engines.stt.mlx_whisper:MLXWhisperSTT",
        "parakeet-mlx": "s2s_desktop.engines.stt.parakeet_mlx:ParakeetMLXSTT",
        "openai": "s2s_desktop.engines.stt.openai_stt:OpenAISTT",
    },
    "llm": {
        "llama-cpp": "s2s_desktop.engines.llm.llama_cpp:LlamaCppLLM",
        "transformers": "s2s_desktop.engines.llm.transformers_llm:TransformersLLM",
        "mlx-lm": "s2s_desktop.engines.llm.mlx_lm:MLXLMLLM",
        "openai": "s2s_desktop.engines.llm.openai_llm:OpenAILLM",
    },
    "tts": {
        "piper": "s2s_desktop.engines.tts.piper:PiperTTS",
        "vits": "s2s_desktop.engines.tts.vits:VitsTTS",
        "kokoro": "s2s_desktop.engines.tts.kokoro:KokoroTTS",
        "mlx-audio": "s2s_desktop.engines.tts.mlx_audio:MLXAudioTTS",
        "qwen3-tts": "s2s_desktop.engines.tts.qwen3_tts:Qwen3TTS",
    },
}


def backend_names(stage: str) -> list[str]:
    return list(BACKENDS[stage])


def engine_class(stage: str, backend: str):
    try:
        target = BACKENDS[stage][backend]
    except KeyError:
        raise SettingsError(
            f"{stage}.backend: unknown backend '{backend}'; choose one of "
            f"{', '.join(BACKENDS.get(stage, {}))}"
        ) from None
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def find(stage: str, backend: str):
    """The engine class of `backend`, or None when the stage has no such backend."""
    return engine_class(stage, backend) if backend in BACKENDS.get(stage, {}) else None


def engine_classes(stage: str | None = None) -> list[tuple[str, str, type]]:
    """(stage, backend, class) of every backend (of one stage), in the table's order."""
    stages = [stage] if stage else list(BACKENDS)
    return [(s, name, engine_class(s, name)) for s in stages for name in BACKENDS[s]]


def alternative(stage: str, kind: str) -> str | None:
    """The backend the stage suggests for device kind `kind` (when the chosen one cannot run
    there), or None."""
    return next((n for _, n, c in engine_classes(stage) if kind in c.suggested_on), None)


def recognise(path) -> tuple[str, str] | None:
    """(stage, backend) of a model file or folder, from the files it holds; None if unknown."""
    from .base import ModelOnDisk

    model = ModelOnDisk(path)
    if not model.is_file and not model.path.is_dir():
        return None
    ordered = sorted(engine_classes(), key=lambda e: e[2].recognise_order)  # stable: table order
    return next(((s, n) for s, n, c in ordered if c.recognises(model)), None)


def create(stage: str, settings, device: str):
    """Build (not load) the engine for `stage` from its settings section."""
    return engine_class(stage, settings.backend)(settings, device)
