"""The widgets, offscreen: state icons, the tray menu and its actions, the floating window, the
conversation window (streaming, latency, copy, clear), and the whole app wired together on
scripted engines with a fake microphone (history written, and shown again at the next start)."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox

from s2s_desktop.audio.sink import CaptureSink
from s2s_desktop.history import Exchange, History
from s2s_desktop.pipeline.turns import Conversation, FinishedTurn
from s2s_desktop.states import TurnReason
from s2s_desktop.ui.actions import AppActions
from s2s_desktop.ui.conversation_window import ConversationWindow
from s2s_desktop.ui.floating_window import FloatingWindow
from s2s_desktop.ui.icons import STATES, icon_named, state_icon
from s2s_desktop.ui.tray import TrayIcon, tooltip_text
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_mic import FakeMicrophone


class FakeQApp:
    def __init__(self):
        self.quits = 0

    def quit(self):
        self.quits += 1


@pytest.fixture
def desktop(qtbot, monkeypatch, tmp_path):
    """desktop(use_tray=..., reply=...) -> a started DesktopApp on scripted engines."""
    from s2s_desktop.app import DesktopApp

    scripted.install(monkeypatch)
    monkeypatch.setenv("S2S_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("S2S_DATA_DIR", str(tmp_path / "data"))
    made = []

    def make(
        use_tray=True,
        reply="Paris is the capital of France.",
        heard="Capital of France?",
        mic=None,
        word_delay=0.0,
        expect="idle",
    ):
        s = scripted.settings(reply=reply, heard=heard, word_delay=word_delay)
        s.hotkey.enabled = False
        s.audio.min_press_ms = 100
        s.audio.earcons = False  # the fake mic's whole recording falls inside the start sound
        app = DesktopApp(
            FakeQApp(), s, use_tray=use_tray, mic=mic or FakeMicrophone(), speaker=CaptureSink()
        )
        assert app.start()
        made.append(app)
        qtbot.waitUntil(lambda: app.controller.state == expect, timeout=10000)
        return app

    yield make
    for app in made:
        app.shutdown()
        for w in (app.window, app.floating):
            if w is not None:
                w.close()


def talk_from_tray(qtbot, app, seconds=0.2):
    app.actions.talk.trigger()
    assert app.controller.state == "listening"
    qtbot.wait(int(seconds * 1000))
    app.actions.talk.trigger()
    turn = app.controller.current_turn
    kept = len(app.history.load()[0])

    def settled():  # the controller, the window and the history each hear the turn's end
        entry = app.window.entries.get(turn)
        return bool(  # waitUntil takes only True/False/None, and a reason is a str
            app.controller.state == "idle"
            and entry is not None
            and entry.reason
            and len(app.history.load()[0]) > kept
        )

    qtbot.waitUntil(settled, timeout=10000)


# ---------------------------------------------------------------------- icons and tray


def test_every_state_has_its_own_icon(qapp):
    images = []
    for state in STATES:
        icon = icon_named(state)
        assert not icon.isNull(), state
        assert {16, 22, 32, 64} <= {s.width() for s in icon.availableSizes()}
        images.append(icon.pixmap(32, 32).toImage())
    assert len({img.bits().tobytes() for img in images}) == len(STATES)
    # legible on any bar: an opaque badge with a dark rim, transparent corners
    idle = state_icon("idle").pixmap(64, 64).toImage()
    assert idle.pixelColor(32, 32).alpha() == 255 and idle.pixelColor(1, 1).alpha() == 0


def test_tray_menu_has_the_controls_in_order(qapp):
    actions = AppActions()
    tray = TrayIcon(actions)
    texts = [a.text() for a in tray.menu.actions() if not a.isSeparator()]
    assert texts[1:] == [
        "Talk", "Hands-free Conversation", "Conversation…", "New Conversation", "Settings…",
        "Models…", "Pause Hotkey", "Quit",
    ]  # fmt: skip
    assert not tray.status_action.isEnabled() and "Loading models" in texts[0]
    assert not actions.talk.isEnabled()  # loading: nothing to talk to yet
    key = tray.icon().cacheKey()
    tray.show_state("error", "llm failed to load: model not found")
    assert tray.status_action.text() == "Problem — llm failed to load: model not found"
    tray.show_state("listening", "Listening…")
    assert tray.icon().cacheKey() != key
    assert actions.talk.text() == "Stop and Send" and actions.talk.isEnabled()


def test_the_tray_shows_hands_free_unmistakably(qapp):
    actions = AppActions()
    tray = TrayIcon(actions)
    tray.show_state("idle", "Ready")
    idle_icon = tray.icon().cacheKey()
    tray.show_state("idle", "Just speak: no key needed", None, hands_free=True)
    actions.show_hands_free(True)
    assert tray.icon().cacheKey() != idle_icon  # its own icon: the microphone is open
    assert tray.icon().cacheKey() == state_icon("idle", hands_free=True).cacheKey()
    assert tray.icon().cacheKey() != state_icon("listening").cacheKey()
    assert tray.toolTip().startswith("s2s-desktop — Hands-free\nJust speak: no key needed")
    assert actions.hands_free.isCheckable() and actions.hands_free.isChecked()
    tray.show_state("speaking", "Speaking…", None, hands_free=True)
    assert tray.toolTip().startswith("s2s-desktop — Speaking")


def test_tooltip_says_what_is_happening_and_what_failed():
    assert (
        tooltip_text("loading", "2 of 4 ready, loading llm, tts")
        == "s2s-desktop — Loading models\n2 of 4 ready, loading llm, tts"
    )
    tip = tooltip_text("error", "llm failed to load: model not found at /x")
    assert "Problem" in tip and "model not found" in tip
    hk = {"combo": "ctrl+alt+space", "mode": "hold", "available": True, "paused": False}
    assert tooltip_text("idle", "Ready", hk) == "s2s-desktop — Ready\nHold ctrl+alt+space to talk"
    assert "paused" in tooltip_text("idle", "Ready", {**hk, "paused": True})


# ---------------------------------------------------------------------- the whole app


def test_talk_from_the_tray_streams_the_reply_into_the_window_and_history(qtbot, desktop):
    app = desktop()
    assert app.tray is not None and app.floating is None
    talk_from_tray(qtbot, app)
    text = app.window.view.toPlainText()
    assert "Capital of France?" in text and "Paris is the capital of France." in text
    assert "first audio" in text  # the turn's latency
    assert len(app.speaker.audio(1)) > 0  # the reply was played
    saved = app.history.load()[0]  # the finished turn replaced its question's early line
    assert len(saved) == 1 and saved[0].reason == "ok"
    assert saved[0].user == "Capital of France?" and "Paris is the capital" in saved[0].assistant


def test_history_is_shown_again_and_remembered_at_the_next_start(qtbot, desktop, monkeypatch):
    first = desktop()
    talk_from_tray(qtbot, first)
    first.shutdown()
    second = desktop(reply="Tokyo.")
    assert "Paris is the capital of France." in second.window.view.toPlainText()
    assert second.conversation.exchanges() == [
        ("Capital of France?", "Paris is the capital of France.")
    ]
    talk_from_tray(qtbot, second)
    prompt = second.pipeline.llm.engine.seen[-1]  # the LLM saw the earlier run's exchange
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]


def test_new_conversation_forgets_the_earlier_questions_also_after_a_restart(qtbot, desktop):
    first = desktop()
    talk_from_tray(qtbot, first)
    first.actions.new_conversation.trigger()  # the tray menu's "New Conversation"
    assert "new conversation" in first.window.view.toPlainText()
    talk_from_tray(qtbot, first)
    prompt = first.pipeline.llm.engine.seen[-1]
    assert [m["role"] for m in prompt] == ["system", "user"]  # the first exchange is gone
    first.window.new_button.click()  # the conversation window's button does the same
    assert first.conversation.exchanges() == []
    first.shutdown()
    second = desktop()
    assert second.conversation.exchanges() == []  # the marker holds after a restart
    text = second.window.view.toPlainText()
    assert text.count("Capital of France?") == 2 and "new conversation" in text


def test_an_interrupted_reply_is_kept_as_far_as_it_was_spoken(qtbot, desktop):
    long_reply = " ".join(f"Sentence {i} is a little longer." for i in range(40))
    app = desktop(reply=long_reply, word_delay=0.02)
    app.actions.talk.trigger()
    qtbot.wait(200)
    app.actions.talk.trigger()
    qtbot.waitUntil(lambda: app.controller.state == "speaking", timeout=10000)
    qtbot.wait(150)
    app.controller.interrupt()
    qtbot.waitUntil(lambda: app.history.load()[0][0].reason != "unanswered", timeout=5000)
    saved = app.history.load()[0][0]
    assert saved.reason == "interrupted"
    assert saved.assistant.startswith("Sentence 0") and len(saved.assistant) < len(long_reply)
    assert "(interrupted)" in app.window.view.toPlainText()


def test_menu_actions_pause_quit_and_missing_dialogs(qtbot, desktop, monkeypatch):
    app = desktop()
    shown = []
    monkeypatch.setattr(QMessageBox, "information", lambda *a, **k: shown.append(a[2]))
    monkeypatch.setitem(sys.modules, "s2s_desktop.ui.settings_dialog", None)  # not built yet
    monkeypatch.setitem(sys.modules, "s2s_desktop.ui.model_manager", None)
    app.actions.settings.trigger()
    app.actions.models.trigger()
    assert len(shown) == 2 and "settings dialog is not available" in shown[0]
    assert "model manager is not available" in shown[1]
    app.actions.pause_hotkey.trigger()
    assert app.hotkey.paused and app.controller.status()["hotkey"]["paused"] is True
    app.window.hide()
    app.actions.conversation.trigger()
    assert app.window.isVisible()
    app.actions.quit.trigger()
    assert app.qapp.quits == 1


def test_settings_show_what_this_launch_runs_and_save_only_the_changed_field(qtbot, desktop):
    pytest.importorskip("s2s_desktop.ui.settings_dialog")
    from s2s_desktop import config
    from s2s_desktop.launch import Launch

    app = desktop()
    saved = app.settings.copy()
    config.save(saved)  # what the user saved earlier
    runs = saved.copy()
    runs.llm.max_new_tokens = 7  # this launch's --set
    app.launch = Launch(runs, saved.copy(), overrides={"llm.max_new_tokens": "7"})
    app.apply_settings(runs)
    app.actions.settings.trigger()
    dialog = app._dialogs["settings"]
    assert dialog.launch_note.isVisible()
    assert "--set llm.max_new_tokens=7" in dialog.launch_note.text()
    assert dialog.fields.get("llm.max_new_tokens") == 7  # what runs, not the file's 200
    dialog.fields.set("tts.speed", 1.5)
    dialog.fields.set("llm.model", "Tokyo is the capital of Japan.")
    assert dialog.apply(), dialog.message.text()
    on_disk, _ = config.load()
    from s2s_desktop.launch import changed_keys

    assert changed_keys(saved, on_disk) == {
        "tts.speed": 1.5,
        "llm.model": "Tokyo is the capital of Japan.",
    }  # the --set value was not written
    assert app.controller.settings.tts.speed == 1.5
    assert app.settings.llm.max_new_tokens == 7  # this launch keeps its --set
    qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)
    talk_from_tray(qtbot, app)
    assert "Tokyo is the capital" in app.window.view.toPlainText()
    dialog.close()


def test_a_missing_microphone_is_an_error_state_and_the_app_keeps_running(qtbot, desktop):
    mic = FakeMicrophone(fail_open="no microphone found: connect one and try again")
    app = desktop(mic=mic)
    assert mic.opened == 0  # not opened at idle: it opens on the press
    app.actions.talk.trigger()
    assert app.controller.state == "error"
    assert "no microphone found" in app.controller.detail
    assert "no microphone found" in app.tray.toolTip()
    assert "no microphone found" in app.window.status.text()
    mic.fail_open = ""  # plugged in: the next press works
    talk_from_tray(qtbot, app)
    assert "Paris" in app.window.view.toPlainText()


def test_floating_window_replaces_the_tray_and_its_talk_button_is_held(qtbot, desktop):
    app = desktop(use_tray=False)
    win = app.floating
    assert app.tray is None and win.isVisible()
    # a normal small tool window: never over the dialogs
    assert not win.windowFlags() & Qt.WindowType.WindowStaysOnTopHint
    assert win.state_label.text() == "Ready"
    qtbot.mousePress(win.talk, Qt.MouseButton.LeftButton)
    assert app.controller.state == "listening" and win.meter.isVisible()
    qtbot.wait(200)
    qtbot.mouseRelease(win.talk, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: app.controller.state == "idle" and "Paris" in app.window.view.toPlainText(),
        timeout=10000,
    )
    labels = {b.defaultAction().text() for b in win.tool_buttons.values()}
    assert {"Conversation…", "Settings…", "Models…", "Pause Hotkey", "Quit"} <= labels
    app.window.hide()
    qtbot.mouseClick(win.tool_buttons["Conversation…"], Qt.MouseButton.LeftButton)
    assert app.window.isVisible()


# ---------------------------------------------------------------------- conversation window


def test_conversation_window_streams_copies_and_clears_for_real(qtbot, tmp_path, monkeypatch):
    history = History(tmp_path / "history.jsonl")
    history.append(Exchange("Earlier question", "Earlier answer"))
    conversation = Conversation([("Earlier question", "Earlier answer")])
    earlier, _ = history.load()
    win = ConversationWindow(history, conversation, earlier)
    qtbot.addWidget(win)
    assert "Earlier answer" in win.view.toPlainText()
    win.on_transcript(7, "What is the capital of France?")
    for delta in ("The capital", " of France", " is Par", "is."):
        win.on_reply_delta(7, delta)
    qtbot.waitUntil(lambda: "is Paris." in win.view.toPlainText(), timeout=2000)
    assert "▍" in win.view.toPlainText()  # still streaming
    win.on_turn_finished(
        FinishedTurn(
            turn=7,
            transcript="What is the capital of France?",
            reply="The capital of France is Paris.",
            spoken="",
            reason=TurnReason.OK,
            timings_ms={
                "release_to_first_audio": 734.0,
                "stt": 120.0,
                "llm_first_token": 90.0,
                "total": 2500.0,
            },
        )
    )
    qtbot.waitUntil(lambda: "first audio 734 ms" in win.view.toPlainText(), timeout=2000)
    assert "total 2.5 s" in win.view.toPlainText()

    win.copy()
    copied = QGuiApplication.clipboard().text()
    assert copied.startswith("You: Earlier question\nAssistant: Earlier answer")
    assert "Assistant: The capital of France is Paris." in copied

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.No)
    assert not win.clear(confirm=True) and history.path.exists()
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    assert win.clear(confirm=True)
    assert not history.path.exists() and conversation.exchanges() == []
    assert "Earlier" not in win.view.toPlainText()


def test_turns_with_nothing_heard_leave_no_trace(qtbot):
    win = ConversationWindow()
    qtbot.addWidget(win)
    win.on_transcript(3, "")
    win.on_turn_finished(FinishedTurn(turn=3, transcript="", reason=TurnReason.NO_SPEECH))
    assert win.entries == {}
    win.on_transcript(4, "Hello?")
    win.on_turn_finished(
        FinishedTurn(
            turn=4,
            transcript="Hello?",
            reply="",
            spoken="",
            reason=TurnReason.ERROR,
            error="llm failed: boom",
        )
    )
    win.render()
    assert "llm failed: boom" in win.view.toPlainText()


def test_floating_window_meter_follows_the_level(qtbot):
    level = {"v": 0.0}
    win = FloatingWindow(AppActions(), level=lambda: level["v"])
    qtbot.addWidget(win)
    win.show_state("listening", "Listening…")
    level["v"] = 0.2
    qtbot.waitUntil(lambda: win.meter.value() > 50, timeout=1000)
    win.show_state("thinking", "Thinking…")
    assert not win.meter.isVisible() and win.meter.value() == 0


def test_the_real_settings_dialog_and_model_manager_open(qtbot, desktop):
    pytest.importorskip("s2s_desktop.ui.settings_dialog")
    pytest.importorskip("s2s_desktop.ui.model_manager")
    app = desktop()
    app.actions.settings.trigger()
    app.actions.models.trigger()
    dialog, models = app._dialogs["settings"], app._dialogs["models"]
    assert type(dialog).__name__ == "SettingsDialog" and dialog.isVisible()
    assert type(models).__name__ == "ModelManagerWindow" and models.isVisible()
    app.actions.settings.trigger()  # a second time: the same window, raised
    assert app._dialogs["settings"] is dialog
    dialog.close()
    models.close()


def test_the_first_run_banner_goes_once_settings_are_saved(qtbot, desktop):
    pytest.importorskip("s2s_desktop.ui.settings_dialog")
    from s2s_desktop import config
    from s2s_desktop.launch import Launch, first_run_choice

    app = desktop()
    app.launch = Launch(app.settings.copy(), None, first_run=first_run_choice())
    app.actions.settings.trigger()
    dialog = app._dialogs["settings"]
    assert dialog.launch_note.isVisible()
    assert dialog.launch_note.text().startswith("No settings saved yet")
    dialog.fields.set("tts.speed", 1.25)
    assert dialog.apply(), dialog.message.text()
    assert config.settings_path().exists()
    assert not dialog.launch_note.isVisible()  # it is no longer true
    dialog.close()
    app.actions.settings.trigger()  # reopened: still gone
    assert app._dialogs["settings"] is dialog and dialog.isVisible()
    assert not dialog.launch_note.isVisible()
    dialog.close()


def test_window_titles_name_the_app_once(qtbot, desktop, tmp_path):
    """Qt appends the app's display name to every title (" — s2s-desktop")."""
    pytest.importorskip("s2s_desktop.ui.settings_dialog")
    pytest.importorskip("s2s_desktop.ui.model_manager")
    from s2s_desktop.ui.first_run import FirstRunDialog

    app = desktop(use_tray=False)
    app.actions.settings.trigger()
    app.actions.models.trigger()
    first_run = FirstRunDialog(tmp_path)
    qtbot.addWidget(first_run)
    windows = [app.window, app.floating, app._dialogs["settings"], app._dialogs["models"],
               first_run]
    for window in windows:
        title = window.windowTitle()
        shown = title if title.endswith("s2s-desktop") else f"{title} — s2s-desktop"
        assert shown.lower().replace(" ", "-").count("s2s-desktop") == 1, shown
    for key in ("settings", "models"):
        app._dialogs[key].close()


def test_the_same_error_is_written_once_in_the_conversation_window(qtbot):
    error = "llm model is not loaded: llm model not found at /m.gguf: check llm.model"
    win = ConversationWindow()
    qtbot.addWidget(win)
    for turn, question in ((1, "Hello?"), (2, "Are you there?")):
        win.on_transcript(turn, question)
        win.show_state("error", error)  # the app's state changes before the window hears
        win.on_turn_finished(FinishedTurn(turn=turn, transcript=question, reply="", spoken="",
                                          reason=TurnReason.ERROR, error=error))
    shown = win.view.toPlainText() + "\n" + win.status.text()
    assert shown.count("llm model not found") == 1
    assert "failed again: the same error" in win.view.toPlainText()
    win.show_state("error", "the microphone is gone")  # another error: said where it is
    assert win.status.text() == "the microphone is gone"


def test_a_long_error_keeps_the_menus_state_line_short(qapp):
    tray = TrayIcon(AppActions())
    tray.show_state("error", "llm model not found at /home/user/" + "folder/" * 40)
    line = tray.status_action.text()
    assert line.startswith("Problem — llm model not found") and len(line) <= 80
    assert line.endswith("…") and "folder/" * 40 in tray.toolTip()  # all of it on hover
