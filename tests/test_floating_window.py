"""Without a system tray the floating window is the whole UI: it offers what the tray does
(Stop Speaking, Copy Last Answer, running timers, a right-click menu), and a long error stays
on the screen, readable, without the "Hold … to talk" hint of a working app."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QContextMenuEvent, QGuiApplication
from PySide6.QtWidgets import QApplication

from s2s_desktop.ui.actions import AppActions
from s2s_desktop.ui.floating_window import FloatingWindow
from tests.test_everyday_app import finished, type_question
from tests.test_ui import desktop  # noqa: F401  (the fixture)

LONG_ERROR = "llm model not found at /home/user/models/" + "very-long-folder-name/" * 60


def visible_texts(menu) -> list[str]:
    return [a.text() for a in menu.actions() if a.isVisible() and not a.isSeparator()]


def test_stop_copy_and_timers_are_offered_without_a_tray(qtbot, desktop):  # noqa: F811
    app = desktop(use_tray=False, reply=" ".join(f"word{i}." for i in range(60)),
                  word_delay=0.05)
    win = app.floating
    stop, copy = win.tool_buttons["Stop Speaking"], win.tool_buttons["Copy Last Answer"]
    timers = win.tool_buttons["Timers"]
    assert stop.isVisible() and copy.isVisible() and not timers.isVisible()
    assert not stop.isEnabled()  # nothing to stop at idle

    type_question(qtbot, app, "Tell me a long story")
    turn = app.controller.current_turn
    qtbot.waitUntil(lambda: len(app.speaker.audio(turn)) > 0, timeout=10000)
    assert stop.isEnabled()
    qtbot.mouseClick(stop, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: finished(app, turn) is not None, timeout=5000)
    assert finished(app, turn).reason == "interrupted"

    QGuiApplication.clipboard().setText("before")
    qtbot.mouseClick(copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == app.conversation.last_reply() != "before"

    type_question(qtbot, app, "Set a timer for 5 minutes")
    timer_turn = app.controller.current_turn
    qtbot.waitUntil(lambda: finished(app, timer_turn) is not None, timeout=10000)
    qtbot.waitUntil(timers.isVisible, timeout=2000)
    assert timers.text() == "Timers (1)"
    app.everyday.timers_menu.aboutToShow.emit()
    cancel = app.everyday.timers_menu.actions()[0]
    assert cancel.text().startswith("Cancel 5 minute timer")
    cancel.trigger()
    assert app.pipeline.timers.running() == []
    qtbot.waitUntil(lambda: not timers.isVisible(), timeout=2000)


def test_right_click_opens_the_trays_menu(qtbot, desktop):  # noqa: F811
    app = desktop(use_tray=False)
    win = app.floating
    shown = []
    win.menu.aboutToShow.connect(lambda: shown.append(visible_texts(win.menu)))
    QApplication.sendEvent(
        win, QContextMenuEvent(QContextMenuEvent.Reason.Mouse, QPoint(10, 10),
                               win.mapToGlobal(QPoint(10, 10)))
    )
    qtbot.waitUntil(lambda: bool(shown), timeout=2000)
    win.menu.hide()
    texts = shown[0]
    assert texts[0].startswith("Ready")  # the state line, as in the tray
    assert texts[1:4] == ["Talk", "Stop Speaking", "Copy Last Answer"]
    assert {"Conversation…", "Settings…", "Models…", "Pause Hotkey", "Quit"} <= set(texts)


def test_a_long_error_stays_on_the_screen_readable_and_without_the_talk_hint(qtbot):
    win = FloatingWindow(AppActions())
    qtbot.addWidget(win)
    hotkey = {"combo": "ctrl+shift+space", "available": True, "mode": "hold"}
    win.show_state("idle", "Ready", hotkey)
    assert "Hold ctrl+shift+space to talk" in win.detail_label.text()
    assert "palette(mid)" not in win.detail_label.styleSheet()  # not light grey
    win.show()

    win.show_state("error", LONG_ERROR, hotkey)
    shown = win.detail_label.text()
    assert shown.startswith("llm model not found") and shown.endswith("…")
    assert "to talk" not in shown  # the app is not ready to talk
    assert win.detail_label.toolTip() == LONG_ERROR  # all of it, on hover
    assert "#b00020" in win.detail_label.styleSheet()  # an error reads as one
    area = win.screen().availableGeometry()
    assert win.height() < area.height()
    assert win.frameGeometry().bottom() <= area.bottom()

    win.show_notice(LONG_ERROR * 3, error=True)
    assert win.height() < area.height() and win.frameGeometry().bottom() <= area.bottom()
