"""Settings → Tools: tools on or off for models that call them, each tool on or off (the
built-in ones and the running MCP servers'), and whether writing tools ask first."""

from __future__ import annotations

from PySide6.QtCore import Qt
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


def _builtin_box() -> ToolBox:
    return assistant_toolbox(TimerBook(), config.data_dir)


class ToolsTab(QWidget):
    """`box`: the running pipeline's tools (MCP servers' included); without it, the
    built-in ones."""

    def __init__(self, fields: Fields, box: ToolBox | None = None, parent=None):
        super().__init__(parent)
        self.box = box or _builtin_box()
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
        mcp = QLabel(f"MCP servers come from {config.config_dir() / MCP_FILE} "
                     '({"mcpServers": {"name": {"command": …, "args": […]}}}); restart the '
                     "app after editing it.")
        mcp.setWordWrap(True)
        mcp.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(mcp)

    def load(self, settings: config.Settings) -> None:
        self.list.clear()
        off = set(settings.tools.disabled)
        for tool in sorted(self.box.all_tools(), key=lambda t: (t.spec.source, t.spec.name)):
            asks = " (asks first)" if self.box.needs_permission(tool) else ""
            item = QListWidgetItem(f"{tool.spec.name} [{tool.spec.source}]: "
                                   f"{tool.spec.description}{asks}")
            item.setData(NAME_ROLE, tool.spec.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked if tool.spec.name in off
                               else Qt.CheckState.Checked)
            self.list.addItem(item)

    def store(self, settings: config.Settings) -> None:
        """The unticked tools into tools.disabled (names not listed now stay as they were)."""
        shown = {self.list.item(i).data(NAME_ROLE): self.list.item(i).checkState()
                 for i in range(self.list.count())}
        kept = [n for n in settings.tools.disabled if n not in shown]
        settings.tools.disabled = kept + [n for n, state in shown.items()
                                          if state == Qt.CheckState.Unchecked]
