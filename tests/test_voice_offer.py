"""A reply in a language no installed voice speaks: the notice comes with "Download <voice>…"
(floating window, tray menu and message, conversation window), which opens the model manager
with that catalog voice selected and ready to download; the manager says which languages the
installed voices cover; a voice downloaded later speaks the next reply in its language."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from s2s_desktop.engines.base import STTResult
from s2s_desktop.languages import VoiceAction, VoiceOption
from s2s_desktop.pipeline.voices import VoiceRouter
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_mic import FakeMicrophone
from tests.helpers.scripted_engines import FixedTextSTT

GERMAN_VOICE = "piper-thorsten-medium-de"  # in the real catalog, from the Hub: not installed here


class GermanSTT(FixedTextSTT):
    """Hears its settings' text, in German."""

    def transcribe(self, audio, language, options):
        return STTResult(self.settings.model, "de", 0.93)


class FakeQApp:
    def quit(self):
        pass


@pytest.fixture
def german_app(qtbot, qapp, monkeypatch, tmp_path):
    """german_app(use_tray) -> a started DesktopApp whose questions are heard as German, with
    only the starter's English voice installed (an empty Hugging Face cache)."""
    if not isinstance(qapp, QApplication):
        pytest.skip("a QCoreApplication exists (a headless test ran first in this process)")
    from s2s_desktop.app import DesktopApp
    from s2s_desktop.audio.sink import CaptureSink
    from s2s_desktop.engines import registry

    scripted.install(monkeypatch)
    monkeypatch.setitem(registry.BACKENDS["stt"], "fixed-text", f"{__name__}:GermanSTT")
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    made = []

    def make(use_tray: bool):
        s = scripted.settings(reply="Berlin ist die Hauptstadt.", heard="Was ist die Hauptstadt?")
        s.hotkey.enabled = False
        s.audio.min_press_ms = 100
        s.audio.earcons = False
        sink = CaptureSink()
        app = DesktopApp(FakeQApp(), s, use_tray=use_tray, mic=FakeMicrophone(), speaker=sink)
        assert app.start()
        made.append(app)
        qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)
        return app, sink

    yield make
    for app in made:
        app.shutdown()
        for w in (app.window, app.floating, *app._dialogs.values()):
            if w is not None:
                w.close()


def ask_in_german(qtbot, app):
    app.actions.talk.trigger()
    qtbot.wait(200)
    app.actions.talk.trigger()
    qtbot.waitUntil(lambda: app.controller.state == "idle"
                    and "Berlin" in app.window.view.toPlainText(), timeout=10000)
    qtbot.waitUntil(lambda: app.voice_offer.action.isVisible(), timeout=5000)


def assert_manager_offers_the_german_voice(app):
    window = app._dialogs["models"]
    assert window.isVisible()
    chosen = window.selected()
    assert chosen is not None and chosen.id == GERMAN_VOICE and not chosen.installed
    assert window.buttons["download"].isEnabled() and window.buttons["download"].isDefault()
    assert window.offer_label.isVisible()
    assert "No German voice is installed" in window.offer_label.text()
    assert "thorsten" in window.offer_label.text()
    # which reply languages the installed voices cover, and what a download adds
    covered = window.languages_label.text()
    assert covered.startswith("Replies are spoken in English;") and "German" in covered
    return window


def test_the_floating_windows_offer_opens_the_manager_with_the_voice_selected(qtbot,
                                                                              german_app):
    app, sink = german_app(use_tray=False)
    ask_in_german(qtbot, app)
    floating = app.floating
    assert "No German voice is installed" in floating.detail_label.text()
    turn = app.controller.current_turn
    assert not sink.audio(turn).any()  # shown, not spoken by the English voice
    offer = app.voice_offer.action
    assert offer.text() == "Download German Voice…"
    (button,) = [b for b in floating.tool_buttons.values() if b.defaultAction() is offer]
    assert offer in floating.menu.actions()  # the right-click menu has it too
    assert button.isVisible()
    assert app.window.offer_button.isVisibleTo(app.window)  # the conversation window too
    assert "models" not in app._dialogs
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    window = assert_manager_offers_the_german_voice(app)

    window.downloaded.emit(GERMAN_VOICE)  # as the manager says when the download is done
    assert not offer.isVisible() and button.isHidden()
    assert app.pipeline.tts.voices._stale  # the next reply looks at the voices again


def test_the_tray_offers_it_in_the_menu_and_on_a_click_of_its_message(qtbot, german_app):
    app, _ = german_app(use_tray=True)
    ask_in_german(qtbot, app)
    offer = app.voice_offer.action
    assert offer in app.tray.menu.actions()
    assert app.tray.clicked_action is offer
    app.tray.messageClicked.emit()
    assert_manager_offers_the_german_voice(app)


def test_a_later_message_does_not_open_the_voice_offer_on_click(qtbot, german_app):
    app, _ = german_app(use_tray=True)
    ask_in_german(qtbot, app)
    app.show_notice("New conversation: the earlier questions are forgotten")
    app.tray.messageClicked.emit()
    assert "models" not in app._dialogs


def test_the_offered_voice_is_scrolled_into_view_in_a_short_window(qtbot, qapp, tmp_path,
                                                                   monkeypatch):
    if not isinstance(qapp, QApplication):
        pytest.skip("a QCoreApplication exists (a headless test ran first in this process)")
    from s2s_desktop import config
    from s2s_desktop.ui.model_manager import ModelManagerWindow

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    window = ModelManagerWindow(config.Settings())
    qtbot.addWidget(window)
    window.resize(900, 260)  # a few rows: the voices are far down the catalog
    window.show()
    row = window.table.item(window.row_of(GERMAN_VOICE), 0)
    in_view = lambda: window.table.viewport().rect().contains(  # noqa: E731
        window.table.visualItemRect(row))
    assert not in_view()
    assert window.offer([GERMAN_VOICE], "No German voice is installed:")
    qtbot.waitUntil(in_view, timeout=2000)
    assert window.selected().id == GERMAN_VOICE


# ------------------------------------------------------------------ the router


def test_a_voice_downloaded_later_speaks_the_next_reply_in_its_language():
    listed = [VoiceOption("piper-de", "Piper de", ("de",), {"tts.model": "x"}, False)]
    told = []
    router = VoiceRouter(told.append, voices=lambda: list(listed))
    loaded = object()
    router._load = lambda voice, section, device: loaded
    section = scripted.settings().tts
    assert router.engine_for("de", object(), section, "cpu") is None
    assert [c.action for c in told] == [VoiceAction.MISSING]
    assert told[0].offer() == "Download German Voice…" and told[0].voice.id == "piper-de"
    assert router.engine_for("de", object(), section, "cpu") is None and len(told) == 1

    listed[0] = VoiceOption("piper-de", "Piper de", ("de",), {"tts.model": "x"}, True)
    assert router.engine_for("de", object(), section, "cpu") is None  # not looked at again
    router.catalog_changed()
    assert router.engine_for("de", object(), section, "cpu") is loaded
