"""LLM over llama-cpp-python: one GGUF file, its own chat template, tokens streamed.

The KV cache of the previous prompt stays in the context, and llama-cpp-python reuses its
longest common token prefix with the next prompt, so the system prompt and earlier turns are
not evaluated again; `warmup()` evaluates the system prompt once so turn 1 starts warm too.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ...errors import DeviceUnavailable, ModelLoadError, S2SError
from ...models.resolve import resolve_model
from ..base import LLMEngine, require

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"


def gguf_path(path: Path) -> Path:
    """The GGUF file for a resolved model path (a folder must hold exactly one)."""
    if path.is_dir():
        files = sorted(path.glob("*.gguf"))
        if not files:
            raise ModelLoadError(
                f"{path} holds no .gguf file: the llama-cpp backend needs a "
                "GGUF model (or choose the transformers backend)"
            )
        if len(files) > 1:
            names = ", ".join(f.name for f in files[:4])
            raise ModelLoadError(
                f"{path} holds several GGUF files ({names}): choose one with "
                "--set llm.model_file=NAME"
            )
        path = files[0]
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(f"cannot read the LLM file {path}: {exc}") from exc
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path.name} is not a GGUF model file: the llama-cpp backend "
            "needs a .gguf file (download it again if it should be one)"
        )
    return path


def gpu_layers(device: str) -> int:
    """All layers on the GPU for CUDA and Apple (Metal) devices, none on CPU."""
    return -1 if device.startswith("cuda") or device in ("mps", "mlx") else 0


class LlamaCppLLM(LLMEngine):
    name = "llama-cpp"
    devices = ("cuda", "mps", "cpu")  # "mps" = llama.cpp's Metal offload
    extra = "llama"
    suggested_on = ("cpu", "cuda", "mps")
    quant_note = "llama.cpp runs the quantization of the GGUF file: pick a Q4/Q5/Q8 file."

    @classmethod
    def recognises(cls, model) -> bool:
        return model.has_suffix(".gguf")

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.llm = None
        self.model_path: Path | None = None
        self.last_stats: dict = {}

    def load(self) -> None:
        llama_cpp = require("llama_cpp", "llama-cpp", "llama-cpp-python", "llama")
        path = gguf_path(resolve_model(self.settings.model, "llm", self.settings.model_file))
        n_gpu = gpu_layers(self.device)
        if n_gpu and not llama_cpp.llama_supports_gpu_offload():
            raise DeviceUnavailable(
                f"llm.device is {self.device} but this llama-cpp-python was built for CPU only: "
                "reinstall it with GPU support (CMAKE_ARGS=-DGGML_CUDA=on on NVIDIA) "
                "or set llm.device=cpu"
            )
        kwargs = {}
        if self.device.startswith("cuda:"):
            kwargs["main_gpu"] = int(self.device.split(":", 1)[1])
        t0 = time.monotonic()
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=int(self.settings.context_tokens),
                n_threads=int(self.settings.threads) or os.cpu_count() or 1,
                n_gpu_layers=n_gpu,
                verbose=False,
                **kwargs,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(
                f"llama.cpp could not load {path.name} ({exc}): the file may "
                "be truncated or of a model llama.cpp does not know; "
                "download it again or update llama-cpp-python"
            ) from exc
        self.model_path = path
        self.load_s = time.monotonic() - t0
        self.loaded = True
        log.info("llama.cpp loaded %s (%d GPU layers) in %.2f s", path.name, n_gpu, self.load_s)

    def warmup(self) -> None:
        """Evaluate the system prompt once, so its KV cache is ready for the first turn."""
        messages = [{"role": "user", "content": "Hi"}]
        if self.settings.system_prompt.strip():
            messages.insert(0, {"role": "system", "content": self.settings.system_prompt.strip()})
        for _ in self.stream(messages, threading.Event(), max_new_tokens=1):
            pass

    def stream(
        self, messages: list[dict], stop: threading.Event, max_new_tokens: int | None = None
    ) -> Iterator[str]:
        if self.llm is None:
            raise ModelLoadError("the LLM is not loaded yet")
        if stop.is_set():
            return
        temperature = float(self.settings.temperature)
        t0 = time.monotonic()
        stats = {"tokens": 0, "first_token_s": None, "finish": None}
        self.last_stats = stats
        chunks = self.llm.create_chat_completion(
            messages=messages,
            stream=True,
            max_tokens=int(max_new_tokens or self.settings.max_new_tokens),
            temperature=temperature,  # 0 ⇒ greedy in llama-cpp-python
            top_k=40 if temperature > 0 else 1,
        )
        try:
            for chunk in chunks:
                if stop.is_set():
                    break
                choice = chunk["choices"][0]
                if choice.get("finish_reason"):
                    stats["finish"] = choice["finish_reason"]
                text = choice.get("delta", {}).get("content") or ""
                if text:
                    stats["tokens"] += 1
                    if stats["first_token_s"] is None:
                        stats["first_token_s"] = time.monotonic() - t0
                    yield text
        except ValueError as exc:  # the prompt does not fit in n_ctx
            raise S2SError(
                f"the conversation does not fit the LLM's context ({exc}): "
                "lower llm.history_turns or raise llm.context_tokens"
            ) from exc
        finally:
            chunks.close()  # ends generation now; the KV cache keeps what was evaluated
            stats["total_s"] = time.monotonic() - t0
            if stop.is_set():
                stats["finish"] = "cancelled"
