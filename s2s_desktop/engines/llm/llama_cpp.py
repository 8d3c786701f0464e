"""LLM over llama-cpp-python: one GGUF file, its own chat template, tokens streamed.

The KV cache of the previous prompt stays in the context, and llama-cpp-python reuses its
longest common token prefix with the next prompt, so the system prompt and earlier turns are
not evaluated again. Between turns `prime()` evaluates the next prompt's known start (system
prompt and history up to the next user message) in small batches, so at release only the new
question's tokens are evaluated; every evaluated token is counted (`last_stats`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ... import host
from ...errors import DeviceUnavailable, ModelLoadError, S2SError
from ...models.resolve import resolve_model
from ..base import WARMUP_LLM, LLMEngine, LLMOptions, require
from .history import prefix_ids
from .tool_calls import template_takes_tools

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
PRIME_BATCH = 16  # tokens per step of prime(): a new question waits at most one step
# the template a GGUF without its own chat template is rendered with (most chat models' own)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


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
        self.formatter = None
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
        self._threads = int(self.settings.threads) or host.cpu_count()
        self._threads_now = self._threads
        try:
            self.llm = _counting_llama(llama_cpp)(
                model_path=str(path),
                n_ctx=int(self.settings.context_tokens),
                n_threads=self._threads,
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
        self.formatter = _chat_formatter(self.llm)
        self.load_s = time.monotonic() - t0
        self.loaded = True
        log.info("llama.cpp loaded %s (%d GPU layers) in %.2f s", path.name, n_gpu, self.load_s)

    def can_call_tools(self) -> bool:
        return self.llm is not None and template_takes_tools(
            self.llm.metadata.get("tokenizer.chat_template"))

    def _render(self, messages: list[dict]):
        """The prompt through the GGUF's template, with the offered tools listed."""
        return self.formatter(messages=messages, tools=self.offered_tools or None)

    def set_threads(self, threads: int) -> None:
        threads = threads or self._threads
        if self.llm is None or threads == self._threads_now:
            return
        import llama_cpp

        # prompt batches keep every thread: they are evaluated while TTS is idle
        llama_cpp.llama_set_n_threads(self.llm.ctx, threads, self.llm.n_threads_batch)
        self._threads_now = threads

    def warmup(self) -> None:
        """One token, so the kernels are ready; the stage evaluates the system prompt next."""
        for _ in self.stream([{"role": "user", "content": "Hi"}], threading.Event(), WARMUP_LLM):
            pass

    def tokens(self, messages: list[dict]) -> list[int]:
        """The prompt's token ids, as the chat template renders it."""
        prompt = self._render(messages)
        return self._ids(prompt.prompt, prompt)

    def _ids(self, text: str, prompt) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=not prompt.added_special,
                                 special=True)

    def prefix_tokens(self, messages: list[dict], question: str = "") -> list[int]:
        """Token ids of the next prompt up to where its user message starts (or up to the end
        of the question's first words)."""
        prompt = self._render(messages)  # how this template tokenizes (BOS or not)
        return prefix_ids(messages, lambda m: self._render(m).prompt,
                          lambda text: self._ids(text, prompt), question)

    def prime(self, messages: list[dict], should_stop, question: str = "") -> int:
        if self.llm is None:
            return 0
        ids = self.prefix_tokens(messages, question)
        llm = self.llm
        keep = llm.longest_token_prefix(llm._input_ids, ids)
        if keep == len(ids) or should_stop():
            return 0
        if keep < llm.n_tokens and not llm._ctx.kv_cache_seq_rm(-1, keep, -1):
            keep = 0  # this model's memory cannot be cut back: evaluate from the start
            llm.reset()
        llm.n_tokens = keep
        done = 0
        for start in range(keep, len(ids), PRIME_BATCH):
            if should_stop():
                break
            llm.eval(ids[start : start + PRIME_BATCH])
            done += len(ids[start : start + PRIME_BATCH])
        llm._requires_eval = True  # the next prompt's suffix refreshes the logits
        log.debug("primed %d prompt tokens (%d were cached)", done, keep)
        return done

    def stream(
        self, messages: list[dict], stop: threading.Event, options: LLMOptions
    ) -> Iterator[str]:
        if self.llm is None:
            raise ModelLoadError("the LLM is not loaded yet")
        if stop.is_set():
            return
        temperature = float(options.temperature)
        t0 = time.monotonic()
        prompt = self._render(messages)
        ids = self._ids(prompt.prompt, prompt)
        # the KV cache holds this prompt's first `cached` tokens: only the rest is evaluated
        stats = {"tokens": 0, "first_token_s": None, "finish": None,
                 "prompt_tokens_evaluated": None, "prompt_tokens": len(ids),
                 "prompt_tokens_cached": self.llm.longest_token_prefix(self.llm._input_ids, ids)}
        self.last_stats = stats
        evaluated_before = self.llm.evaluated
        try:
            chunks = self.llm.create_completion(
                prompt=ids,
                stream=True,
                max_tokens=int(options.max_new_tokens),
                temperature=temperature,  # 0 ⇒ greedy in llama-cpp-python
                top_k=40 if temperature > 0 else 1,
                repeat_penalty=float(options.repeat_penalty),
                stop=prompt.stop,
                stopping_criteria=prompt.stopping_criteria,
            )
        except ValueError as exc:  # the prompt does not fit in n_ctx
            raise _too_long(exc) from exc
        try:
            for chunk in chunks:
                if stop.is_set():
                    break
                choice = chunk["choices"][0]
                if choice.get("finish_reason"):
                    stats["finish"] = choice["finish_reason"]
                text = choice.get("text") or ""
                if text:
                    stats["tokens"] += 1
                    if stats["first_token_s"] is None:
                        stats["first_token_s"] = time.monotonic() - t0
                        stats["prompt_tokens_evaluated"] = self.llm.evaluated - evaluated_before
                    yield text
        except ValueError as exc:
            raise _too_long(exc) from exc
        finally:
            chunks.close()  # ends generation now; the KV cache keeps what was evaluated
            stats["total_s"] = time.monotonic() - t0
            stats["evaluated"] = self.llm.evaluated - evaluated_before  # prompt + written
            if stop.is_set():
                stats["finish"] = "cancelled"


