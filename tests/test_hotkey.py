"""The global hotkey: combo parsing, the helper process (a real X server and real key events
from xdotool where Xvfb is installed) and the app-side client, including the notice that
names `s2s-desktop toggle` when no hotkey is possible."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from s2s_desktop.config import HotkeySettings
from s2s_desktop.errors import SettingsError
from s2s_desktop.hotkey.client import HotkeyClient
from s2s_desktop.hotkey.combo import format_combo, parse_combo
from s2s_desktop.hotkey.listener import ComboTracker, key_name
from tests.helpers.desktop_env import missing, xvfb


@pytest.mark.parametrize(
    "text, keys",
    [
        ("ctrl+alt+space", {"ctrl", "alt", "space"}),
        ("Control + Option + Space", {"ctrl", "alt", "space"}),
        ("cmd+shift+F8", {"cmd", "shift", "f8"}),
        ("super+a", {"cmd", "a"}),
        ("ctrl_l+alt_r+Return", {"ctrl", "alt", "enter"}),
        ("F9", {"f9"}),
    ],
)
def test_combos_parse_to_canonical_keys(text, keys):
    assert parse_combo(text) == keys


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty"),
        ("ctrl+banana", "unknown key 'banana'"),
        ("shift", "single modifier"),
        ("+", "no keys"),
    ],
)
def test_bad_combos_say_why(text, why):
    with pytest.raises(SettingsError, match=why):
        parse_combo(text)


def test_format_puts_modifiers_first():
    assert format_combo(parse_combo("space+alt+ctrl")) == "ctrl+alt+space"


def test_pynput_keys_map_to_names():
    assert key_name(SimpleNamespace(name="ctrl_r")) == "ctrl"
    assert key_name(SimpleNamespace(name="alt_gr")) == "alt"
    assert key_name(SimpleNamespace(name="space")) == "space"
    assert key_name(SimpleNamespace(name=None, char="A", vk=65)) == "a"
    assert key_name(SimpleNamespace(name=None, char="\x01", vk=0x61)) == "a"  # ctrl+a
    assert key_name(None) == ""


def test_combo_tracker_reports_the_whole_combo_once():
    t = ComboTracker(parse_combo("ctrl+alt+space"))
    assert not t.press("ctrl") and not t.press("alt")
    assert t.press("space")
    assert not t.press("space")  # auto-repeat while held (Windows, macOS: presses only)
    assert not t.release("shift", 1.0)
    assert t.release("alt", 2.0)
    assert t.take_release() == 2.0  # reported with the time it went up
    assert not t.release("space", 2.1)
    assert t.take_release() is None
    assert not t.press("space")  # alt is up: not the combo
    assert t.press("alt")


def test_x11_auto_repeat_release_and_press_pairs_are_not_a_release():
    t = ComboTracker(parse_combo("ctrl+alt+space"))
    for key in ("ctrl", "alt", "space"):
        t.press(key)
    for n in range(5):  # X11 repeats a held key as release + press at the same instant
        assert t.release("space", 1.0 + n)
        assert not t.press("space")  # not a new press either
        assert t.take_release() is None
    assert t.release("space", 9.0)  # the real release: no press follows
    assert t.take_release() == 9.0


def test_the_helper_says_why_without_a_display():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    res = subprocess.run(
        [sys.executable, "-m", "s2s_desktop.hotkey.listener", "--combo", "ctrl+alt+space"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input="",
    )
    if sys.platform.startswith("linux"):
        assert res.returncode == 2
        assert res.stdout.startswith("error global hotkeys need an X11 display")


def test_the_client_names_the_toggle_command_when_no_hotkey_is_possible(qtbot, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    client = HotkeyClient(HotkeySettings(combo="ctrl+alt+space"))
    with qtbot.waitSignal(client.unavailable, timeout=30000) as blocker:
        client.start()
    text = blocker.args[0]
    assert "No global hotkey" in text and "`s2s-desktop toggle`" in text
    assert client.info()["available"] is False and client.info()["problem"]
    client.stop()


def test_wayland_is_recognised_at_once(qtbot, monkeypatch):
    monkeypatch.setenv("XDG_SESSION_TYPE", "wayland")
    monkeypatch.setattr(sys, "platform", "linux")
    client = HotkeyClient(HotkeySettings())
    got = []
    client.unavailable.connect(got.append)
    client.start()
    assert got and "Wayland" in got[0] and "s2s-desktop toggle" in got[0]


def test_a_bad_combo_is_a_notice_not_a_crash(qtbot):
    client = HotkeyClient(HotkeySettings(combo="ctrl+banana"))
    got = []
    client.unavailable.connect(got.append)
    client.start()
    assert got and "banana" in got[0]


@pytest.fixture(scope="module")
def display():
    if missing("Xvfb", "xdotool"):
        pytest.skip(f"{missing('Xvfb', 'xdotool')} is not installed (apt-get install xvfb xdotool)")
    with xvfb() as name:
        yield name


def need_pynput():
    # importing pynput itself needs a display: only look for it
    if importlib.util.find_spec("pynput") is None:
        pytest.skip("pynput is not installed: pip install 's2s-desktop[hotkey]'")


def xdotool(display, *args):
    subprocess.run(
        ["xdotool", *args], env=dict(os.environ, DISPLAY=display), check=True, timeout=10
    )


def test_real_key_events_reach_the_app_and_pause_silences_them(qtbot, monkeypatch, display):
    need_pynput()
    monkeypatch.setenv("DISPLAY", display)
    monkeypatch.delenv("XDG_SESSION_TYPE", raising=False)
    client = HotkeyClient(HotkeySettings(combo="ctrl+alt+space"))
    try:
        with qtbot.waitSignal(client.ready, timeout=30000):
            client.start()
        assert client.info()["available"] is True
        with qtbot.waitSignal(client.pressed, timeout=5000) as pressed:
            xdotool(display, "keydown", "ctrl+alt+space")
        with qtbot.waitSignal(client.released, timeout=5000) as released:
            xdotool(display, "keyup", "ctrl+alt+space")
        assert 0 < pressed.args[0] < released.args[0]
        client.set_paused(True)
        got = []
        client.pressed.connect(got.append)
        xdotool(display, "keydown", "ctrl+alt+space")
        xdotool(display, "keyup", "ctrl+alt+space")
        qtbot.wait(300)
        assert got == []
    finally:
        client.stop()


def test_the_helper_exits_when_the_app_goes(display):
    need_pynput()
    proc = subprocess.Popen(
        [sys.executable, "-m", "s2s_desktop.hotkey.listener", "--combo", "ctrl+alt+space"],
        env=dict(os.environ, DISPLAY=display),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().startswith("ready")
        proc.stdin.close()  # what happens to its stdin when the app dies
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
