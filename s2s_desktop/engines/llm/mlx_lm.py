"""LLM on MLX (Apple Silicon GPU; MLX's CPU build elsewhere) via mlx-lm, streamed per token.

Every MLX step (load, each generated token, unload) runs under the process-wide MLX lock, so
STT and TTS on MLX can work between tokens without two threads touching Metal at once. The
prompt cache (mlx-lm's KV cache) is kept across turns and trimmed back to what the next prompt
shares; `prime()` fills it with the next prompt's known start between turns.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from ...errors import ModelLoadError
from ...mlx_lock import locked_steps, mlx_lock
from ...models.resolve import resolve_model
from ..base import WARMUP_LLM, LLMEngine, LLMOptions
from .history import common_prefix, prefix_ids
from .tool_calls import template_takes_tools

log = logging.getLogger(__name__)

BACKEND = "mlx-lm"
PRIME_BATCH = 16  # tokens per locked step of prime(): a new question waits at most one step


def _check_model_folder(path: Path) -> None:
    """mlx-lm reads a folder of config.json + *.safetensors; say so before it fails obscurely."""
    if path.is_file():
        kind = "a GGUF file" if path.suffix.lower() == ".gguf" else f"the file {path.name}"
        raise ModelLoadError(
            f"mlx-lm needs a model folder (config.json + *.safetensors), not {kind}: "
            "choose an mlx-community model, or the llama-cpp backend for GGUF files"
        )
    if not (path / "config.json").exists() or not any(path.glob("*.safetensors")):
        raise ModelLoadError(
            f"{path} is not an MLX/safetensors model folder (needs config.json and "
            "*.safetensors): choose an mlx-community model or convert one with mlx_lm.convert"
        )


def _config_fixes(path: Path) -> dict:
    """transformers 5 writes `rope_parameters`, which this mlx-lm does not read: without the
    fix a model saved by transformers 5 runs with the default RoPE base and talks nonsense."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path / 'config.json'} is unreadable ({exc})") from exc
    rope = config.get("rope_parameters")
    fixes: dict = {}
    if isinstance(rope, dict) and "rope_theta" not in config and "rope_theta" in rope:
        fixes["rope_theta"] = rope["rope_theta"]
        if rope.get("rope_type", "default") != "default" and not config.get("rope_scaling"):
            fixes["rope_scaling"] = dict(rope)
    return fixes


