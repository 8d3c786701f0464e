"""Dictation without a real keyboard: where keystrokes are refused and why, paste with the
user's clipboard put back, typing where pasting fails, and the key's whole path in the app
(recorded, transcribed, delivered; never answered, never in the conversation)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QGuiApplication

from s2s_desktop import dictation_key
from s2s_desktop.assistant.dictation import Delivery, cleanup_messages, keys_refused
from tests.test_ui import desktop  # noqa: F401  (the fixture)


def test_where_keystrokes_are_refused_it_says_what_to_do():
    assert keys_refused("linux", {"DISPLAY": ":0"}) == ""
    wayland = keys_refused("linux", {"XDG_SESSION_TYPE": "wayland", "DISPLAY": ":0"})
    assert "Wayland" in wayland and "Ctrl+V" in wayland
    mac = keys_refused("darwin", {}, ax_trusted=lambda: False)
    assert "Accessibility" in mac and "Cmd+V" in mac
    assert keys_refused("darwin", {}, ax_trusted=lambda: True) == ""
    assert keys_refused("win32", {}) == ""


def test_cleanup_prompt_holds_the_dictated_text():
    messages = cleanup_messages("um so send it tomorrow")
    assert messages[-1] == {"role": "user", "content": "um so send it tomorrow"}
    assert "filler" in messages[0]["content"]


class FakeSender:
    def __init__(self, refuse_paste=False):
        self.refuse_paste = refuse_paste
        self.pasted: list[str] = []
        self.typed: list[str] = []

    def paste(self):
        if self.refuse_paste:
            raise OSError("paste refused")
        self.pasted.append(QGuiApplication.clipboard().text())

    def type(self, text):
        self.typed.append(text)


@pytest.fixture
def dictation(desktop, monkeypatch):  # noqa: F811
    monkeypatch.setattr(dictation_key, "keys_refused", lambda: "")
    app = desktop(reply="The LLM must not answer dictation.", heard="Send the report today.")
    sender = FakeSender()
    app.everyday.dictation.sender_factory = lambda: sender
    return app, sender


def test_paste_puts_the_users_clipboard_back(qtbot, dictation):
    app, sender = dictation
    QGuiApplication.clipboard().setText("mine")
    assert app.everyday.dictation.deliver("Send the report today.") is Delivery.PASTED
    assert sender.pasted == ["Send the report today."]
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == "mine", timeout=3000)


def test_where_pasting_fails_the_text_is_typed(qtbot, dictation):
    app, sender = dictation
    sender.refuse_paste = True
    QGuiApplication.clipboard().setText("mine")
    assert app.everyday.dictation.deliver("Hello there.") is Delivery.TYPED
    assert sender.typed == ["Hello there."]
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == "mine", timeout=3000)


def test_where_the_os_refuses_the_text_waits_on_the_clipboard(dictation, monkeypatch):
    app, sender = dictation
    monkeypatch.setattr(dictation_key, "keys_refused", lambda: "Wayland says no: paste it")
    assert app.everyday.dictation.deliver("Hello there.") is Delivery.CLIPBOARD
    assert QGuiApplication.clipboard().text() == "Hello there."
    assert sender.pasted == [] and sender.typed == []
    assert app.window.status.text() == "Wayland says no: paste it"


def test_the_dictation_key_types_what_was_said_and_answers_nothing(qtbot, dictation):
    app, sender = dictation
    key = app.everyday.dictation
    turn, exchanges = app.pipeline.clock.current, len(app.conversation.exchanges())
    key.press()
    assert key.recording
    qtbot.wait(300)
    key._key_released()
    qtbot.waitUntil(lambda: sender.pasted == ["Send the report today."], timeout=5000)
    assert app.pipeline.clock.current == turn  # no turn: nothing answered, nothing spoken
    assert len(app.conversation.exchanges()) == exchanges
    assert app.controller.state == "idle"


def test_a_dictation_press_while_talking_is_ignored(qtbot, dictation):
    app, sender = dictation
    app.actions.talk.trigger()
    assert app.controller.state == "listening"
    app.everyday.dictation.press()
    assert not app.everyday.dictation.recording


def test_settings_hold_the_dictation_key_cleanup_and_sounds(qtbot):
    from s2s_desktop.config import Settings
    from s2s_desktop.ui.settings_dialog import SettingsDialog

    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    assert dialog.dictation_edit.combo() == ""  # off by default
    dialog.dictation_edit.set_combo("ctrl+shift+f8")
    dialog.fields.set("assistant.dictation_cleanup", True)
    dialog.fields.set("audio.earcon_volume", 0.3)
    dialog.fields.set("audio.earcons", False)
    saved = Settings()
    dialog.fields.store(saved)
    assert saved.hotkey.dictation_combo == "ctrl+shift+f8"
    assert saved.assistant.dictation_cleanup is True
    assert saved.audio.earcons is False and saved.audio.earcon_volume == pytest.approx(0.3)
