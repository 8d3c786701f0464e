"""Tools that reach the desktop: open a web address or an application (both ask first), and
read the clipboard."""

from __future__ import annotations

import shutil
import subprocess
import sys
import webbrowser
from collections.abc import Callable
from urllib.parse import urlparse

from ..spec import Tool, ToolError, ToolSpec

# clipboard readers tried in order where the app gives none (Qt's, in the app)
CLIPBOARD_COMMANDS = (["pbpaste"], ["wl-paste", "--no-newline"],
                      ["xclip", "-o", "-selection", "clipboard"], ["xsel", "-ob"],
                      ["powershell", "-NoProfile", "-Command", "Get-Clipboard"])
CLIPBOARD_LIMIT = 4000  # characters the model reads: a long clipboard would fill its context


def open_url(url: str) -> str:
    parsed = urlparse(url if "://" in url else f"https://{url}")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ToolError(f"only web addresses (http or https) are opened, not '{url}'")
    if not webbrowser.open(parsed.geturl()):
        raise ToolError("no web browser could be started")
    return f"opened {parsed.geturl()}"


def open_app(name: str) -> str:
    name = name.strip()
    if not name or any(c in name for c in "/\\;&|`$<>"):
        raise ToolError(f"'{name}' is not an application name")
    if sys.platform == "darwin":
        command = ["open", "-a", name]
    elif sys.platform == "win32":
        command = ["cmd", "/c", "start", "", name]
    elif shutil.which("gtk-launch") and not shutil.which(name.lower()):
        command = ["gtk-launch", name.lower()]
    elif shutil.which(name.lower()):
        command = [shutil.which(name.lower()) or name.lower()]
    else:
        raise ToolError(f"no application called '{name}' was found")
    try:
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise ToolError(f"could not start {name}: {exc}") from exc
    return f"started {name}"


def read_clipboard_commands() -> str:
    for command in CLIPBOARD_COMMANDS:
        if shutil.which(command[0]) is None:
            continue
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=3)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0:
            return out.stdout
    raise ToolError("the clipboard cannot be read here (install wl-clipboard or xclip on Linux)")


def desktop_tools(clipboard: Callable[[], str] | None = None) -> list[Tool]:
    read = clipboard or read_clipboard_commands

    def clipboard_text(args, stop) -> str:
        text = read()
        if not text.strip():
            return "the clipboard is empty"
        cut = "" if len(text) <= CLIPBOARD_LIMIT else " (cut short)"
        return text[:CLIPBOARD_LIMIT] + cut

    url_args = {"type": "object", "properties": {"url": {"type": "string"}},
                "required": ["url"]}
    app_args = {"type": "object", "properties": {"name": {"type": "string"}},
                "required": ["name"]}
    return [
        Tool(ToolSpec("open_url", "Open a web address in the browser.", url_args,
                      read_only=False),
             lambda args, stop: open_url(str(args["url"])),
             describe=lambda args: f"open {args.get('url', 'that address')}"),
        Tool(ToolSpec("open_app", "Start an application by its name.", app_args,
                      read_only=False),
             lambda args, stop: open_app(str(args["name"])),
             describe=lambda args: f"start {args.get('name', 'that application')}"),
        Tool(ToolSpec("read_clipboard", "The text on the clipboard.",
                      {"type": "object", "properties": {}}), clipboard_text),
    ]
