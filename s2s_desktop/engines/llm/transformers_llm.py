"""LLM over Hugging Face transformers: a local folder of safetensors, or a GGUF file.

Generation runs on its own thread and feeds a TextIteratorStreamer; a StoppingCriteria reads
the stop Event at every token, so barge-in ends the reply at the next token. The KV cache of
the last prompt and reply is kept (a DynamicCache cut back to the part the next prompt shares),
and `prime()` fills it with the next prompt's known start between turns.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ...errors import DeviceUnavailable, ModelLoadError, S2SError, UnsafeModelFormat
from ...models.resolve import resolve_model
from ..base import WARMUP_LLM, LLMEngine, LLMOptions, require
from .history import common_prefix, prefix_ids
from .tool_calls import template_takes_tools

log = logging.getLogger(__name__)

BACKEND = "transformers"
STREAM_TIMEOUT_S = 300.0  # a generation thread silent this long has hung: give up
PRIME_BATCH = 16  # tokens per step of prime(): a new question waits at most one step


def _torch():
    return require("torch", BACKEND, "torch", "torch")


def pick_dtype(requested: str, device: str):
    """The torch dtype for `device`: half precision on GPUs (bf16 where supported), fp32 on CPU."""
    torch = _torch()
    named = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    if requested in named:
        return named[requested]
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device == "mps":
        return torch.float16
    return torch.float32


def torch_device(device: str) -> str:
    """Check the device is usable by torch here; "mlx" has no torch meaning and runs on CPU."""
    torch = _torch()
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                f"llm.device is {device} but torch sees no CUDA GPU here: "
                "install a CUDA build of torch, or set llm.device=cpu"
            )
        return device
    if device == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceUnavailable(
                "llm.device is mps but Metal is not available to torch here: set llm.device=cpu"
            )
        return device
    return "cpu"


def _model_source(path: Path) -> tuple[Path, str | None]:
    """(folder, gguf file name or None) for a GGUF file or a folder of safetensors."""
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelLoadError(
                f"{path.name} is not a model this backend can read: give a folder with "
                "*.safetensors and config.json, or a .gguf file"
            )
        return path.parent, path.name
    if list(path.glob("*.safetensors")):
        return path, None
    if list(path.glob("*.bin")) or list(path.glob("*.pt")):
        raise UnsafeModelFormat(
            f"{path} holds only pickle weights (*.bin/*.pt), which can run code when loaded: "
            "use a safetensors or GGUF copy of this model"
        )
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return path, ggufs[0].name
    if ggufs:
        raise ModelLoadError(
            f"{path} holds several GGUF files: choose one with --set llm.model_file=NAME"
        )
    raise ModelLoadError(f"{path} holds no *.safetensors or *.gguf model files")


class TransformersLLM(LLMEngine):
    name = "transformers"
    devices = ("cuda", "mps", "cpu")
    extra = "torch"
    compute_types = ("auto", "float16", "bfloat16", "float32")
    recognise_order = 3  # any other config.json + .safetensors folder

    @classmethod
    def recognises(cls, model) -> bool:
        return model.is_transformers_folder()

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.model = None
        self.tokenizer = None
        self.last_stats: dict = {}
        self.compiled: bool | None = None  # None: llm.compile is off
        self._cache = None  # DynamicCache of the tokens in _cache_ids
        self._cache_ids: list[int] = []

    def load(self) -> None:
        _torch()  # a clear message if torch is missing
        transformers = self.require("transformers", "transformers")
        folder, gguf_file = _model_source(
            resolve_model(self.settings.model, "llm", self.settings.model_file)
        )
        if gguf_file:
            require("gguf", BACKEND, "gguf")
        dev = torch_device(self.device)
        dtype = pick_dtype(self.settings.dtype, dev)
        kwargs = {
            "local_files_only": True,
            "trust_remote_code": bool(self.settings.trust_remote_code),
        }
        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        else:
            kwargs["use_safetensors"] = True
        t0 = time.monotonic()
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), **kwargs)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(folder), dtype=dtype, **kwargs
            )
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise ModelLoadError(
                f"could not load the LLM from {folder / (gguf_file or '')}: {exc}"
            ) from exc
        try:
            model.to(dev)
        except RuntimeError as exc:  # out of memory, driver trouble
            raise DeviceUnavailable(
                f"could not put the LLM on {dev} ({exc}): "
                "set llm.device=cpu or choose a smaller model"
            ) from exc
        model.eval()
        if not getattr(self.tokenizer, "chat_template", None):
            raise ModelLoadError(
                f"the tokenizer in {folder} has no chat template: use an instruct/chat model"
            )
        self.model, self.torch_device = model, dev
        self.loaded = True
        log.info(
            "transformers LLM loaded from %s on %s (%s) in %.1f s",
            folder,
            dev,
            dtype,
            time.monotonic() - t0,
        )

    def warmup(self) -> None:
        if getattr(self.settings, "compile", False) and self.model is not None:
            from ..torch_compile import compile_with_fallback

            # a few tokens, so both the prompt pass and the per-token pass compile now
            self.compiled = compile_with_fallback(
                [self.model], self.torch_device, "transformers LLM", lambda: self._warm(4), BACKEND
            )
            if self.compiled:
                return
        self._warm(1)

    def _warm(self, tokens: int) -> None:
        stop = threading.Event()
        options = dataclasses.replace(WARMUP_LLM, max_new_tokens=tokens)
        for _ in self.stream([{"role": "user", "content": "Hi"}], stop, options):
            pass

    def describe(self) -> str:
        text = super().describe()
        if self.compiled is not None:
            text += " (compiled)" if self.compiled else " (torch.compile failed: eager)"
        return text

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _render(self, messages: list[dict]) -> str:
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                  tokenize=False,
                                                  tools=self.offered_tools or None)

    def can_call_tools(self) -> bool:
        return template_takes_tools(getattr(self.tokenizer, "chat_template", None))

    def _keeps_cache(self) -> bool:
        return not self.compiled  # a compiled model generates with its own static cache

    def _reuse(self, ids: list[int], leave: int) -> int:
        """Cut the kept cache back to what `ids` shares with it (leaving at least `leave`
        tokens of `ids` to evaluate); returns how many cached tokens stay."""
        transformers = require("transformers", BACKEND, "transformers", "torch")
        keep = common_prefix(self._cache_ids, ids[: len(ids) - leave])
        if keep == 0 or self._cache is None:
            self._cache, self._cache_ids = transformers.DynamicCache(), []
            return 0
        if keep < self._cache.get_seq_length():
            self._cache.crop(keep - self._cache.get_seq_length())  # negative: tokens to drop
        self._cache_ids = self._cache_ids[:keep]
        return keep

    def prime(self, messages: list[dict], should_stop, question: str = "") -> int:
        torch = _torch()
        if self.model is None or not self._keeps_cache():
            return 0
        ids = prefix_ids(messages, self._render, self._ids, question)
        if self._cache_ids[: len(ids)] == ids or should_stop():
            return 0  # already cached (or a question came)
        keep = self._reuse(ids, leave=0)
        done = 0
        with torch.inference_mode():
            for start in range(keep, len(ids), PRIME_BATCH):
                if should_stop():
                    break
                batch = ids[start : start + PRIME_BATCH]
                self.model(input_ids=torch.tensor([batch], device=self.torch_device),
                           past_key_values=self._cache, use_cache=True)
                self._cache_ids += batch
                done += len(batch)
        return done

    def stream(
        self, messages: list[dict], stop: threading.Event, options: LLMOptions
    ) -> Iterator[str]:
        torch = _torch()
        transformers = self.require("transformers", "transformers")
        if self.model is None:
            raise ModelLoadError("the LLM is not loaded yet")
        if stop.is_set():
            return
        limit = int(options.max_new_tokens)
        ids = self._ids(self._render(messages))
        cached = self._reuse(ids, leave=1) if self._keeps_cache() else 0
        inputs = {"input_ids": torch.tensor([ids], device=self.torch_device),
                  "attention_mask": torch.ones((1, len(ids)), dtype=torch.long,
                                               device=self.torch_device)}
        if self._keeps_cache():
            inputs["past_key_values"] = self._cache
        streamer = transformers.TextIteratorStreamer(
            self.tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=STREAM_TIMEOUT_S
        )
        quit_ = threading.Event()  # set when the consumer stops reading early
        counter = _StopOnEvent(stop, quit_)
        temperature = float(options.temperature)
        gen_kwargs = dict(
            **inputs,
            max_new_tokens=limit,
            do_sample=temperature > 0,
            streamer=streamer,
            stopping_criteria=transformers.StoppingCriteriaList([counter]),
            pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
        )
        if float(options.repeat_penalty) > 1.0:
            gen_kwargs["repetition_penalty"] = float(options.repeat_penalty)
        if temperature > 0:
            gen_kwargs["temperature"] = temperature
        else:  # greedy: clear sampling knobs a generation_config may carry
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        failure: list[BaseException] = []
        produced: list = []

        def generate() -> None:
            try:
                with torch.inference_mode():
                    produced.append(self.model.generate(**gen_kwargs))
            except BaseException as exc:  # surfaced in the consumer's thread
                failure.append(exc)
                streamer.end()

        t0 = time.monotonic()
        first = None
        self.last_stats = {"prompt_tokens_evaluated": len(ids) - cached}
        worker = threading.Thread(target=generate, name="llm-generate", daemon=True)
        worker.start()
        try:
            for text in streamer:
                if stop.is_set():
                    break
                if text:
                    first = first or time.monotonic() - t0
                    yield text
        finally:
            quit_.set()
            worker.join(timeout=STREAM_TIMEOUT_S)
            self._remember_cache(produced[0][0] if produced and not worker.is_alive() else None)
            if self.torch_device == "mps":
                torch.mps.synchronize()
                torch.mps.empty_cache()
            self.last_stats = {
                "tokens": counter.tokens,
                "first_token_s": first,
                "total_s": time.monotonic() - t0,
                "finish": "cancelled"
                if stop.is_set()
                else ("length" if counter.tokens >= limit else "stop"),
                "prompt_tokens_evaluated": len(ids) - cached,
            }
        if failure and not stop.is_set():
            raise S2SError(f"the LLM failed while generating: {failure[0]}") from failure[0]


    def _remember_cache(self, sequence) -> None:
        """The cache now holds the prompt and reply `sequence` (all but the last token); a
        generation that failed or hung leaves nothing worth keeping."""
        if sequence is None or self._cache is None:
            self._cache, self._cache_ids = None, []
            return
        self._cache_ids = sequence.tolist()[: self._cache.get_seq_length()]


class _StopOnEvent:
    """StoppingCriteria: stop at the next token once either event is set; counts new tokens."""

    def __init__(self, stop: threading.Event, quit_: threading.Event):
        self.stop, self.quit, self.tokens = stop, quit_, 0

    def __call__(self, input_ids, scores, **kwargs):
        torch = _torch()
        self.tokens += 1
        done = self.stop.is_set() or self.quit.is_set()
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)
