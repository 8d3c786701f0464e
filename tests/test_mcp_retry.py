"""An MCP server that failed to start is started again before its tools are listed
(`s2s-desktop tools`, Settings → Tools) and when the next turn lists the tools; one that
still fails shows its error and the rest works. A real FastMCP stdio server that fails its
first start (tests/helpers/mcp_flaky_server.py)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import scripted_engines as scripted

pytest.importorskip("mcp", reason="the mcp SDK is not installed (pip install mcp)")
pytestmark = pytest.mark.required("mcp")
HERE = Path(__file__).parent
GHOST = "no-such-mcp-server-here"


def _flaky(tmp_path):
    from s2s_desktop.tools.mcp_config import McpServerConfig

    flag = tmp_path / "failed-once"
    return flag, McpServerConfig("flaky", command=sys.executable,
                                 args=(str(HERE / "helpers" / "mcp_flaky_server.py"),),
                                 env={"FLAKY_FLAG": str(flag),
                                      "SHELF_FILE": str(tmp_path / "shelf.txt")})


@pytest.fixture
def mcp_json(tmp_path, monkeypatch):
    """mcp.json in a config folder of its own: the flaky server and one that cannot start."""
    flag, _ = _flaky(tmp_path)
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": {
        "flaky": {"command": sys.executable,
                  "args": [str(HERE / "helpers" / "mcp_flaky_server.py")],
                  "env": {"FLAKY_FLAG": str(flag), "SHELF_FILE": str(tmp_path / "s.txt")}},
        "ghost": {"command": GHOST}}}))
    monkeypatch.setenv("S2S_CONFIG_DIR", str(folder))
    return flag


def test_s2s_desktop_tools_starts_a_failed_server_again_and_shows_a_dead_ones_error(
        mcp_json, capsys):
    from s2s_desktop.cli import main

    assert main(["tools", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert mcp_json.exists()  # the first start did fail
    names = {r["name"] for r in listed["tools"]}
    assert {"shelf_count", "shelf_put", "calculate"} <= names
    state = {s["server"]: s for s in listed["servers"]}
    assert state["flaky"]["running"] and state["flaky"]["error"] == ""
    assert not state["ghost"]["running"] and GHOST in state["ghost"]["error"]
    assert any("ghost" in p and GHOST in p for p in listed["problems"])
    assert not any("flaky" in p for p in listed["problems"])


class HelloLLM(scripted.WordByWordLLM):
    name = "hello-tools"

    def can_call_tools(self) -> bool:
        return True

    def stream(self, messages, stop, options):
        yield "Hello."


def test_the_next_turn_starts_a_failed_server_again_and_its_tools_join(mcp_json, monkeypatch):
    from s2s_desktop.engines import registry
    from s2s_desktop.pipeline.runner import HeadlessSession

    scripted.install(monkeypatch)
    monkeypatch.setitem(registry.BACKENDS["llm"], "hello-tools", f"{__name__}:HelloLLM")
    settings = scripted.settings()
    settings.llm.backend = "hello-tools"
    session = HeadlessSession(settings)
    try:
        mcp = session.pipeline.mcp
        mcp.wait_started()
        assert "flaky" in mcp.problems() and mcp_json.exists()
        assert "shelf_count" not in {t.spec.name for t in session.pipeline.tools.all_tools()}
        assert session.ask("Hi there.")["reply"] == "Hello."  # not held up by the retry
        mcp.wait_started()
        assert "flaky" not in mcp.problems() and GHOST in mcp.problems()["ghost"]
        assert session.pipeline.tools.get("shelf_count").run({}, threading.Event()) == (
            "There are 42 books on the shelf.")
    finally:
        session.close()


def test_settings_tools_tab_starts_a_failed_server_again_and_shows_the_dead_ones_error(
        tmp_path, qtbot):
    from s2s_desktop import config
    from s2s_desktop.assistant.timers import TimerBook
    from s2s_desktop.tools.assistant_tools import assistant_toolbox
    from s2s_desktop.tools.mcp_config import McpServerConfig
    from s2s_desktop.tools.mcp_servers import McpServers
    from s2s_desktop.ui.form_fields import Fields
    from s2s_desktop.ui.tools_settings import NAME_ROLE, ToolsTab

    timers = TimerBook()
    box = assistant_toolbox(timers, lambda: tmp_path)
    flag, flaky = _flaky(tmp_path)
    servers = McpServers([flaky, McpServerConfig("ghost", command=GHOST)], box)
    servers.start()
    try:
        servers.wait_started()
        assert flag.exists() and "flaky" in servers.problems()
        tab = ToolsTab(Fields(), box, servers=servers)
        qtbot.addWidget(tab)
        tab.load(config.Settings())

        def names():
            return {tab.list.item(i).data(NAME_ROLE) for i in range(tab.list.count())}

        qtbot.waitUntil(lambda: "shelf_count" in names(), timeout=30000)
        assert "calculate" in names()
        state = tab.server_state.text()
        assert "MCP server 'flaky': running" in state
        assert "MCP server 'ghost': not running" in state and GHOST in state
    finally:
        servers.close()
        timers.close()
