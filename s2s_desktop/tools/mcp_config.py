"""`mcp.json` in the config folder, in the format other MCP clients use:
{"mcpServers": {"name": {"command": "…", "args": […], "env": {…}} | {"url": "…"}}}, with
"disabled": true and "autoApprove": ["tool", …] per server."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

FILENAME = "mcp.json"


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str = ""  # a stdio server: the program and its args
    args: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    url: str = ""  # a Streamable HTTP server
    headers: dict = field(default_factory=dict)
    disabled: bool = False
    auto_approve: frozenset[str] = frozenset()

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"


def parse_mcp_config(text: str, where: str = FILENAME) -> tuple[list[McpServerConfig], list[str]]:
    """The servers in an mcp.json text, and a message for each entry that cannot be used
    (the others still work)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return [], [f"{where} is not valid JSON ({exc}): fix it, the MCP servers are off"]
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return [], [f'{where} needs an "mcpServers" object: {{"mcpServers": {{"name": '
                    '{"command": "…"}}}}']
    out, problems = [], []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            problems.append(f"{where}: server '{name}' must be an object")
            continue
        command, url = entry.get("command"), entry.get("url")
        if not (isinstance(command, str) and command) and not (isinstance(url, str) and url):
            problems.append(f'{where}: server \'{name}\' needs "command" (a program) or "url"')
            continue
        args = entry.get("args") or []
        env = entry.get("env") or {}
        if not isinstance(args, list) or not isinstance(env, dict):
            problems.append(f'{where}: server \'{name}\': "args" must be a list and "env" an '
                            "object")
            continue
        approve = entry.get("autoApprove") or []
        out.append(McpServerConfig(
            name=str(name), command=command or "", args=tuple(str(a) for a in args),
            env={str(k): str(v) for k, v in env.items()}, url=url or "",
            headers={str(k): str(v) for k, v in (entry.get("headers") or {}).items()},
            disabled=bool(entry.get("disabled", False)),
            auto_approve=frozenset(str(t) for t in approve if isinstance(t, str))))
    return out, problems


def load_mcp_config(path: Path) -> tuple[list[McpServerConfig], list[str]]:
    """The servers in `path` ([] with no message when there is no file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"cannot read {path}: {exc}"]
    return parse_mcp_config(text, str(path))
