"""The starter piper voice said in parts: the first ~0.46 s of a long sentence comes before
the rest is made, the parts join into the same audio as one decoder run, Whisper hears the
sentence whole, and loudness holds from sentence to sentence."""

from __future__ import annotations

import time

import numpy as np
import pytest

from s2s_desktop.config import TTSSettings
from tests.test_tts import STARTER_VOICE, has, hear, needs_piper, rms, say  # noqa: F401

LONG = "Honey is a sweet food made by bees from the nectar of flowers."

needs_onnx = pytest.mark.skipif(not has("onnx"), reason='needs onnx (pip install "s2s-desktop[piper]")')


@pytest.fixture(scope="module")
def voice():
    from s2s_desktop.engines.tts.piper import PiperTTS

    engine = PiperTTS(TTSSettings(model=STARTER_VOICE), "cpu")
    engine.load()
    engine.warmup()
    return engine


@needs_piper
@needs_onnx
@pytest.mark.required("piper", "onnx")
def test_a_long_sentence_starts_with_half_a_second_before_the_rest_is_made(voice):
    assert voice._parts is not None, "the starter voice was not cut at its decoder"
    start = time.perf_counter()
    parts, times = [], []
    for audio in voice.synthesize(LONG, None, 1.0):
        parts.append(audio)
        times.append(time.perf_counter() - start)
    first_s = len(parts[0]) / voice.sample_rate
    whole_s = sum(len(p) for p in parts) / voice.sample_rate
    print(f"\nfirst part {first_s:.2f} s of audio after {times[0] * 1000:.0f} ms; "
          f"whole {whole_s:.2f} s after {times[-1] * 1000:.0f} ms")
    assert len(parts) == 2 and 0.3 < first_s < 0.6 and whole_s > 2.0
    assert all(rms(p) > 0.01 for p in parts)
    assert max(np.abs(p).max() for p in parts) <= 1.0


@needs_piper
@needs_onnx
def test_a_short_sentence_is_one_part(voice):
    assert len(say(voice, "Sure.")) == 1


@needs_piper
@needs_onnx
def test_the_decoder_run_in_windows_gives_the_samples_of_one_run(voice):
    from s2s_desktop.engines.tts import piper_parts

    parts = voice._parts
    config = voice._voice.config
    ids = np.array([voice._voice.phonemes_to_ids(voice._voice.phonemize(LONG)[0])], np.int64)
    feed = {"input": ids, "input_lengths": np.array([ids.shape[1]], np.int64),
            "scales": np.array([config.noise_scale, config.length_scale, config.noise_w_scale],
                               np.float32)}
    latent = parts.front.run(None, feed)[0]
    whole = parts.decoder.run(None, {parts.latent: latent})[0].reshape(-1)

    class Fixed:  # the same latent for the windowed run (the voice's front adds noise)
        def run(self, _names, _feed):
            return [latent]

    windowed = np.concatenate(list(piper_parts.decode_in_parts(
        piper_parts.VoiceParts(Fixed(), parts.decoder, parts.latent, parts.hop), feed, None)))
    assert windowed.shape == whole.shape
    assert np.abs(windowed - whole).max() < 1e-3


@needs_piper
@needs_onnx
def test_whisper_hears_a_sentence_said_in_parts_whole(voice, hear):  # noqa: F811
    heard = hear(np.concatenate(say(voice, LONG)), voice.sample_rate)
    words = heard.lower().replace(".", "").replace(",", "").split()
    assert words[:4] == ["honey", "is", "a", "sweet"] and "flowers" in words, heard


@needs_piper
@needs_onnx
def test_sentences_keep_one_loudness(voice):
    """piper scaled each sentence to its own peak ("Sure." as loud as a shout); in parts the
    voice's loudest sentence so far sets one gain."""
    peaks = [float(np.abs(np.concatenate(say(voice, text))).max())
             for text in ("Sure.", LONG, "The capital of Japan is Tokyo.", "Sure.")]
    assert max(peaks) <= 1.0
    assert peaks[3] < 0.95, peaks  # a quiet word is no longer blown up to full scale


def test_the_limiter_bends_only_what_is_past_its_knee():
    from s2s_desktop.engines.tts.piper_parts import LIMIT_KNEE, soft_limit

    audio = np.array([0.0, 0.5, -0.8, LIMIT_KNEE, 0.95, -1.4, 3.0], np.float32)
    out = soft_limit(audio)
    assert np.array_equal(out[:4], audio[:4])
    assert np.all(np.abs(out) <= 1.0) and np.all(np.abs(out[4:]) > LIMIT_KNEE)
    assert np.all(np.sign(out) == np.sign(audio))


def test_a_short_sentence_is_decoded_in_one_window_and_a_long_one_in_two():
    from s2s_desktop.engines.tts.piper_parts import CONTEXT_FRAMES, FIRST_FRAMES, frame_windows

    assert frame_windows(FIRST_FRAMES + CONTEXT_FRAMES) == [(0, FIRST_FRAMES + CONTEXT_FRAMES)]
    assert frame_windows(200) == [(0, FIRST_FRAMES), (FIRST_FRAMES, 200)]
