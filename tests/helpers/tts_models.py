"""Tiny TTS models built by the tests themselves (no downloads). Their output is noise: use them
to check loading, streaming and errors, and real voices to check meaning."""

from __future__ import annotations

import json
from pathlib import Path

# An MMS-TTS-like character vocabulary: pad/blank first, then letters, space and punctuation.
TINY_VITS_CHARS = ["<pad>", "<unk>", " ", "'", "-", *"abcdefghijklmnopqrstuvwxyz"]
TINY_VITS_SAMPLE_RATE = 16000


def build_tiny_vits(tmp_dir: Path | str) -> Path:
    """A random-weight VitsModel + VitsTokenizer in the MMS-TTS folder layout (safetensors)."""
    import torch
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    out = Path(tmp_dir) / "tiny-vits"
    out.mkdir(parents=True, exist_ok=True)
    vocab_file = out / "vocab.json"
    vocab_file.write_text(json.dumps({c: i for i, c in enumerate(TINY_VITS_CHARS)}))
    tokenizer = VitsTokenizer(str(vocab_file), add_blank=True, normalize=True, phonemize=False)

    config = VitsConfig(
        vocab_size=len(TINY_VITS_CHARS),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=32,
        flow_size=8,
        spectrogram_bins=17,
        upsample_initial_channel=16,
        upsample_rates=[8, 8],
        upsample_kernel_sizes=[16, 16],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1]],
        duration_predictor_filter_channels=16,
        duration_predictor_num_flows=1,
        prior_encoder_num_flows=1,
        prior_encoder_num_wavenet_layers=1,
        posterior_encoder_num_wavenet_layers=1,
        depth_separable_num_layers=1,
        sampling_rate=TINY_VITS_SAMPLE_RATE,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    VitsModel(config).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


# Kokoro's phoneme vocabulary is IPA; a tiny model only needs ids for what espeak may emit.
TINY_KOKORO_SYMBOLS = (
    " !\"'(),-.:;?¡¿—…«»“”abcdefghijklmnopqrstuvwxyz"
    "ɐɑɒæɓʙβɔɕçɗɖðʤəɘɚɛɜɝɞɟʄɡɠɢʛɦɧħɥʜɨɪʝɭɬɫɮʟɱɯɰŋɳɲɴøɵɸθœɶʘɹɺɾɻʀʁɽʂʃʈʧʉʊʋⱱʌɣɤʍχʎʏʑʐʒʔʡʕʢǀǁǂǃˈˌːˑʼʴʰʱʲʷˠˤ˞↓↑→↗↘̃ᵻ"
)


def tiny_kokoro_config() -> dict:
    """config.json of a tiny Kokoro. Kokoro's decoder hard-codes 1024/512 channels and a
    128+128 style vector, so only the text side, durations and upsampling can shrink."""
    vocab = {s: i + 1 for i, s in enumerate(dict.fromkeys(TINY_KOKORO_SYMBOLS))}
    config = {
        "vocab": vocab,
        "n_token": len(vocab) + 1,
        "dim_in": 64,
        "max_conv_dim": 512,
        "multispeaker": True,
        "hidden_dim": 512,  # the decoder hard-codes 512 input channels
        "style_dim": 128,
        "n_layer": 1,
        "max_dur": 2,  # short random durations: short (fast) audio
        "dropout": 0.0,
        "text_encoder_kernel_size": 3,
        "n_mels": 80,
        "plbert": {
            "hidden_size": 32,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 512,
            "num_hidden_layers": 1,
            "dropout": 0.0,
        },
        "istftnet": {
            "upsample_kernel_sizes": [4, 4],
            "upsample_rates": [2, 2],
            "gen_istft_hop_size": 5,
            "gen_istft_n_fft": 20,
            "resblock_dilation_sizes": [[1, 3, 5]],
            "resblock_kernel_sizes": [3],
            "upsample_initial_channel": 512,
        },
    }
    return config


def build_tiny_kokoro(tmp_dir: Path | str, voices: tuple[str, ...] = ("ef_tiny",)) -> Path:
    """A random-weight Kokoro folder: config.json, tiny.pth (a state dict), voices/NAME.pt.

    KModel builds itself from the config with random weights; the .pth holds a real state
    dict for one part (bert_encoder), enough to run Kokoro's own weight loading (plain
    tensors, like the real checkpoint)."""
    import torch

    out = Path(tmp_dir) / "tiny-kokoro"
    (out / "voices").mkdir(parents=True, exist_ok=True)
    config = tiny_kokoro_config()
    (out / "config.json").write_text(json.dumps(config, ensure_ascii=False))
    torch.manual_seed(0)
    bert_encoder = torch.nn.Linear(config["plbert"]["hidden_size"], config["hidden_dim"])
    torch.save({"bert_encoder": bert_encoder.state_dict()}, out / "tiny.pth")
    for name in voices:
        torch.save(torch.randn(510, 1, 256) * 0.1, out / "voices" / f"{name}.pt")
    return out


def build_tiny_mlx_kokoro(tmp_dir: Path | str, voices: tuple[str, ...] = ("ef_tiny",)) -> Path:
    """The tiny Kokoro as an mlx-audio folder (config.json with model_type, model.safetensors,
    voices/NAME.safetensors), random weights saved in the layout mlx-community repos use."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_audio.tts.models.kokoro.kokoro import Model, ModelConfig

    out = Path(tmp_dir) / "Kokoro-tiny-mlx"
    (out / "voices").mkdir(parents=True, exist_ok=True)
    config = {**tiny_kokoro_config(), "model_type": "kokoro"}
    (out / "config.json").write_text(json.dumps(config, ensure_ascii=False))
    mx.random.seed(0)
    model = Model(ModelConfig.from_dict(config))
    weights = {}
    for key, value in tree_flatten(model.parameters()):
        # mlx-audio's sanitize() turns PyTorch conv layouts into MLX ones on load; store each
        # weight so that sanitize() gives back the shape the model has
        candidates = [value] + ([value.transpose(0, 2, 1)] if value.ndim == 3 else [])
        for candidate in candidates:
            back = model.sanitize({key: candidate}).get(key)
            if back is not None and back.shape == value.shape:
                weights[key] = candidate
                break
        else:
            raise AssertionError(f"cannot store {key} {value.shape} for mlx-audio")
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    for name in voices:
        voice = mx.random.normal((510, 1, 256)) * 0.1
        mx.save_safetensors(str(out / "voices" / f"{name}.safetensors"), {"voice": voice})
    return out


class NotATensor:
    """Pickled into a .pth to stand for a checkpoint that would run code when unpickled."""

    def __reduce__(self):
        return (print, ("this ran while loading the weights",))
