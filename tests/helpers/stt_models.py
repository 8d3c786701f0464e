"""A tiny random Whisper, built on the spot: the same files a real checkpoint has, in both the
transformers (safetensors) and CTranslate2 (faster-whisper) formats. Its weights are random, so
its output is noise: use it for loading, types, errors and devices, never for meaning."""

from __future__ import annotations

from pathlib import Path

SENTENCES = [
    "what is the capital of france",
    "the quick brown fox jumps over the lazy dog",
    "hello there, how are you today?",
    "turn the lights off in the kitchen please",
    "one two three four five six seven eight nine ten",
]
# Whisper's special tokens, in Whisper's order (language tokens go after <|startoftranscript|>).
HEAD_SPECIALS = ["<|endoftext|>", "<|startoftranscript|>"]
TAIL_SPECIALS = [
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
]
LANGUAGES = ["en", "fr", "de"]


def _train_tokenizer(multilingual: bool):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[]
    )
    tok.train_from_iterator(SENTENCES, trainer)
    langs = [f"<|{c}|>" for c in LANGUAGES] if multilingual else []
    tok.add_special_tokens(HEAD_SPECIALS + langs + TAIL_SPECIALS)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    return fast, langs


def build_tiny_whisper(tmp_dir, multilingual: bool = False) -> tuple[Path, Path]:
    """Write a tiny random Whisper to `tmp_dir`/hf (safetensors + processor files) and its
    CTranslate2 conversion to `tmp_dir`/ct2. Returns (hf_dir, ct2_dir). Takes ~1 s.

    `multilingual` adds <|en|>, <|fr|>, <|de|> and a generation config that lets transformers
    take and detect a language. (CTranslate2 4.8 tells a multilingual Whisper by a token of the
    real multilingual vocabulary, so it still treats the converted copy as English-only.)"""
    import torch
    from ctranslate2.converters import TransformersConverter
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    tmp_dir = Path(tmp_dir)
    hf_dir, ct2_dir = tmp_dir / "hf", tmp_dir / "ct2"
    tokenizer, langs = _train_tokenizer(multilingual)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in HEAD_SPECIALS + langs + TAIL_SPECIALS}
    eot, sot, no_ts = ids["<|endoftext|>"], ids["<|startoftranscript|>"], ids["<|notimestamps|>"]
    # The ids after <|notimestamps|> are timestamps (<|0.00|>, <|0.02|>, ...) in Whisper.
    vocab_size = len(tokenizer) + 100

    config = WhisperConfig(
        vocab_size=vocab_size,
        num_mel_bins=80,
        d_model=64,
        encoder_layers=2,
        encoder_attention_heads=2,
        decoder_layers=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=sot,
        suppress_tokens=[],
        begin_suppress_tokens=[eot],
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config).eval()
    gen = GenerationConfig(
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
        max_length=448,
        suppress_tokens=[],
        begin_suppress_tokens=[eot],
        no_timestamps_token_id=no_ts,
        is_multilingual=multilingual,
    )
    if multilingual:
        gen.lang_to_id = {t: ids[t] for t in langs}
        gen.task_to_id = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    model.generation_config = gen
    model.save_pretrained(hf_dir, safe_serialization=True)
    tokenizer.save_pretrained(hf_dir)
    # Reload as Whisper's own tokenizer class, so WhisperProcessor accepts the folder.
    processor = WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=80),
        tokenizer=WhisperTokenizer.from_pretrained(str(hf_dir)),
    )
    processor.save_pretrained(hf_dir)
    # transformers 5 folds this into processor_config.json; checkpoints on the Hub (and the
    # CTranslate2 converter) have it as its own file.
    processor.feature_extractor.save_pretrained(hf_dir)

    # Without tokenizer.json next to model.bin, faster-whisper would ask the Hub for one.
    TransformersConverter(
        str(hf_dir), copy_files=["tokenizer.json", "preprocessor_config.json"]
    ).convert(str(ct2_dir), quantization="float32", force=True)
    return hf_dir, ct2_dir
