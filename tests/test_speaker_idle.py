"""The output stream runs only while something plays: after an answer, a timer's spoken
announcement or an earcon at idle, no playback stream stays open (an open one costs CPU and
keeps the sound server awake)."""

from __future__ import annotations

import pytest

from s2s_desktop.assistant.earcons import Earcon
from s2s_desktop.audio.speaker import SpeakerSink
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_mic import FakeMicrophone
from tests.helpers.fake_sounddevice import FakeSoundDevice
from tests.test_everyday_app import finished, type_question
from tests.test_ui import FakeQApp


@pytest.fixture
def app_and_sd(qtbot, monkeypatch, tmp_path):
    from s2s_desktop.app import DesktopApp

    scripted.install(monkeypatch)
    monkeypatch.setenv("S2S_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("S2S_DATA_DIR", str(tmp_path / "data"))
    s = scripted.settings(reply="It is noon.", heard="What time is it?")
    s.hotkey.enabled = False
    sd = FakeSoundDevice()
    app = DesktopApp(FakeQApp(), s, use_tray=True, mic=FakeMicrophone(),
                     speaker=SpeakerSink(sd=sd))
    assert app.start()
    qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)
    yield app, sd
    app.shutdown()
    app.window.close()


def loud(sd) -> int:
    return int((abs(sd.audio_played("default")) > 0.01).sum())


def playing(sd) -> list:
    return [s for s in sd.open_streams() if type(s).__name__ == "_Out"]


def test_no_playback_stream_stays_open_at_idle(qtbot, app_and_sd):
    app, sd = app_and_sd
    assert playing(sd) == []  # started: nothing plays, nothing open

    type_question(qtbot, app, "What is the capital of France?")
    turn = app.controller.current_turn
    qtbot.waitUntil(lambda: finished(app, turn) is not None, timeout=10000)
    assert len(sd.opened) >= 1  # the answer was played
    qtbot.waitUntil(lambda: app.controller.state == "idle" and not playing(sd), timeout=10000)  # generous: CI machines run loaded

    # the timer may ring during its own reply's turn (then it is said after it): wait for the
    # announcement itself, then for its sound, not for a count of opened streams
    heard_at_announce: list[int] = []
    announce = app.everyday._announce
    app.everyday._announce = lambda text: (heard_at_announce.append(loud(sd)), announce(text))
    type_question(qtbot, app, "Set a timer for 1 second")  # rings and speaks at idle
    qtbot.waitUntil(lambda: bool(heard_at_announce), timeout=10000)
    qtbot.waitUntil(lambda: loud(sd) > heard_at_announce[0], timeout=10000)  # it was heard
    qtbot.waitUntil(lambda: not playing(sd), timeout=10000)
    assert app.controller.state == "idle"

    app.everyday.earcons.play(Earcon.LISTEN_START)  # the dictation key's sound, at idle
    assert playing(sd)
    qtbot.waitUntil(lambda: not playing(sd), timeout=10000)  # generous: CI machines run loaded
