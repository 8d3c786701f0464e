"""`s2s-desktop tools`: the tools a model that calls tools is offered — built-in ones and
those of the MCP servers in mcp.json (started to list them) — with on/off and permission."""

from __future__ import annotations

import json

from ..assistant.timers import TimerBook
from ..config import Settings, config_dir, data_dir
from ..tools.assistant_tools import assistant_toolbox
from ..tools.mcp_config import FILENAME as MCP_FILE
from ..tools.mcp_config import load_mcp_config
from ..tools.mcp_servers import START_TIMEOUT_S, McpServers
from ..tools.model_support import model_tool_support


def add_tools_parser(sub) -> None:
    p = sub.add_parser(
        "tools", help="list the tools the assistant can call (built-in and MCP servers)",
        description="List the tools offered to a model that calls tools: the built-in ones "
        f"and those of the MCP servers in {config_dir() / MCP_FILE} (started to ask them). "
        "Writing tools ask before they run.")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def tools_command(args, settings: Settings) -> int:
    timers = TimerBook()
    box = assistant_toolbox(timers, data_dir)
    box.disabled = set(settings.tools.disabled)
    configs, problems = load_mcp_config(config_dir() / MCP_FILE)
    servers = McpServers(configs, box)
    try:
        servers.start()
        servers.wait_started()
        servers.retry_failed(wait_s=START_TIMEOUT_S)  # once more: a server's slow first start
        rows = [{**t.spec.to_dict(), "enabled": t.spec.name not in box.disabled,
                 "asks_first": box.needs_permission(t)} for t in box.all_tools()]
        status = servers.status()
    finally:
        servers.close()
        timers.close()
    problems += [f"MCP server '{s['server']}': {s['error']}" for s in status if s["error"]]
    model = model_tool_support(settings)
    if args.json:
        print(json.dumps({"enabled": settings.tools.enabled, "tools": rows,
                          "servers": status, "problems": problems,
                          "model": model.model, "model_can_call_tools": model.can_call_tools,
                          "model_advice": model.advice}, ensure_ascii=False))
        return 0
    if not settings.tools.enabled:
        print("tools are switched off (tools.enabled=false): models answer without them")
    if model.can_call_tools:
        print(f"The current model ({model.model}) can call tools.")
    else:
        print(model.advice)
    for row in rows:
        flags = [] if row["enabled"] else ["off"]
        flags += ["asks first"] if row["asks_first"] else []
        extra = f" ({', '.join(flags)})" if flags else ""
        print(f"  {row['name']:<18} [{row['source']}] {row['description']}{extra}")
    for problem in problems:
        print(f"warning: {problem}")
    return 0
