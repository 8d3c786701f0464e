"""One app per user, and the commands a running app takes from the command line.

A QLocalServer (a Unix socket only the user can open, or a named pipe on Windows) speaks
JSON lines: the client sends {"command": NAME, ...}, the app answers {"ok": true|false, ...}.
`s2s-desktop toggle|talk-start|talk-stop|quit|status|set|get|ask|stop|hands-free` use it, and a second
launch of the app asks the first to show itself ("launch") instead of starting another.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QObject
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from .config import config_dir
from .pipeline.turns import FinishedTurn
from .states import STAGES, TurnReason

log = logging.getLogger(__name__)

MAX_LINE = 1 << 16  # a command is small; anything longer is refused
TIMEOUT_MS = 5000


def server_name() -> str:
    """Per user and per settings folder (an isolated test instance never meets the real one)."""
    key = hashlib.sha1(str(config_dir().resolve()).encode("utf-8")).hexdigest()[:10]
    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    base = f"s2s-desktop-{user}-{key}"
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.name == "posix" and runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        path = os.path.join(runtime, base + ".sock")
        if len(path) < 100:  # Unix socket paths are short
            return path
    return base  # Qt puts it in the per-user temp dir (Unix) or the pipe namespace (Windows)


class CommandServer(QObject):
    """Answers commands with handlers: name -> callable(request dict) -> reply dict."""

    def __init__(
        self, handlers: dict[str, Callable[[dict], dict]], name: str | None = None, parent=None
    ):
        super().__init__(parent)
        self.handlers = handlers
        self.name = name or server_name()
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._accept)

    def listen(self) -> bool:
        """Start answering. False when another instance already listens on this name."""
        # Qt may bind beside the name and rename over it, so a live server must be asked for
        # first: listen() alone would quietly take the name from a running instance.
        if is_listening(self.name):
            return False
        QLocalServer.removeServer(self.name)  # a socket left behind by a crashed app
        if not self.server.listen(self.name):
            raise OSError(f"cannot listen on {self.name}: {self.server.errorString()}")
        return True

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            buf = bytearray()
            sock.readyRead.connect(lambda s=sock, b=buf: self._read(s, b))
            sock.disconnected.connect(sock.deleteLater)

    def _read(self, sock: QLocalSocket, buf: bytearray) -> None:
        buf += bytes(sock.readAll())
        if b"\n" not in buf:
            if len(buf) > MAX_LINE:
                self._reply(sock, {"ok": False, "error": "request too long"})
            return
        line = bytes(buf).split(b"\n", 1)[0]
        buf.clear()
        self._reply(sock, self.dispatch(line))

    def dispatch(self, line: bytes) -> dict:
        try:
            req = json.loads(line.decode("utf-8"))
            if not isinstance(req, dict) or not isinstance(req.get("command"), str):
                raise ValueError('expected {"command": NAME}')
        except (ValueError, UnicodeDecodeError) as exc:
            return {"ok": False, "error": f"bad request: {exc}"}
        name = req["command"]
        if name == "ping":
            return {"ok": True, "pid": os.getpid()}
        handler = self.handlers.get(name)
        if handler is None:
            return {"ok": False, "error": f"unknown command '{name}'"}
        try:
            reply = handler(req)
        except Exception as exc:  # a command must never take the app down
            log.exception("command %s failed", name)
            return {"ok": False, "error": f"{name} failed: {type(exc).__name__}: {exc}"}
        return {"ok": True, **reply} if "ok" not in reply else reply

    def _reply(self, sock: QLocalSocket, reply: dict) -> None:
        sock.write((json.dumps(reply, ensure_ascii=False) + "\n").encode("utf-8"))
        sock.flush()
        sock.disconnectFromServer()


def _ensure_qt_core() -> None:
    global _CORE_APP
    if QCoreApplication.instance() is None:  # Qt sockets want an application object
        _CORE_APP = QCoreApplication([])


_CORE_APP = None


def is_listening(name: str | None = None) -> bool:
    """Whether an app answers on the socket (a stale socket file refuses connections)."""
    _ensure_qt_core()
    sock = QLocalSocket()
    sock.connectToServer(name or server_name())
    alive = sock.waitForConnected(1000)
    sock.abort()
    return alive


def request(
    command: str, payload: dict | None = None, name: str | None = None, timeout_ms: int = TIMEOUT_MS
) -> dict | None:
    """Send one command to the running app; its reply, or None when no app is running."""
    _ensure_qt_core()
    sock = QLocalSocket()
    sock.connectToServer(name or server_name())
    if not sock.waitForConnected(min(timeout_ms, 2000)):
        return None
    sock.write((json.dumps({"command": command, **(payload or {})}) + "\n").encode("utf-8"))
    sock.flush()
    data = b""
    deadline = time.monotonic() + timeout_ms / 1000
    while b"\n" not in data:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            sock.abort()
            raise TimeoutError(
                f"s2s-desktop did not answer '{command}' in {timeout_ms / 1000:.0f} s"
            )
        if not sock.waitForReadyRead(left_ms):
            if (
                sock.state() != QLocalSocket.LocalSocketState.ConnectedState
                and not sock.bytesAvailable()
            ):
                break
        data += bytes(sock.readAll())
    sock.abort()
    if b"\n" not in data:
        raise ConnectionError(f"s2s-desktop closed the connection without answering '{command}'")
    return json.loads(data.split(b"\n", 1)[0].decode("utf-8"))


def format_status(status: dict) -> str:
    lines = [
        f"state:      {status.get('state', '?')}"
        + (f" ({status['detail']})" if status.get("detail") else "")
    ]
    models = status.get("models") or {}
    for stage in STAGES:
        if stage in models:
            stage_state = (status.get("stages") or {}).get(stage, "")
            lines.append(f"{stage + ':':<12}{models[stage] or stage_state or 'not loaded'}")
    hk = status.get("hotkey") or {}
    if hk:
        where = "" if hk.get("available") else f" — unavailable: {hk.get('problem') or '?'}"
        paused = " (paused)" if hk.get("paused") else ""
        lines.append(f"hotkey:     {hk.get('combo', '?')} ({hk.get('mode', '?')}){paused}{where}")
    if "hands_free" in status:
        lines.append(f"hands-free: {'on' if status['hands_free'] else 'off'}")
    if status.get("last_error"):
        lines.append(f"last error: {status['last_error']}")
    return "\n".join(lines)


NOT_RUNNING = "s2s-desktop is not running: start it with `s2s-desktop` first"


def accepted(command: str, payload: dict | None = None, name: str | None = None) -> dict | None:
    """The app's reply to a command it accepted; None (said on stderr) when it is not running
    or refused it. Timeouts and broken connections raise."""
    reply = request(command, payload, name=name)
    if reply is None:
        print(NOT_RUNNING, file=sys.stderr)
        return None
    if not reply.get("ok"):
        print(f"error: {reply.get('error', 'the app refused the command')}", file=sys.stderr)
        return None
    return reply


def send_command(name: str, json_output: bool = False, payload: dict | None = None) -> int:
    """The CLI's side of toggle / talk-start / talk-stop / quit / status / hands-free; the
    exit code."""
    try:
        reply = accepted(name, payload)
    except (TimeoutError, ConnectionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if reply is None:
        return 1
    if name == "status":
        status = reply.get("status", {})
        print(json.dumps(status, ensure_ascii=False) if json_output else format_status(status))
    elif json_output:
        print(json.dumps(reply, ensure_ascii=False))
    elif reply.get("message"):
        print(reply["message"])
    return 0


def show_value(value) -> str:
    """A setting as a script reads it: text as it is, anything else as JSON (true, 1.5)."""
    return value if isinstance(value, str) else json.dumps(value)


def format_set(reply: dict) -> str:
    """What `s2s-desktop set` changed, and which models reload for it."""
    lines = []
    for key, (old, new) in reply.get("changed", {}).items():
        lines.append(f"{key}: {show_value(old)} → {show_value(new)}" if old != new
                     else f"{key}: {show_value(new)} (unchanged)")
    reloading = reply.get("reloading") or []
    lines.append(f"reloading: {', '.join(reloading)}" if reloading
                 else "no model reloads: this applies from the next question")
    lines += [f"note: {note}" for note in reply.get("notes") or []]
    return "\n".join(lines)


def send_settings(changes: dict | None, key: str | None = None, json_output: bool = False,
                  name: str | None = None) -> int:
    """`s2s-desktop set KEY=VALUE…` (changes given) or `s2s-desktop get [KEY]`; the exit code."""
    try:
        if changes is not None:
            reply = accepted("set", {"changes": changes}, name=name)
        else:
            reply = accepted("get", {"key": key or ""}, name=name)
    except (TimeoutError, ConnectionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if reply is None:
        return 1
    reply.pop("ok", None)
    values = reply.get("values")
    if json_output:
        print(json.dumps(values if values is not None else reply, ensure_ascii=False))
    elif values is None:
        print(format_set(reply))
    elif key in values:  # one key: its value alone, for a script
        print(show_value(values[key]))
    else:
        print("\n".join(f"{k} = {show_value(v)}" for k, v in values.items()))
    return 0


ANSWER_WAIT_S = 300.0  # a typed question on a slow machine: loading plus a long reply


def send_question(text: str, json_output: bool = False, wait: bool = True,
                  name: str | None = None, poll_s: float = 0.2) -> int:
    """`s2s-desktop ask TEXT`: the running app answers aloud; prints the reply (or the turn's
    JSON record) once it is done, unless `wait` is off. The exit code."""
    if not text.strip():
        print('error: the question is empty: s2s-desktop ask "What time is it?"', file=sys.stderr)
        return 2
    try:
        reply = accepted("ask", {"text": text}, name=name)
        if reply is None:
            return 1
        turn = reply["turn"]
        record = None
        deadline = time.monotonic() + ANSWER_WAIT_S
        while wait and record is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer within {ANSWER_WAIT_S:.0f} s (turn {turn})")
            time.sleep(poll_s)
            answer = request("turn", {"turn": turn}, name=name)
            if answer is None:
                raise ConnectionError("s2s-desktop quit before answering")
            record = answer.get("record")
    except (TimeoutError, ConnectionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if record is None:
        print(json.dumps({"turn": turn}) if json_output else f"asked (turn {turn})")
        return 0
    finished = FinishedTurn.from_dict(record)
    if json_output:
        print(json.dumps(record, ensure_ascii=False))
    elif finished.reason == TurnReason.ERROR:
        print(f"error: {finished.error or 'the turn failed'}", file=sys.stderr)
    else:
        print(finished.kept_reply())  # an interrupted reply as far as it was spoken
    return 1 if finished.reason == TurnReason.ERROR else 0
