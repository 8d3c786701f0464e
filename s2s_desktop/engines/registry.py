"""Backend name → engine class, imported lazily so a missing optional package only fails when
that backend is chosen (with a message naming the extra to install)."""

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


def create(stage: str, settings, device: str):
    """Build (not load) the engine for `stage` from its settings section."""
    return engine_class(stage, settings.backend)(settings, device)
