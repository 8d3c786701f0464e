"""The dictation key in the running app (`hotkey.dictation_combo`, held or toggled like the
talk key): the microphone records while it is held, the speech-to-text model transcribes it
(optionally cleaned up by the LLM), and the text is typed into the focused application —
never answered, never added to the conversation."""

from __future__ import annotations

import copy
import logging
import threading

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication

from .assistant.dictation import Delivery, KeyboardSender, cleanup_messages, keys_refused
from .assistant.earcons import Earcon
from .controller import LISTENING
from .engines.base import LLMOptions, STTOptions
from .errors import AudioDeviceError
from .hotkey.client import HotkeyClient

log = logging.getLogger(__name__)

RESTORE_CLIPBOARD_MS = 500  # the target app reads the clipboard on the paste keystroke


class DictationKey(QObject):
    transcribed = Signal(str)  # from the worker thread
    failed = Signal(str)
    delivered = Signal(str, str)  # text, Delivery

    def __init__(self, app, sender_factory=KeyboardSender, earcons=None):
        super().__init__(app)
        self.app = app
        self.sender_factory = sender_factory
        self.earcons = earcons
        self.recording = False
        self.client = HotkeyClient(self._hotkey_settings(app.settings), self)
        self.client.pressed.connect(self.press)
        self.client.released.connect(self._key_released)
        self.client.unavailable.connect(lambda why: app.show_notice(f"Dictation key: {why}"))
        queued = Qt.ConnectionType.QueuedConnection
        self.transcribed.connect(self.deliver, queued)
        self.failed.connect(lambda why: app.show_notice(why, error=True), queued)

    @staticmethod
    def _hotkey_settings(settings):
        hotkey = copy.copy(settings.hotkey)
        hotkey.combo = settings.hotkey.dictation_combo
        hotkey.enabled = bool(settings.hotkey.dictation_combo) and settings.hotkey.enabled
        return hotkey

    def start(self) -> None:
        if self.app.settings.hotkey.dictation_combo:
            self.client.start()

    def apply_settings(self, old, new) -> None:
        keys = ("dictation_combo", "enabled")
        if any(getattr(old.hotkey, k) != getattr(new.hotkey, k) for k in keys):
            self.client.stop()
            self.client.settings = self._hotkey_settings(new)
            self.start()
        else:
            self.client.settings = self._hotkey_settings(new)

    def stop(self) -> None:
        self.client.stop()

    # ------------------------------------------------------------------ the key
    def press(self, at: float | None = None) -> None:
        if self.recording:
            if self.app.settings.hotkey.mode == "toggle":
                self.release(at)
            return
        if self.app.controller.state == LISTENING:
            return  # the talk key has the microphone
        if self.app.pipeline.stt.engine is None:
            self.app.pipeline.wake()  # freed while idle: loads again
            self.app.show_notice("Dictation: the speech-to-text model is loading, try again "
                                 "in a moment")
            return
        self._sound(Earcon.LISTEN_START)
        try:
            self.app.mic.start_recording()
        except AudioDeviceError as exc:
            self.app.show_notice(f"Dictation: {exc}", error=True)
            return
        self.recording = True

    def _key_released(self, at: float | None = None) -> None:
        if self.app.settings.hotkey.mode == "hold":  # toggle: the next press ends it
            self.release(at)

    def release(self, at: float | None = None) -> None:
        if not self.recording:
            return
        self.recording = False
        try:
            audio = self.app.mic.stop_recording()
        except AudioDeviceError as exc:
            self.app.show_notice(f"Dictation: {exc}", error=True)
            return
        self._sound(Earcon.LISTEN_STOP)
        if len(audio) < self.app.settings.audio.min_press_ms * 16:
            self.app.show_notice("Dictation: hold the dictation key while you speak")
            return
        threading.Thread(target=self._transcribe, args=(audio,), daemon=True,
                         name="s2s-dictation").start()

    def _sound(self, earcon: Earcon) -> None:
        if self.earcons is not None:
            self.earcons.play(earcon)

    # ------------------------------------------------------------------ text
    def _transcribe(self, audio) -> None:
        try:
            settings = self.app.settings
            result = self.app.pipeline.stt.engine.transcribe(
                audio, settings.stt.language or None, STTOptions.of(settings.stt))
            text = result.text.strip()
            llm = self.app.pipeline.llm.engine
            if text and settings.assistant.dictation_cleanup and llm is not None:
                cleaned = "".join(llm.stream(cleanup_messages(text), threading.Event(),
                                             LLMOptions.of(settings.llm))).strip()
                text = cleaned or text
        except Exception as exc:  # the app lives on; the user hears why
            log.exception("dictation failed")
            self.failed.emit(f"Dictation failed: {type(exc).__name__}: {exc}")
            return
        self.transcribed.emit(text)

    def deliver(self, text: str) -> Delivery | None:
        """Type `text` into the focused application (main thread)."""
        if not any(ch.isalnum() for ch in text):
            self.app.show_notice("Dictation: nothing was heard")
            return None
        clipboard = QGuiApplication.clipboard()
        why = keys_refused()
        if why:
            clipboard.setText(text)
            self.app.show_notice(why)
            how = Delivery.CLIPBOARD
        else:
            how = self._paste_or_type(clipboard, text)
        self.delivered.emit(text, how)
        return how

    def _paste_or_type(self, clipboard, text: str) -> Delivery:
        saved = clipboard.text()
        try:
            sender = self.sender_factory()
        except Exception as exc:  # no pynput, no display connection
            clipboard.setText(text)
            self.app.show_notice(f"Dictation: cannot type here ({exc}); the text is on the "
                                 "clipboard, paste it")
            return Delivery.CLIPBOARD
        clipboard.setText(text)
        try:
            sender.paste()
            how = Delivery.PASTED
        except Exception:  # pasting refused: type it instead
            log.info("paste keystroke refused; typing the dictated text", exc_info=True)
            sender.type(text)
            how = Delivery.TYPED
        # the user's clipboard comes back once the target has read ours
        QTimer.singleShot(RESTORE_CLIPBOARD_MS, lambda: clipboard.setText(saved))
        return how
