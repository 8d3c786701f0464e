"""A stand-in for the `sounddevice` module with named devices: input streams deliver a tone
from a thread (as PortAudio's callback thread would), output streams pull audio through the
callback and keep what they were given per device, so tests can hear what was played.

With a `Room`, input streams deliver what is said in it instead, each block when it has been
"recorded" (real time), and `open_delay_s` makes starting a stream block that long, as an
idle PulseAudio source did here (1.5 s): what is said meanwhile is lost, as on that device."""

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


class Room:
    """What is said near the microphone: sounds placed at monotonic times (16 kHz mono)."""

    def __init__(self, rate: int = 16000):
        self.rate = rate
        self._said: list[tuple[float, np.ndarray]] = []
        self._lock = threading.Lock()

    def say(self, pcm: np.ndarray, at: float) -> None:
        with self._lock:
            self._said.append((at, np.asarray(pcm, np.float32)))

    def heard(self, start: float, n: int) -> np.ndarray:
        """The n samples from monotonic time `start` on."""
        out = np.zeros(n, np.float32)
        with self._lock:
            said = list(self._said)
        for at, pcm in said:
            offset = int(round((start - at) * self.rate))  # where this block is in the sound
            lo, hi = max(0, offset), min(len(pcm), offset + n)
            if hi > lo:
                out[lo - offset : hi - offset] += pcm[lo:hi]
        return out


class InputStream(_Stream):
    def start(self):
        time.sleep(self.sd.open_delay_s)  # PortAudio returns once the device delivers
        self.started_at = time.monotonic()
        super().start()

    def _run(self):
        if self.sd.room is None:
            return super()._run()
        n = 0
        while not self._stop.is_set():  # each block once it has been recorded, in real time
            time.sleep(max(0.0, self.started_at + (n + self.blocksize) / self.rate
                           - time.monotonic()))
            pcm = self.sd.room.heard(self.started_at + n / self.rate, self.blocksize)
            n += self.blocksize
            if not self._stop.is_set():
                self.callback(pcm.reshape(-1, 1), self.blocksize, None, None)

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
        room: Room | None = None,
        open_delay_s: float = 0.0,
    ):
        self.room, self.open_delay_s = room, open_delay_s
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
