"""Settings → Tools (tools on/off, per tool) and the Allow / Deny question before a writing
tool, on a real (offscreen) screen."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox

from s2s_desktop import config
from s2s_desktop.engines.llm.tool_calls import ToolCall
from s2s_desktop.ui.form_fields import Fields
from s2s_desktop.ui.tool_permission import ToolPermission
from s2s_desktop.ui.tools_settings import NAME_ROLE, ToolsTab


def _items(tab):
    return {tab.list.item(i).data(NAME_ROLE): tab.list.item(i) for i in range(tab.list.count())}


def test_the_tools_tab_lists_the_tools_and_unticking_one_switches_it_off(qtbot):
    fields = Fields()
    tab = ToolsTab(fields)
    qtbot.addWidget(tab)
    settings = config.Settings()
    settings.tools.disabled = ["open_app"]
    fields.load(settings)
    tab.load(settings)
    items = _items(tab)
    assert {"calculate", "save_note", "read_clipboard", "open_app"} <= set(items)
    assert items["open_app"].checkState() == Qt.CheckState.Unchecked
    assert "asks first" in items["save_note"].text()
    items["calculate"].setCheckState(Qt.CheckState.Unchecked)
    tab.cue.setCurrentIndex(tab.cue.findData("earcon"))
    new = settings.copy()
    fields.store(new)
    tab.store(new)
    assert sorted(new.tools.disabled) == ["calculate", "open_app"]
    assert new.tools.enabled and not new.tools.allow_writing
    assert new.tools.checking_cue == "earcon"


def _save_note_tool():
    from s2s_desktop.tools.builtin.notes import note_tool

    return note_tool(lambda: None)


def _answer_from_thread(permission, stop):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault(
        "allowed", permission.ask(_save_note_tool(), ToolCall("save_note", {"text": "buy milk"}),
                                  stop)))
    thread.start()
    return thread, result


def _question_box():
    boxes = [w for w in QApplication.topLevelWidgets()
             if isinstance(w, QMessageBox) and w.isVisible()]
    return boxes[0] if boxes else None


def test_allow_lets_a_writing_tool_run_and_deny_or_stop_does_not(qtbot):
    permission = ToolPermission()
    for button, expected in (("Allow", True), ("Deny", False)):
        thread, result = _answer_from_thread(permission, threading.Event())
        qtbot.waitUntil(lambda: _question_box() is not None, timeout=5000)
        box = _question_box()
        assert box.text() == "Shall I save the note 'buy milk'?"
        next(b for b in box.buttons() if b.text() == button).click()
        thread.join(5)
        assert result["allowed"] is expected
        qtbot.waitUntil(lambda: _question_box() is None, timeout=5000)

    stop = threading.Event()
    thread, result = _answer_from_thread(permission, stop)
    qtbot.waitUntil(lambda: _question_box() is not None, timeout=5000)
    stop.set()  # Stop while the question is up: a no, and the question goes away
    thread.join(5)
    assert result["allowed"] is False
    qtbot.waitUntil(lambda: _question_box() is None, timeout=5000)


def test_the_conversation_window_shows_each_tool_call(qtbot, tmp_path):
    from s2s_desktop.history import History
    from s2s_desktop.pipeline.turns import Conversation, FinishedTurn
    from s2s_desktop.ui.conversation_window import ConversationWindow

    window = ConversationWindow(History(tmp_path / "h.jsonl"), Conversation(), [])
    qtbot.addWidget(window)
    window.on_turn_finished(FinishedTurn(
        turn=1, transcript="Save a note that says buy milk.", reply="I could not.",
        tool_calls=({"name": "save_note", "arguments": {"text": "buy milk"},
                     "outcome": "denied", "ms": 0.0, "error": "the user did not allow it"},)))
    shown = window.view.toPlainText()
    assert "tool save_note(text='buy milk') → denied: the user did not allow it" in shown


def test_a_spoken_answer_settles_the_question_and_closes_it(qtbot):
    permission = ToolPermission()
    news = []
    permission.asked.connect(lambda: news.append("asked"))
    permission.settled.connect(lambda: news.append("settled"))
    for spoken in (True, False):
        thread, result = _answer_from_thread(permission, threading.Event())
        qtbot.waitUntil(lambda: _question_box() is not None, timeout=5000)
        box = _question_box()
        assert "Say yes or no" in box.informativeText()
        # no key answers it: the talk key's Space (repeated by X) once pressed Allow
        for target in (box, *box.buttons()):
            for key in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_A):
                QTest.keyClick(target, key)
                QTest.keyClick(target, key, Qt.KeyboardModifier.ControlModifier
                               | Qt.KeyboardModifier.AltModifier)
        qtbot.wait(200)
        assert thread.is_alive() and _question_box() is box
        permission.answer(spoken)  # what the controller sends for a spoken yes / no
        thread.join(5)
        assert result["allowed"] is spoken
        qtbot.waitUntil(lambda: _question_box() is None, timeout=5000)
    qtbot.waitUntil(lambda: news == ["asked", "settled"] * 2, timeout=5000)
    permission.answer(True)  # nothing is asked now: nothing happens
    thread, result = _answer_from_thread(permission, threading.Event())
    qtbot.waitUntil(lambda: _question_box() is not None, timeout=5000)
    QTest.keyClick(_question_box(), Qt.Key.Key_Escape)  # Escape is Deny
    thread.join(5)
    assert result["allowed"] is False