class MLXLMLLM(LLMEngine):
    name = BACKEND
    devices = ("mlx",)
    extra = "mlx"
    suggested_on = ("mlx",)
    quant_note = "MLX models carry their quantization (4bit/8bit in the model name)."

    def __init__(self, settings, device: str = "mlx"):
        super().__init__(settings, device)
        self._mlx_lm = None
        self._model = None
        self._tokenizer = None
        self._cache = None  # mlx-lm prompt cache holding the tokens in _cache_ids
        self._cache_ids: list[int] = []
        self.last_stats: dict = {}

    def load(self) -> None:
        self.require("mlx.core", "mlx")
        self._mlx_lm = self.require("mlx_lm", "mlx-lm")
        sub = self.settings.model_file
        if sub.lower().endswith(".gguf"):  # left over from llama-cpp: an MLX model is a folder
            log.info("mlx-lm ignores llm.model_file=%s (a GGUF file)", sub)
            sub = ""
        path = resolve_model(self.settings.model, "llm", sub)
        _check_model_folder(path)
        trust = bool(self.settings.trust_remote_code)
        with mlx_lock("llm"):
            try:
                self._model, self._tokenizer = self._mlx_lm.load(
                    str(path),
                    tokenizer_config={"trust_remote_code": trust},
                    model_config=_config_fixes(path),
                    trust_remote_code=trust,
                )
            except (ValueError, KeyError, FileNotFoundError, OSError) as exc:
                raise ModelLoadError(
                    f"mlx-lm could not load {path} ({exc}): the folder may be incomplete or "
                    "of an architecture this mlx-lm does not know (pip install -U mlx-lm)"
                ) from exc
        self.loaded = True

    def warmup(self) -> None:
        for _ in self.stream([{"role": "user", "content": "Hi"}], threading.Event(), WARMUP_LLM):
            pass

    def unload(self) -> None:
        if self._model is not None:
            with mlx_lock("llm"):
                self._model = self._tokenizer = self._cache = None
                self._cache_ids = []
                import mlx.core as mx

                mx.clear_cache()
        super().unload()

    # ------------------------------------------------------------ prompt

    def can_call_tools(self) -> bool:
        return template_takes_tools(getattr(self._tokenizer, "chat_template", None))

    def _render(self, messages: list[dict]) -> str:
        tok = self._tokenizer
        if getattr(tok, "chat_template", None):
            return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                           tools=self.offered_tools or None)
        # no template shipped: a plain transcript the model can continue
        lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
        return "\n".join(lines) + "\nAssistant:"

    def prompt_tokens(self, messages: list[dict], max_new_tokens: int) -> list[int]:
        """Token ids of the chat prompt, dropping the oldest exchanges until it fits the
        context (the system prompt and the latest message are always kept)."""
        budget = max(16, int(self.settings.context_tokens) - max_new_tokens)
        msgs = list(messages)
        while True:
            ids = self._tokenizer.encode(self._render(msgs), add_special_tokens=False)
            droppable = [i for i, m in enumerate(msgs[:-1]) if m["role"] != "system"]
            if len(ids) <= budget or not droppable:
                return ids[-budget:]
            del msgs[droppable[0]]

    # ------------------------------------------------------------ prompt cache

    def _cached(self) -> int:
        return self._cache[0].offset if self._cache else 0

    def _reuse(self, ids: list[int], leave: int) -> int:
        """Trim the kept cache back to what `ids` shares with it (leaving at least `leave`
        tokens of `ids` to evaluate); returns how many cached tokens stay."""
        from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

        keep = common_prefix(self._cache_ids, ids[: len(ids) - leave])
        if self._cache is None or keep == 0 or not can_trim_prompt_cache(self._cache):
            self._cache, self._cache_ids = make_prompt_cache(self._model), []
            return 0
        trim_prompt_cache(self._cache, self._cached() - keep)
        self._cache_ids = self._cache_ids[:keep]
        return keep

    def prime(self, messages: list[dict], should_stop, question: str = "") -> int:
        if not self.loaded:
            return 0
        import mlx.core as mx

        ids = prefix_ids(messages, self._render,
                         lambda text: self._tokenizer.encode(text, add_special_tokens=False),
                         question)
        if self._cache_ids[: len(ids)] == ids or should_stop():
            return 0  # already cached (or a question came)
        with mlx_lock("llm"):
            keep = self._reuse(ids, leave=0)
        done = 0
        for start in range(keep, len(ids), PRIME_BATCH):
            if should_stop():
                break
            batch = ids[start : start + PRIME_BATCH]
            with mlx_lock("llm"):
                self._model(mx.array(batch)[None], cache=self._cache)
                mx.eval([c.state for c in self._cache])
            self._cache_ids += batch
            done += len(batch)
        return done

    # ------------------------------------------------------------ generation

    def stream(
        self, messages: list[dict], stop: threading.Event, options: LLMOptions
    ) -> Iterator[str]:
        if not self.loaded:
            raise ModelLoadError("the mlx-lm model is not loaded yet: load() it first")
        import mlx.core as mx
        from mlx_lm.sample_utils import make_logits_processors, make_sampler

        if stop.is_set():
            return
        limit = int(options.max_new_tokens)
        ids = self.prompt_tokens(messages, limit)
        with mlx_lock("llm"):
            keep = self._reuse(ids, leave=1)
        self.last_stats = {"prompt_tokens_evaluated": len(ids) - keep}
        sampler = make_sampler(temp=float(options.temperature))
        penalty = float(options.repeat_penalty)
        generator = self._mlx_lm.stream_generate(
            self._model, self._tokenizer, ids[keep:], max_tokens=limit, sampler=sampler,
            prompt_cache=self._cache,
            logits_processors=make_logits_processors(
                repetition_penalty=penalty if penalty > 1.0 else None),
        )
        written: list[int] = []
        # the lock is taken per token, not per reply; each step's queued work is finished
        # on mlx-lm's generation stream before another stage may use MLX
        stream = importlib.import_module("mlx_lm.generate").generation_stream  # module, not fn
        steps = locked_steps("llm", generator, sync=lambda: mx.synchronize(stream))
        try:
            for response in steps:
                written.append(int(response.token))
                if stop.is_set():
                    return
                if response.text:
                    yield response.text
                if stop.is_set():
                    return
        finally:
            steps.close()
            # the cache now holds the prompt and (all but maybe the last of) the reply
            self._cache_ids = [*ids, *written][: self._cached()]
