"""The Audio tab: microphone and speaker by name, a live level meter from the chosen microphone
(while the tab is shown) and a test sound on the chosen speaker. Without PortAudio or without
devices the pickers are disabled and say why."""

from __future__ import annotations

import logging
import math

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QWidget,
)

from ..audio.devices_by_name import import_sounddevice
from ..audio.microphone import Microphone
from ..audio.speaker import SpeakerSink
from ..errors import AudioDeviceError
from .earcon_settings import add_earcon_rows
from .form_fields import Fields

log = logging.getLogger(__name__)

DEFAULT = "System default"
FLOOR_DB = -60.0  # the meter's empty end
TONE_RATE = 22050


def level_percent(rms: float) -> int:
    """RMS (0..1) → meter percent on a dB scale from -60 dBFS (0 %) to 0 dBFS (100 %)."""
    if rms <= 0:
        return 0
    db = 20 * math.log10(rms)
    return int(round(100 * min(1.0, max(0.0, (db - FLOOR_DB) / -FLOOR_DB))))


def chime(seconds: float = 0.6, rate: int = TONE_RATE) -> np.ndarray:
    """Two soft notes (A4 then E5) with fades, so it is clearly a test and never clicks."""
    n = int(seconds * rate)
    t = np.arange(n) / rate
    freq = np.where(t < seconds / 2, 440.0, 659.25)
    tone = 0.25 * np.sin(2 * np.pi * freq * t)
    fade = np.minimum(1.0, np.minimum(t, seconds - t) / 0.03)
    return (tone * fade).astype(np.float32)


def list_devices(sd) -> tuple[list[str], list[str], str]:
    """(input names, output names, problem) — names once each, in the system's order."""
    try:
        devices = list(sd.query_devices())
    except Exception as exc:  # noqa: BLE001 - PortAudioError: no host API answered
        return [], [], f"audio devices cannot be listed ({exc})"
    ins, outs = [], []
    for d in devices:
        if d.get("max_input_channels", 0) > 0 and d["name"] not in ins:
            ins.append(d["name"])
        if d.get("max_output_channels", 0) > 0 and d["name"] not in outs:
            outs.append(d["name"])
    problem = "" if ins or outs else "no audio devices found (is a sound server running?)"
    return ins, outs, problem


class AudioTab(QWidget):
    def __init__(self, fields: Fields, sd=None, parent=None):
        super().__init__(parent)
        self._sd = sd
        self.mic: Microphone | None = None
        self.speaker: SpeakerSink | None = None
        self.problem = ""
        if self._sd is None:
            try:
                self._sd = import_sounddevice()
            except AudioDeviceError as exc:
                self.problem = str(exc)
        ins, outs = [], []
        if self._sd is not None:
            ins, outs, self.problem = list_devices(self._sd)

        self.input_box = QComboBox()
        self.output_box = QComboBox()
        for box, names in ((self.input_box, ins), (self.output_box, outs)):
            box.addItem(DEFAULT, "")
            for name in names:
                box.addItem(name, name)
            box.setEnabled(not self.problem)
        fields.bind("audio.input_device", self.input_box)
        fields.bind("audio.output_device", self.output_box)

        self.meter = QProgressBar()
        self.meter.setRange(0, 100)
        self.meter.setTextVisible(False)
        self.meter.setMaximumHeight(14)
        self.meter_label = QLabel("")
        self.test_button = QPushButton("Play Test Sound")
        self.test_button.clicked.connect(self.play_test_sound)
        self.test_label = QLabel("")
        self.reason = QLabel(self.problem)
        self.reason.setWordWrap(True)
        self.reason.setStyleSheet("color: #b00020")
        self.reason.setVisible(bool(self.problem))
        for w in (self.meter, self.test_button):
            w.setEnabled(not self.problem)

        form = QFormLayout(self)
        form.addRow("Microphone:", self.input_box)
        meter_row = QHBoxLayout()
        meter_row.addWidget(self.meter, 1)
        meter_row.addWidget(self.meter_label)
        form.addRow("Input level:", meter_row)
        self.keep_open = fields.bind(
            "audio.keep_mic_open", QCheckBox("Keep the microphone ready between questions")
        )
        self.keep_open.setToolTip(
            "Catches a word said as the key goes down (a short pre-roll), but the microphone "
            "stays open, and your desktop shows it in use, while the app runs. Off: it opens "
            "when you press the talk key."
        )
        form.addRow("", self.keep_open)
        form.addRow("Speaker:", self.output_box)
        test_row = QHBoxLayout()
        test_row.addWidget(self.test_button)
        test_row.addWidget(self.test_label, 1)
        form.addRow("", test_row)
        self.earcons, self.earcon_volume = add_earcon_rows(form, fields)
        form.addRow(self.reason)
        hint = QLabel("Speak: the bar should move. The meter listens only while this tab is open.")
        hint.setWordWrap(True)
        hint.setStyleSheet("color: palette(mid)")
        form.addRow(hint)

        self._timer = QTimer(self, interval=50)
        self._timer.timeout.connect(self._show_level)
        self.input_box.currentIndexChanged.connect(self._restart_meter)

    # ------------------------------------------------------------------ level meter
    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.start_meter()

    def hideEvent(self, event) -> None:
        super().hideEvent(event)
        self.stop_meter()

    def start_meter(self) -> None:
        if self._sd is None or self.problem or self.mic is not None:
            return
        mic = Microphone(
            self.input_box.currentData() or "", sd=self._sd, on_notice=self.meter_label.setText
        )
        try:
            mic.open()
        except AudioDeviceError as exc:
            self.meter.setValue(0)
            self.meter_label.setText("no input")
            self.meter_label.setToolTip(str(exc))
            self._say(str(exc), error=True)
            return
        self.mic = mic
        self.meter_label.setText("")
        self._timer.start()

    def stop_meter(self) -> None:
        self._timer.stop()
        mic, self.mic = self.mic, None
        if mic is not None:
            mic.close()
        self.meter.setValue(0)

    def _restart_meter(self) -> None:
        if self.mic is not None or self.isVisible():
            self.stop_meter()
            self.start_meter()

    def _show_level(self) -> None:
        if self.mic is None:
            return
        rms = self.mic.level
        self.meter.setValue(level_percent(rms))
        self.meter_label.setText(f"{20 * math.log10(rms):.0f} dB" if rms > 1e-6 else "silent")

    # ------------------------------------------------------------------ test sound
    def play_test_sound(self) -> None:
        if self._sd is None:
            return
        if self.speaker is not None:
            self.speaker.close()
        self.speaker = SpeakerSink(
            self.output_box.currentData() or "", sd=self._sd, on_notice=self.test_label.setText
        )
        tone = chime()
        try:
            self.speaker.play(tone, TONE_RATE, turn=0)
        except AudioDeviceError as exc:
            self._say(str(exc), error=True)
            self.speaker = None
            return
        self._say(f"Playing on {self.speaker.label or 'the default speaker'}…")
        QTimer.singleShot(int(len(tone) / TONE_RATE * 1000) + 400, self._test_done)

    def _test_done(self) -> None:
        speaker, self.speaker = self.speaker, None
        if speaker is not None:
            speaker.close()
            self._say("Did you hear two notes? If not, choose another speaker.")

    def _say(self, text: str, error: bool = False) -> None:
        self.test_label.setText(text)
        self.test_label.setStyleSheet("color: #b00020" if error else "")

    def close_devices(self) -> None:
        self.stop_meter()
        speaker, self.speaker = self.speaker, None
        if speaker is not None:
            speaker.close()