def _too_long(exc: Exception) -> S2SError:
    return S2SError(
        f"the conversation does not fit the LLM's context ({exc}): "
        "lower llm.history_turns or raise llm.context_tokens"
    )


def has_amx(llama_cpp) -> bool:
    """True when this llama.cpp build uses Intel AMX (Sapphire Rapids and later Xeons)."""
    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


def _counting_llama(llama_cpp):
    """llama_cpp.Llama that counts the tokens it evaluates (prompt and generated). Where the
    build uses AMX, weights stay in plain CPU buffers: llama.cpp's AMX matmul crashes the
    first answer on some of those CPUs (ggml-org/llama.cpp#20824, seen on this project's
    test machines: a segfault in ggml_backend_amx_mul_mat)."""
    plain_buffers = has_amx(llama_cpp)

    class CountingLlama(llama_cpp.Llama):
        evaluated = 0

        @property
        def model_params(self):
            return self._model_params

        @model_params.setter
        def model_params(self, params):  # Llama.__init__ sets it before loading the model
            if plain_buffers:
                params.use_extra_bufts = False
            self._model_params = params

        def eval(self, tokens):
            self.evaluated += len(tokens)
            super().eval(tokens)

    return CountingLlama


def _chat_formatter(llm):
    """The GGUF's own chat template as a formatter (ChatML where the file has none)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos_id, bos_id = llm.token_eos(), llm.token_bos()
    eos = llm._model.token_get_text(eos_id) if eos_id != -1 else ""
    bos = llm._model.token_get_text(bos_id) if bos_id != -1 else ""
    template = llm.metadata.get("tokenizer.chat_template") or CHATML
    return Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos,
                               stop_token_ids=[eos_id] if eos_id != -1 else None)
