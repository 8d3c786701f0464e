"""Start at login, for real: the `ui.start_at_login` setting registers the app with the OS
and removes it when turned off — an XDG autostart .desktop file on Linux, a LaunchAgent plist
on macOS, the per-user Run key on Windows. `sync` brings the OS in line with the setting (the
app calls it at start and when the setting changes). Paths and the registry are injectable,
so each platform's layer is tested anywhere."""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
from pathlib import Path
from typing import Protocol

from ..config import atomic_write_text

APP_ID = "s2s-desktop"
LAUNCH_AGENT_LABEL = "io.github.s2s-desktop"
RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"


def launch_command() -> list[str]:
    """How the OS should start this app: the bundle's executable, or this Python with -m."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "s2s_desktop"]


class Autostart(Protocol):
    def command(self) -> list[str] | None:
        """The registered command line, or None when the app does not start at login."""

    def enable(self, command: list[str]) -> None: ...
    def disable(self) -> None: ...
    def where(self) -> str:
        """Where the registration lives, for messages."""


# ---------------------------------------------------------------- Linux (XDG)


def _desktop_quote(arg: str) -> str:
    """Quote one argument of a desktop entry's Exec key (freedesktop.org spec)."""
    if arg and not any(c in arg for c in ' \t\n"\'\\><~|&;$*?#()`='):
        return arg
    escaped = "".join("\\" + c if c in '"`$\\' else c for c in arg)
    return f'"{escaped}"'


def _desktop_unquote(exec_line: str) -> list[str]:
    import shlex

    return shlex.split(exec_line)


class XdgAutostart:
    def __init__(self, config_home: Path | None = None):
        base = config_home or Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        self.path = base / "autostart" / f"{APP_ID}.desktop"

    def where(self) -> str:
        return str(self.path)

    def command(self) -> list[str] | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("Exec="):
                return _desktop_unquote(line[len("Exec="):])
        return None

    def enable(self, command: list[str]) -> None:
        atomic_write_text(self.path, "\n".join([
            "[Desktop Entry]",
            "Type=Application",
            "Name=s2s-desktop",
            "Comment=Private push-to-talk voice assistant",
            "Exec=" + " ".join(_desktop_quote(a) for a in command),
            "Terminal=false",
            "X-GNOME-Autostart-enabled=true",
            "",
        ]))

    def disable(self) -> None:
        self.path.unlink(missing_ok=True)


# ---------------------------------------------------------------- macOS (launchd)


class LaunchAgent:
    def __init__(self, agents_dir: Path | None = None):
        folder = agents_dir or Path.home() / "Library" / "LaunchAgents"
        self.path = folder / f"{LAUNCH_AGENT_LABEL}.plist"

    def where(self) -> str:
        return str(self.path)

    def command(self) -> list[str] | None:
        try:
            with open(self.path, "rb") as f:
                data = plistlib.load(f)
        except (OSError, plistlib.InvalidFileException, ValueError):
            return None
        args = data.get("ProgramArguments")
        return list(args) if isinstance(args, list) else None

    def enable(self, command: list[str]) -> None:
        plist = {
            "Label": LAUNCH_AGENT_LABEL,
            "ProgramArguments": list(command),
            "RunAtLoad": True,  # at login; launchd reads the folder then
            "ProcessType": "Interactive",
            "LimitLoadToSessionType": "Aqua",  # the user's GUI session, not ssh
        }
        atomic_write_text(self.path, plistlib.dumps(plist).decode("utf-8"))

    def disable(self) -> None:
        self.path.unlink(missing_ok=True)


# ---------------------------------------------------------------- Windows (registry)


class Registry(Protocol):
    """The few calls on HKEY_CURRENT_USER the Run key needs (winreg, or a test's dict)."""

    def get(self, key: str, name: str) -> str | None: ...
    def set(self, key: str, name: str, value: str) -> None: ...
    def delete(self, key: str, name: str) -> None: ...


class WinRegistry:
    def get(self, key: str, name: str) -> str | None:
        import winreg

        try:
            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, key) as k:
                return str(winreg.QueryValueEx(k, name)[0])
        except FileNotFoundError:
            return None

    def set(self, key: str, name: str, value: str) -> None:
        import winreg

        with winreg.CreateKey(winreg.HKEY_CURRENT_USER, key) as k:
            winreg.SetValueEx(k, name, 0, winreg.REG_SZ, value)

    def delete(self, key: str, name: str) -> None:
        import winreg

        try:
            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, key, 0, winreg.KEY_SET_VALUE) as k:
                winreg.DeleteValue(k, name)
        except FileNotFoundError:
            pass


class WindowsRunKey:
    def __init__(self, registry: Registry | None = None):
        self.registry = registry or WinRegistry()

    def where(self) -> str:
        return f"HKEY_CURRENT_USER\\{RUN_KEY}\\{APP_ID}"

    def command(self) -> list[str] | None:
        value = self.registry.get(RUN_KEY, APP_ID)
        if value is None:
            return None
        return _windows_split(value)

    def enable(self, command: list[str]) -> None:
        self.registry.set(RUN_KEY, APP_ID, subprocess.list2cmdline(command))

    def disable(self) -> None:
        self.registry.delete(RUN_KEY, APP_ID)


def _windows_split(line: str) -> list[str]:
    """The inverse of subprocess.list2cmdline for the lines we write."""
    import shlex

    return shlex.split(line.replace("\\", "\\\\"), posix=True)


# ---------------------------------------------------------------- the one entry point


def for_platform(platform: str = sys.platform) -> Autostart:
    if platform == "darwin":
        return LaunchAgent()
    if platform.startswith("win"):
        return WindowsRunKey()
    return XdgAutostart()


def sync(start_at_login: bool, backend: Autostart | None = None,
         command: list[str] | None = None) -> str:
    """Make the OS match the setting. Returns what changed ('' when nothing did); raises
    OSError with what to do when the OS refused."""
    backend = backend or for_platform()
    wanted = command or launch_command()
    registered = backend.command()
    try:
        if start_at_login and registered != wanted:
            backend.enable(wanted)
            return f"s2s-desktop will start at login ({backend.where()})"
        if not start_at_login and registered is not None:
            backend.disable()
            return f"s2s-desktop will no longer start at login (removed {backend.where()})"
    except OSError as exc:
        raise OSError(
            f"could not change start at login ({backend.where()}: {exc}); check that the "
            "folder is writable, or turn the setting off"
        ) from exc
    return ""
