"""Smart Turn v3.2 end-of-turn model: our Whisper log-mel features, the pinned model file, its
verdict on a spoken question, and the words-based check that overrules it mid-sentence."""

from __future__ import annotations

import numpy as np
import pytest

from s2s_desktop.engines.turn import smart_turn
from s2s_desktop.engines.turn.smart_turn import SmartTurn, last_window
from s2s_desktop.engines.turn.unfinished_text import ends_unfinished, is_backchannel
from s2s_desktop.engines.turn.whisper_features import log_mel
from s2s_desktop.errors import ModelLoadError, ModelNotFound
from tests.helpers.clips import read_wav, silence


def test_features_match_whisper_feature_extractor(speech):
    transformers = pytest.importorskip("transformers")
    audio = last_window(read_wav(speech("What is the capital of France?")))
    ours = log_mel(audio)
    extractor = transformers.WhisperFeatureExtractor(chunk_length=8)
    theirs = extractor(audio, sampling_rate=16000, return_tensors="np", do_normalize=True,
                       padding="max_length", max_length=8 * 16000)["input_features"][0]
    assert ours.shape == theirs.shape == (80, 800)
    assert np.abs(ours - theirs).max() < 2e-3


def test_last_window_pads_in_front_and_keeps_the_end():
    short = np.ones(16000, np.float32)
    padded = last_window(short)
    assert len(padded) == 8 * 16000 and padded[0] == 0 and padded[-1] == 1
    long = np.arange(10 * 16000, dtype=np.float32)
    assert last_window(long)[-1] == long[-1] and len(last_window(long)) == 8 * 16000


@pytest.fixture(scope="module")
def turn_model():
    model = SmartTurn()
    model.load()
    return model


def test_finished_question_scores_as_finished(speech, turn_model):
    finished = np.concatenate([read_wav(speech("What is the capital of France?")), silence(0.3)])
    assert turn_model.probability(finished) > 0.5


@pytest.mark.parametrize("text, unfinished", [
    ("What is the capital of", True),
    ("Can you tell me how to get to the", True),
    ("I was wondering, um", True),
    ("So I think that...", True),
    ("What is the capital of France?", False),
    ("Tell me a joke about cats.", False),
    ("Where is it", False),
    ("", False),
])
def test_words_that_cannot_end_a_sentence(text, unfinished):
    assert ends_unfinished(text) is unfinished


@pytest.mark.parametrize("text, backchannel", [
    ("Yeah.", True), (" Mm-hmm.", True), ("Mhm", True), ("Uh-huh.", True), ("Okay.", True),
    ("", True),  # a cough, or a hum Whisper writes nothing for
    ("Stop.", False), ("Wait", False), ("No.", False), ("Yeah, but what about Italy?", False),
])
def test_words_that_only_say_i_am_listening(text, backchannel):
    """Said over a reply, these let it go on; anything more is a barge-in."""
    assert is_backchannel(text) is backchannel


def test_missing_model_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(smart_turn, "resources_dir", lambda: tmp_path)
    with pytest.raises(ModelNotFound, match="reinstall s2s-desktop"):
        SmartTurn().load()


def test_damaged_model_is_refused(tmp_path, monkeypatch):
    (tmp_path / "turn").mkdir()
    (tmp_path / "turn" / smart_turn.MODEL_FILE).write_bytes(b"not the model")
    monkeypatch.setattr(smart_turn, "resources_dir", lambda: tmp_path)
    with pytest.raises(ModelLoadError, match="damaged"):
        SmartTurn().load()
