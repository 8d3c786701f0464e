"""Single instance and the commands a running app takes (`s2s-desktop toggle|talk-start|
talk-stop|quit|status`), over the real local socket, with the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import pytest

from s2s_desktop import ipc
from s2s_desktop.audio.sink import CaptureSink
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_mic import FakeMicrophone


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("S2S_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("S2S_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def cli(qtbot, *args, timeout_ms=30000) -> subprocess.CompletedProcess:
    """Run `python -m s2s_desktop ARGS` while this test's Qt event loop keeps answering."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "s2s_desktop", *args],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        qtbot.waitUntil(lambda: proc.poll() is not None, timeout=timeout_ms)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_commands_without_a_running_app_say_so(isolated):
    for command in (["status"], ["toggle"], ["status", "--json"]):
        res = subprocess.run(
            [sys.executable, "-m", "s2s_desktop", *command],
            env=dict(os.environ),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 1
        assert "s2s-desktop is not running" in res.stderr and "start it" in res.stderr


def test_one_server_per_user_and_a_stale_socket_is_replaced(qtbot, isolated):
    first = ipc.CommandServer({})
    assert first.listen()
    second = ipc.CommandServer({})
    assert not second.listen()  # the first one answers: this would be a second instance
    name = first.server.fullServerName()
    first.close()
    if os.name == "posix":  # a crashed app leaves its socket file behind
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(name)
        stale.close()
        assert os.path.exists(name)
    third = ipc.CommandServer({})
    assert third.listen()
    third.close()


@pytest.mark.skipif(os.name != "posix", reason="Unix socket permissions")
def test_the_socket_is_private_to_the_user(qtbot, isolated):
    server = ipc.CommandServer({})
    assert server.listen()
    try:
        mode = os.stat(server.server.fullServerName()).st_mode
        assert stat.S_ISSOCK(mode) and mode & 0o077 == 0
    finally:
        server.close()


def test_requests_are_json_lines_and_bad_ones_are_refused(qtbot, isolated):
    calls = []
    server = ipc.CommandServer(
        {"toggle": lambda req: calls.append(req) or {"state": "x"}, "boom": lambda req: 1 / 0}
    )
    assert server.dispatch(b'{"command": "toggle"}') == {"ok": True, "state": "x"}
    assert calls == [{"command": "toggle"}]
    assert server.dispatch(b"not json")["ok"] is False
    assert "bad request" in server.dispatch(b'["toggle"]')["error"]
    assert "unknown command 'nope'" in server.dispatch(b'{"command": "nope"}')["error"]
    boom = server.dispatch(b'{"command": "boom"}')
    assert boom["ok"] is False and "ZeroDivisionError" in boom["error"]


@pytest.fixture
def running_app(qtbot, monkeypatch, isolated):
    from s2s_desktop.app import DesktopApp

    scripted.install(monkeypatch)
    s = scripted.settings(reply="Paris.", heard="Capital of France?")
    s.hotkey.enabled = False
    s.audio.min_press_ms = 50

    class FakeQApp:
        quits = 0

        def quit(self):
            FakeQApp.quits += 1

    app = DesktopApp(FakeQApp(), s, use_tray=True, mic=FakeMicrophone(), speaker=CaptureSink())
    assert app.start()
    qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)
    yield app
    app.shutdown()
    app.window.close()


def test_status_toggle_talk_and_quit_from_the_command_line(qtbot, running_app):
    app = running_app
    res = cli(qtbot, "status", "--json")
    assert res.returncode == 0, res.stderr
    status = json.loads(res.stdout)
    assert status["state"] == "idle" and status["pid"] == os.getpid()
    assert set(status["models"]) == {"vad", "stt", "llm", "tts"}
    assert all(status["models"].values())
    assert status["hotkey"]["combo"] and "last_error" in status and "turn" in status

    human = cli(qtbot, "status")
    assert human.returncode == 0 and human.stdout.startswith("state:      idle")
    assert "llm:" in human.stdout

    assert cli(qtbot, "talk-start").returncode == 0
    assert app.controller.state == "listening"
    assert cli(qtbot, "talk-stop").returncode == 0
    qtbot.waitUntil(
        lambda: app.controller.state == "idle" and "Paris." in app.window.view.toPlainText(),
        timeout=10000,
    )
    assert app.controller.turn_info["source"] == "cli"

    assert cli(qtbot, "toggle").returncode == 0
    assert app.controller.state == "listening"
    assert cli(qtbot, "toggle").returncode == 0
    qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)

    res = cli(qtbot, "quit")
    assert res.returncode == 0 and "quitting" in res.stdout
    qtbot.waitUntil(lambda: app.qapp.quits == 1, timeout=2000)


def test_talk_start_while_loading_fails_with_the_reason(qtbot, running_app):
    app = running_app
    app.pipeline.events.stage_state.emit("llm", "reloading", "word-by-word")
    qtbot.waitUntil(lambda: app.controller.state == "loading")
    res = cli(qtbot, "talk-start")
    assert res.returncode == 1 and "still loading" in res.stderr
    app.pipeline.events.stage_state.emit("llm", "ready", "word-by-word")


def test_hands_free_on_and_off_from_the_command_line(qtbot, running_app):
    from s2s_desktop.engines.vad.silero_onnx import SileroOnnxVAD
    from tests.conftest import VADSettings
    from tests.helpers.fake_sounddevice import FakeSoundDevice
    from tests.test_controller_hands_free import hands_free

    app = running_app
    vad = SileroOnnxVAD(VADSettings())
    vad.load()
    mics = hands_free(app.controller, vad, FakeSoundDevice(input_amplitude=0.0))
    res = cli(qtbot, "hands-free", "on")
    assert res.returncode == 0 and "hands-free conversation on" in res.stdout, res.stderr
    assert mics[-1].is_open and app.actions.hands_free.isChecked()
    assert "Hands-free" in app.tray.toolTip()
    assert json.loads(cli(qtbot, "status", "--json").stdout)["hands_free"] is True
    assert "hands-free: on" in cli(qtbot, "status").stdout
    res = cli(qtbot, "hands-free", "off")
    assert res.returncode == 0 and "hands-free conversation off" in res.stdout
    assert not mics[-1].is_open and not app.actions.hands_free.isChecked()
    assert cli(qtbot, "set", "listen.hands_free=true").returncode == 0  # now, and at start
    assert app.controller.situation.hands_free and mics[-1].is_open
    assert cli(qtbot, "set", "listen.hands_free=false").returncode == 0
    assert not app.controller.situation.hands_free and not mics[-1].is_open
    bad = cli(qtbot, "hands-free", "maybe")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    # the menu's action, with a microphone that fails: unchecked again, the reason shown
    hands_free(app.controller, vad, FakeSoundDevice(inputs=(), outputs=("Built-in Speakers",)))
    app.actions.hands_free.trigger()
    assert not app.actions.hands_free.isChecked() and not app.controller.situation.hands_free
    assert "push-to-talk still works" in app.controller.last_error
    failed = cli(qtbot, "hands-free", "on")
    assert failed.returncode == 1 and "hands-free conversation is off" in failed.stderr
