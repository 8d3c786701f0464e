"""The offer that comes with "No French voice is installed": a "Download <voice>…" action in the
tray's menu, the floating window and the conversation window (a click on the tray's message
does the same). It opens the model manager with that voice selected and ready to download;
once it is downloaded the offer goes and the next reply in that language is spoken."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction

from .. import languages
from ..controller import IDLE, SPEAKING, THINKING

log = logging.getLogger(__name__)


class VoiceOffer(QObject):
    """Attached to a DesktopApp (needs: pipeline, tray, floating, window, show_notice,
    open_models)."""

    def __init__(self, app):
        super().__init__(app)
        self.app = app
        self.voice_id = ""
        self.language = ""
        self.action = QAction("Download a voice…", self)
        self.action.setVisible(False)
        self.action.triggered.connect(self.open)
        self._watched: set[int] = set()  # model manager windows whose downloads we follow
        if app.tray is not None:
            app.actions.insert_after_talk(app.tray.menu, [self.action])
        if app.floating is not None:
            app.floating.add_offer(self.action)
        app.window.add_offer(self.action)
        self._pending = ""  # the notice, said again once the turn is over (see _state)
        app.pipeline.events.voice_missing.connect(self.voice_missing)
        app.controller.state_changed.connect(self._state)

    def voice_missing(self, text: str, language: str, voice_id: str, label: str) -> None:
        """The TTS stage found no voice for a reply's language: say so, and offer one."""
        self.app.show_notice(text)
        self._pending = text
        if not voice_id:
            return  # the catalog has no voice for it: nothing to offer
        self.voice_id, self.language = voice_id, languages.name(language)
        self.action.setText(label)
        self.action.setToolTip(f"Opens Models… with a {self.language} voice selected, ready "
                               "to download")
        self.action.setVisible(True)
        if self.app.tray is not None:
            self.app.tray.clicked_action = self.action  # the message just shown offers it

    def _state(self, state: str, _detail: str) -> None:
        """The windows' status line shows "Ready" when the turn ends: the notice it replaced
        comes back there (the tray's message is still up)."""
        if state == IDLE and self._pending:
            for view in (self.app.floating, self.app.window):
                if view is not None:
                    view.show_notice(self._pending)
        if state != THINKING and state != SPEAKING:
            self._pending = ""

    def open(self):
        """The model manager, the offered voice selected, its Download button ready."""
        if not self.voice_id:
            return None
        window = self.app.open_models(
            offer=[self.voice_id],
            intro=f"No {self.language} voice is installed: {self.language} replies are shown, "
                  "not spoken. To hear them, download",
            after="Press Download to fetch it; it speaks the next reply in that language.")
        if window is None:
            return None
        if id(window) not in self._watched:
            self._watched.add(id(window))
            window.downloaded.connect(self._downloaded)
        info = window.info(self.voice_id)
        if info is not None and info.installed:  # downloaded some other way meanwhile
            self.app.pipeline.tts.voices.catalog_changed()
            self._downloaded(self.voice_id)
        return window

    def _downloaded(self, model_id: str) -> None:
        if model_id == self.voice_id:
            log.info("the offered voice %s is installed", model_id)
            self.voice_id = ""
            self.action.setVisible(False)
