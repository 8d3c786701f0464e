"""Settings → Tools: tools on or off for models that call them, each tool on or off (the
built-in ones and the running MCP servers'), whether writing tools ask first, and each MCP
server's state: one that failed is started again when the tab is shown, its error shown if
it fails again."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from .. import config
from ..assistant.timers import TimerBook
from ..tools.assistant_tools import assistant_toolbox
from ..tools.mcp_config import FILENAME as MCP_FILE
from ..tools.toolbox import ToolBox
from .form_fields import Fields

NAME_ROLE = Qt.ItemDataRole.UserRole
POLL_MS = 250  # while a server starts again: its tools join the list when it is up


def _builtin_box() -> ToolBox:
    return assistant_toolbox(TimerBook(), config.data_dir)


class ToolsTab(QWidget):
    """`box`: the running pipeline's tools (MCP servers' included); without it, the
    built-in ones. `servers`: the pipeline's McpServers (their state, started again)."""

    def __init__(self, fields: Fields, box: ToolBox | None = None, parent=None, servers=None):
        super().__init__(parent)
        self.box = box or _builtin_box()
        self.servers = servers
        self._settings: config.Settings | None = None
        self._poll = QTimer(self)
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self._check_servers)
        layout = QVBoxLayout(self)
        enabled = QCheckBox("Let models that can call tools use them (calculator, notes, MCP "
                            "servers…)")
        enabled.setToolTip("Models whose chat template takes tools (Qwen2.5, Llama 3.1, …); "
                           "others answer as plain chat")
        layout.addWidget(fields.bind("tools.enabled", enabled))
        unasked = QCheckBox("Run tools that change something without asking first")
        unasked.setToolTip("Off: before saving a note, opening an app or a writing MCP tool "
                           "the assistant asks, and you allow or deny it")
        layout.addWidget(fields.bind("tools.allow_writing", unasked))
        cue_row = QHBoxLayout()
        cue_row.addWidget(QLabel("While it looks something up:"))
        self.cue = QComboBox()
        self.cue.addItem('say "Let me check."', "phrase")
        self.cue.addItem("play a short sound", "earcon")
        self.cue.setToolTip("Given as soon as the model starts a tool call, so a tool turn "
                            "does not wait in silence (the sound needs earcons on in Audio)")
        cue_row.addWidget(fields.bind("tools.checking_cue", self.cue), 1)
        layout.addLayout(cue_row)
        layout.addWidget(QLabel("Tools (untick to switch one off):"))
        self.list = QListWidget()
        layout.addWidget(self.list, 1)
        self.server_state = QLabel("")
        self.server_state.setWordWrap(True)
        self.server_state.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.server_state)
        mcp = QLabel(f"MCP servers come from {config.config_dir() / MCP_FILE} "
                     '({"mcpServers": {"name": {"command": …, "args": […]}}}); restart the '
                     "app after editing it.")
        mcp.setWordWrap(True)
        mcp.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(mcp)

    def load(self, settings: config.Settings) -> None:
        self._settings = settings
        if self.servers is not None and self.servers.retry_failed():
            self._poll.start()  # in the background: the tab shows at once
        self._fill(settings, {})

    def _check_servers(self) -> None:
        if self.servers is None or not self.servers.starting():
            self._poll.stop()
            if self._settings is not None:  # what the user ticked meanwhile stays
                self._fill(self._settings, {self.list.item(i).data(NAME_ROLE):
                                            self.list.item(i).checkState()
                                            for i in range(self.list.count())})

    def _fill(self, settings: config.Settings, ticked: dict) -> None:
        self._show_servers()
        self.list.clear()
        off = set(settings.tools.disabled)
        for tool in sorted(self.box.all_tools(), key=lambda t: (t.spec.source, t.spec.name)):
            asks = " (asks first)" if self.box.needs_permission(tool) else ""
            item = QListWidgetItem(f"{tool.spec.name} [{tool.spec.source}]: "
                                   f"{tool.spec.description}{asks}")
            item.setData(NAME_ROLE, tool.spec.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            if tool.spec.name in ticked:
                item.setCheckState(ticked[tool.spec.name])
            else:
                item.setCheckState(Qt.CheckState.Unchecked if tool.spec.name in off
                                   else Qt.CheckState.Checked)
            self.list.addItem(item)

    def _show_servers(self) -> None:
        lines = []
        for s in self.servers.status() if self.servers is not None else []:
            if s["running"]:
                state = f"running, {len(s['tools'])} tools"
            elif s["starting"] or not s["error"]:
                state = "starting…"
            else:
                state = f"not running: {s['error']}"
            lines.append(f"MCP server '{s['server']}': {state}")
        self.server_state.setText("\n".join(lines))

    def store(self, settings: config.Settings) -> None:
        """The unticked tools into tools.disabled (names not listed now stay as they were)."""
        shown = {self.list.item(i).data(NAME_ROLE): self.list.item(i).checkState()
                 for i in range(self.list.count())}
        kept = [n for n in settings.tools.disabled if n not in shown]
        settings.tools.disabled = kept + [n for n, state in shown.items()
                                          if state == Qt.CheckState.Unchecked]
