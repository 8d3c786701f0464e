"""Settings tab for OpenAI-compatible servers (Ollama, LM Studio, llama.cpp, vLLM, speaches):
base URLs, the API key (kept in the OS keychain) and a connection test that lists the models
off the GUI thread (a server that does not answer takes its 10 s timeout, the dialog stays
usable)."""

from __future__ import annotations

import re

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from .. import keychain
from ..engines.openai_http import list_models, parse_base_url, plain_http_warning
from ..errors import S2SError
from .form_fields import Fields
from .tasks import BackgroundTask, start_detached

FIELD_NAMES = {"llm.base_url": "the LLM server field", "stt.base_url": "the speech-to-text server field"}


def gui_words(message: str) -> str:
    """A message written for the command line ("--set KEY=VALUE") as the dialog's words."""
    for key, field in FIELD_NAMES.items():
        message = re.sub(rf"e\.g\. --set {re.escape(key)}=(\S+)", rf"in {field}, e.g. \1", message)
        message = message.replace(key, field.removeprefix("the ").removesuffix(" field"))
    return message


class ServerTab(QWidget):
    tested = Signal(list)  # the model ids a connection test found ([]: the status says why)

    def __init__(self, fields: Fields, parent=None):
        super().__init__(parent)
        self.fields = fields
        form = QFormLayout()
        self.llm_url = fields.bind("llm.base_url", QLineEdit())
        self.llm_url.setPlaceholderText("http://127.0.0.1:11434/v1")
        form.addRow("LLM server:", self.llm_url)
        self.stt_url = fields.bind("stt.base_url", QLineEdit())
        self.stt_url.setPlaceholderText("http://127.0.0.1:8000/v1 (speech-to-text, optional)")
        form.addRow("Speech-to-text server:", self.stt_url)
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("optional; kept in the OS keychain, not the settings file")
        form.addRow("API key:", self.api_key)
        self.test_button = QPushButton("Test connection")
        self.test_button.clicked.connect(self.test_connection)
        self.use_button = QPushButton("Use this model for the LLM")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self.use_selected)
        buttons = QHBoxLayout()
        buttons.addWidget(self.test_button)
        buttons.addWidget(self.use_button)
        buttons.addStretch(1)
        self.models = QListWidget()
        self.models.itemDoubleClicked.connect(lambda _item: self.use_selected())
        self.status = QLabel("Set the backend to “openai” (Models tab) to use a server.")
        self.status.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.models, 1)
        layout.addWidget(self.status)
        self.key_changed = False
        self.api_key.textEdited.connect(lambda _t: setattr(self, "key_changed", True))

    def load(self, settings) -> None:
        self.api_key.setText(settings.llm.api_key or keychain.load_api_key(settings.llm.base_url))
        self.key_changed = False

    def test_connection(self) -> None:
        """List the server's models in the background; `tested` says what was found."""
        self.models.clear()
        self.use_button.setEnabled(False)
        url, key = self.llm_url.text().strip(), self.api_key.text().strip()
        try:
            warning = plain_http_warning(parse_base_url(url, "llm.base_url"), "the LLM server")
        except S2SError as exc:
            self._failed("error", str(exc))
            return
        self._testing = (url, warning)
        self.status.setText(f"Connecting to {url}…")
        self.test_button.setEnabled(False)
        task = BackgroundTask("connection test", url, lambda _progress, _cancel: list_models(url, key))
        task.succeeded.connect(self._listed)
        task.failed.connect(self._failed)
        start_detached(task)

    def _listed(self, ids: list[str]) -> None:
        url, warning = self._testing
        self.test_button.setEnabled(True)
        self.models.addItems(ids)
        text = f"Connected: {len(ids)} model{'s' if len(ids) != 1 else ''} on {url}."
        self.status.setText(text + (f"\nWarning: {warning}" if warning else ""))
        self.use_button.setEnabled(bool(ids))
        self.tested.emit(list(ids))

    def _failed(self, _kind: str, message: str) -> None:
        self.test_button.setEnabled(True)
        self.status.setText(f"Connection failed: {gui_words(message)}")
        self.tested.emit([])

    def use_selected(self) -> None:
        item = self.models.currentItem() or self.models.item(0)
        if item is None:
            return
        self.fields.set("llm.backend", "openai")
        self.fields.set("llm.model", item.text())
        self.fields.set("llm.model_file", "")
        self.status.setText(f"The LLM will be {item.text()} on {self.llm_url.text().strip()}.")

    def store_key(self, settings) -> None:
        """Keep a changed key in the keychain (S2SError when there is none) and in memory."""
        key = self.api_key.text().strip()
        if self.key_changed:
            keychain.store_api_key(settings.llm.base_url, key)
            self.key_changed = False
        settings.llm.api_key = key
