"""Start at login: the XDG autostart file on Linux (written and removed for real, also by the
app at start and when the setting changes), the macOS LaunchAgent plist in a given folder,
and the Windows Run key through a registry object."""

from __future__ import annotations

import plistlib
import subprocess
import sys
from pathlib import Path

import pytest

from s2s_desktop.assistant import autostart
from s2s_desktop.assistant.autostart import (
    RUN_KEY,
    LaunchAgent,
    WindowsRunKey,
    XdgAutostart,
    launch_command,
    sync,
)
from tests.test_ui import desktop  # noqa: F401  (the fixture)

COMMAND = ["/opt/My Apps/python3", "-m", "s2s_desktop"]


def test_linux_autostart_file_is_written_and_removed(tmp_path):
    backend = XdgAutostart(config_home=tmp_path)
    path = tmp_path / "autostart" / "s2s-desktop.desktop"
    assert sync(True, backend, COMMAND).startswith("s2s-desktop will start at login")
    text = path.read_text()
    assert "[Desktop Entry]" in text and "Type=Application" in text
    assert 'Exec="/opt/My Apps/python3" -m s2s_desktop' in text
    assert backend.command() == COMMAND
    assert sync(True, backend, COMMAND) == ""  # already in line: nothing written
    assert "no longer" in sync(False, backend, COMMAND)
    assert not path.exists()
    assert sync(False, backend, COMMAND) == ""


def test_a_stale_registration_is_replaced(tmp_path):
    backend = XdgAutostart(config_home=tmp_path)
    backend.enable(["/old/place/s2s-desktop"])
    sync(True, backend, COMMAND)
    assert backend.command() == COMMAND


def test_macos_launch_agent_plist(tmp_path):
    backend = LaunchAgent(agents_dir=tmp_path)
    sync(True, backend, COMMAND)
    with open(tmp_path / "io.github.s2s-desktop.plist", "rb") as f:
        plist = plistlib.load(f)
    assert plist["Label"] == "io.github.s2s-desktop"
    assert plist["ProgramArguments"] == COMMAND and plist["RunAtLoad"] is True
    assert backend.command() == COMMAND
    sync(False, backend, COMMAND)
    assert not (tmp_path / "io.github.s2s-desktop.plist").exists()


class FakeRegistry:
    def __init__(self):
        self.values: dict[tuple[str, str], str] = {}

    def get(self, key, name):
        return self.values.get((key, name))

    def set(self, key, name, value):
        self.values[(key, name)] = value

    def delete(self, key, name):
        self.values.pop((key, name), None)


def test_windows_run_key(tmp_path):
    registry = FakeRegistry()
    backend = WindowsRunKey(registry)
    exe = [r"C:\Program Files\s2s-desktop\s2s-desktop.exe"]
    sync(True, backend, exe)
    assert registry.values == {(RUN_KEY, "s2s-desktop"): subprocess.list2cmdline(exe)}
    assert registry.values[(RUN_KEY, "s2s-desktop")].startswith('"C:\\Program Files')
    assert backend.command() == exe
    assert sync(True, backend, exe) == ""
    sync(False, backend, exe)
    assert registry.values == {}


def test_the_os_refusing_says_what_to_do(tmp_path):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    backend = XdgAutostart(config_home=blocked)
    with pytest.raises(OSError, match="could not change start at login.*writable"):
        sync(True, backend, COMMAND)


def test_each_platform_gets_its_own_layer():
    assert isinstance(autostart.for_platform("linux"), XdgAutostart)
    assert isinstance(autostart.for_platform("darwin"), LaunchAgent)
    assert isinstance(autostart.for_platform("win32"), WindowsRunKey)
    assert launch_command()[:3] == [sys.executable, "-m", "s2s_desktop"]


def test_the_app_follows_the_setting_at_start_and_when_changed(desktop, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path = Path(tmp_path / "xdg" / "autostart" / "s2s-desktop.desktop")
    app = desktop()
    assert not path.exists()
    on = app.settings.copy()
    on.ui.start_at_login = True
    app.apply_settings(on)
    assert path.exists() and f"Exec={sys.executable} -m s2s_desktop" in path.read_text()
    off = on.copy()
    off.ui.start_at_login = False
    app.apply_settings(off)
    assert not path.exists()
    # a registration left from before, with the setting off: removed at start
    XdgAutostart(config_home=tmp_path / "xdg").enable(["/old/s2s-desktop"])
    app.server.close()  # one app at a time
    desktop()
    assert not path.exists()
