"""A microphone stand-in for app tests without sound hardware: it "hears" a tone while
recording (loud enough for the scripted energy VAD) and can be told to fail."""

from __future__ import annotations

import time

import numpy as np

from s2s_desktop.errors import AudioDeviceError


class FakeMicrophone:
    def __init__(self, fail_open: str = ""):
        self.device_name = ""
        self.fail_open = fail_open
        self.fail_start = ""
        self.level = 0.0
        self.opened = 0
        self.closed = 0
        self._since: float | None = None
        self._t0: float | None = None
        self._on_chunk = None

    def open(self):
        self.opened += 1
        if self.fail_open:
            raise AudioDeviceError(self.fail_open)

    def close(self):
        self.closed += 1

    def start_recording(self, since=None, on_chunk=None):
        if self.fail_open or self.fail_start:
            raise AudioDeviceError(self.fail_open or self.fail_start)
        self._since, self._t0 = since, time.monotonic()
        self._on_chunk = on_chunk
        self.level = 0.2

    def stop_recording(self):
        seconds = max(0.2, time.monotonic() - (self._t0 or time.monotonic()))
        self._t0, self.level = None, 0.0
        t = np.arange(int(seconds * 16000)) / 16000
        audio = (0.2 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
        if self._on_chunk is not None:  # a live turn: the whole "recording" in one piece
            self._on_chunk(audio)
            self._on_chunk = None
        return audio

    def cancel_recording(self):
        self._t0, self.level, self._on_chunk = None, 0.0, None

    def check(self):
        pass
