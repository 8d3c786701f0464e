"""A stand-in for the `sounddevice` module with named devices: input streams deliver a tone
from a thread (as PortAudio's callback thread would), output streams pull audio through the
callback and keep what they were given per device, so tests can hear what was played."""

from __future__ import annotations

import threading
import time

import numpy as np


class _Stream:
    def __init__(
        self, sd, device, channels, samplerate, blocksize, callback, finished_callback=None, **_
    ):
        self.sd, self.device, self.rate = sd, device, int(samplerate)
        self.channels, self.blocksize = channels, int(blocksize or samplerate // 50)
        self.callback, self.finished_callback = callback, finished_callback
        self.active, self.latency = False, 0.01
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.active = True
        self.sd.opened.append(self)
        self._thread.start()

    def abort(self):
        self._stop.set()
        self.active = False
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(1)

    stop = abort

    def close(self):
        self.abort()

    def _run(self):
        period = self.blocksize / self.rate
        while not self._stop.is_set():
            self.block()
            time.sleep(period)


class InputStream(_Stream):
    def block(self):
        n = self.blocksize
        t = (np.arange(n) + getattr(self, "_pos", 0)) / self.rate
        self._pos = getattr(self, "_pos", 0) + n
        pcm = (self.sd.input_amplitude * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
        self.callback(pcm.reshape(-1, 1), n, None, None)


class OutputStream(_Stream):
    def block(self):
        out = np.zeros((self.blocksize, self.channels), np.float32)
        self.callback(out, self.blocksize, None, None)
        with self.sd.lock:
            self.sd.played.setdefault(
                self.sd.devices[self.device]["name"] if self.device is not None else "default", []
            ).append(out[:, 0].copy())


class FakeSoundDevice:
    def __init__(
        self,
        inputs=("Built-in Microphone", "USB Headset"),
        outputs=("Built-in Speakers", "USB Headset"),
        input_amplitude: float = 0.1,
    ):
        self.devices = []
        for name in dict.fromkeys(list(inputs) + list(outputs)):
            self.devices.append(
                {
                    "index": len(self.devices),
                    "name": name,
                    "hostapi": 0,
                    "max_input_channels": 1 if name in inputs else 0,
                    "max_output_channels": 2 if name in outputs else 0,
                    "default_samplerate": 48000.0,
                }
            )
        self.input_amplitude = input_amplitude
        self.opened: list[_Stream] = []
        self.played: dict[str, list[np.ndarray]] = {}
        self.lock = threading.Lock()
        sd = self

        class _In(InputStream):
            def __init__(self, **kw):
                super().__init__(sd, **kw)

        class _Out(OutputStream):
            def __init__(self, **kw):
                super().__init__(sd, **kw)

        self.InputStream, self.OutputStream = _In, _Out

    def query_devices(self, device=None, kind=None):
        if device is None and kind is None:
            return list(self.devices)
        if device is None:
            key = "max_input_channels" if kind == "input" else "max_output_channels"
            return next(d for d in self.devices if d[key] > 0)
        return self.devices[device]

    def audio_played(self, name: str) -> np.ndarray:
        with self.lock:
            blocks = list(self.played.get(name, []))
        return np.concatenate(blocks) if blocks else np.zeros(0, np.float32)

    def open_streams(self) -> list[_Stream]:
        return [s for s in self.opened if s.active]
