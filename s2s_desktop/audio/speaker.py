"""The speaker: a sounddevice output stream whose callback reads a queue of the assistant's
audio. `flush()` silences it at once (barge-in), `drain()` waits until a turn has been heard.
A stream that keeps underrunning (ALSA's "underrun occurred", each one dropping what the device
held) is reopened with larger blocks, and the log says so; what is still queued is kept."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from ..audio_format import SAMPLE_DTYPE
from ..errors import AudioDeviceError
from .devices_by_name import device_label, find_device, import_sounddevice
from .sink import AudioSink

log = logging.getLogger(__name__)

FIRST_HEARD_KEEP = 16  # turns whose first-sample time is kept
# PortAudio keeps two blocks in flight: 20 ms blocks are 40 ms of output latency through
# ALSA/PulseAudio. 10 ms (20 ms latency) underran without pause on this loaded 2-core machine
# (ALSA snd_pcm_recover every callback); see docs/performance.md.
BLOCK_MS = 20
# this many underruns within UNSTEADY_WINDOW_S while audio plays: the device is not fed in
# time, so the stream is reopened with blocks twice as long (up to MAX_BLOCK_MS)
UNSTEADY_UNDERRUNS = 5
UNSTEADY_WINDOW_S = 1.0
MAX_BLOCK_MS = 80
# a pause nobody resumes or flushes (a lost event) ends by itself: the reply is never muted
MAX_PAUSE_S = 3.0
FADE_S = 0.005  # pause and resume ramp the voice over this long: no click


class SpeakerSink(AudioSink):
    def __init__(
        self,
        device_name: str = "",
        on_notice: Callable[[str], None] | None = None,
        sd=None,
        block_ms: int = BLOCK_MS,
    ):
        self.device_name = device_name
        self.on_notice = on_notice
        self._sd = sd
        self._block_ms = block_ms
        self._lock = threading.Lock()
        self._stream = None
        self.rate = 0  # rate the stream runs at
        self._requested = 0  # rate asked for (the device may have refused it)
        self.label = ""
        # [turn, sentence, pcm, offset]
        self._queue: collections.deque[list] = collections.deque()
        self._pending: dict[int, int] = {}  # turn -> frames queued, not yet handed to PortAudio
        self._played: dict[int, dict[int, int]] = {}  # turn -> sentence -> frames played
        self._lost = ""
        self._first_heard: dict[int, float] = {}  # turn -> when the callback took its first sample
        self.latency_ms = 0.0  # the output latency PortAudio reports for the open stream
        self.underruns = 0  # callbacks too late to keep the device fed
        self._recent_underruns: collections.deque[float] = collections.deque()  # while playing
        self._opening = threading.Lock()  # the player and the earcons may both (re)open it
        self._paused_until: float | None = None  # paused (hands-free heard a voice) until then
        self._fade_in = False  # the first block after a pause starts with a ramp
        self._fade_out = False  # the first block of a pause ends the voice with a ramp

    # ------------------------------------------------------------------ stream
    def open(self, sample_rate: int) -> None:
        """Open the output stream at `sample_rate` (or the device's own rate, resampling)."""
        self._close_stream()
        self._requested = sample_rate
        sd = self._sd or import_sounddevice()
        self._sd = sd
        index, notice = find_device(sd, self.device_name, "output")
        if notice and self.on_notice:
            self.on_notice(notice)
        errors = []
        for rate in (sample_rate, None):
            stream = None
            try:
                if rate is None:
                    rate = int(sd.query_devices(index, kind="output")["default_samplerate"])
                stream = sd.OutputStream(
                    device=index,
                    channels=1,
                    samplerate=rate,
                    dtype=SAMPLE_DTYPE,
                    latency="low",
                    blocksize=int(rate * self._block_ms / 1000),
                    callback=self._callback,
                    finished_callback=self._finished,
                )
                stream.start()
            except Exception as exc:  # PortAudioError, or a rate the device refuses
                errors.append(str(exc))
                if stream is not None:
                    try:
                        stream.close()
                    except Exception:
                        pass
                continue
            with self._lock:
                self._stream, self.rate, self._lost = stream, rate, ""
            self.label = device_label(sd, index, "output")
            self.latency_ms = round(float(getattr(stream, "latency", 0.0)) * 1000, 1)
            log.info("speaker open: %s at %d Hz, %d ms blocks, output latency %.1f ms",
                     self.label, rate, self._block_ms, self.latency_ms)
            return
        raise AudioDeviceError(
            f"cannot open the speaker ({'; '.join(errors)}): check that it is connected, or "
            "choose another in Settings…"
        )

    def _close_stream(self) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.abort()
                stream.close()
            except Exception:
                pass

    def _callback(self, outdata, frames, time_info, status) -> None:
        out = outdata[:, 0]
        now = time.monotonic()
        underflow = bool(status and getattr(status, "output_underflow", False))
        with self._lock:
            if underflow:
                self.underruns += 1
                if self._queue:  # a gap in the assistant's voice, not in silence
                    self._recent_underruns.append(now)
            if self._paused_until is not None and now < self._paused_until:
                # held: the queue waits where it was, after a few ms of it faded out
                n = self._take(out, int(FADE_S * self.rate), now) if self._fade_out else 0
                self._fade_out = False
                out[:n] *= np.linspace(1.0, 1.0 / max(1, n), n, dtype=out.dtype)
                out[n:] = 0.0
                return
            if self._paused_until is not None:
                self._paused_until, self._fade_in = None, True
            filled = self._take(out, frames, now)
        out[filled:] = 0.0
        if self._fade_in and filled:
            self._fade_in = False
            n = min(filled, int(FADE_S * self.rate))
            out[:n] *= np.linspace(1.0 / n, 1.0, n, dtype=out.dtype)

    def _take(self, out: np.ndarray, frames: int, now: float) -> int:
        """Fill `out[:frames]` from the queue (under the lock); how many samples it had."""
        filled = 0
        while filled < frames and self._queue:
            item = self._queue[0]
            turn, sentence, pcm, offset = item
            if turn not in self._first_heard:
                self._first_heard[turn] = now + filled / max(1, self.rate)
                for old in sorted(self._first_heard)[:-FIRST_HEARD_KEEP]:
                    del self._first_heard[old]
            n = min(frames - filled, len(pcm) - offset)
            out[filled : filled + n] = pcm[offset : offset + n]
            filled += n
            item[3] += n
            self._pending[turn] = self._pending.get(turn, 0) - n
            played = self._played.setdefault(turn, {})
            played[sentence] = played.get(sentence, 0) + n
            if item[3] >= len(pcm):
                self._queue.popleft()
                if self._pending.get(turn, 0) <= 0:
                    self._pending.pop(turn, None)
        return filled

    def _finished(self) -> None:
        if self._stream is not None:
            self._lost = "the speaker stopped (was it unplugged?)"

    # ------------------------------------------------------------------ AudioSink
    def play(self, pcm: np.ndarray, sample_rate: int, turn: int, sentence: int = -1) -> None:
        with self._opening:
            stream = self._stream
            if stream is None or self._lost or not stream.active:
                self.open(sample_rate)  # first use, or one reopen after a loss; raises if not
            elif sample_rate != self._requested and not self._queue:
                self.open(sample_rate)  # the voice changed rate: follow it while nothing plays
            else:
                self._reopen_if_unsteady()
        pcm = np.asarray(pcm, dtype=np.float32).reshape(-1)
        if sample_rate != self.rate and pcm.size:
            import soxr

            pcm = soxr.resample(pcm, sample_rate, self.rate).astype(np.float32)
        if not pcm.size:
            return
        with self._lock:
            self._queue.append([turn, sentence, pcm, 0])
            self._pending[turn] = self._pending.get(turn, 0) + len(pcm)

    def _reopen_if_unsteady(self) -> None:
        """Reopen with blocks twice as long when the stream keeps underrunning (the queue is
        kept, so the reply goes on where it was)."""
        now = time.monotonic()
        with self._lock:
            recent = self._recent_underruns
            while recent and now - recent[0] > UNSTEADY_WINDOW_S:
                recent.popleft()
            if len(recent) < UNSTEADY_UNDERRUNS or self._block_ms >= MAX_BLOCK_MS:
                return
            count = len(recent)
            recent.clear()
        before, self._block_ms = self._block_ms, min(MAX_BLOCK_MS, self._block_ms * 2)
        log.warning(
            "speaker: the sound system ran out of audio %d times in %.0f s while the assistant "
            "spoke (each time it drops what it held: ALSA's 'underrun occurred'), so the output "
            "was reopened with %d ms blocks instead of %d ms (a little more delay, no gaps)",
            count, UNSTEADY_WINDOW_S, self._block_ms, before)
        try:
            self.open(self._requested)
        except AudioDeviceError as exc:
            self._lost = str(exc)

    def drain(self, turn: int, stop: threading.Event) -> None:
        """Wait until the turn's audio has left the queue, then the device's latency."""
        while not stop.is_set():
            with self._lock:
                left = self._pending.get(turn, 0)
                lost = self._lost
            if left <= 0 or lost:
                break
            with self._opening:
                self._reopen_if_unsteady()
            stop.wait(0.01)
        stream = self._stream
        if stream is not None and not stop.is_set():
            try:
                stop.wait(float(stream.latency))
            except Exception:
                pass

    def flush(self) -> None:
        """Silence now: drop the queue; the next callback block is silent (and a pause ends:
        there is nothing left to resume)."""
        with self._lock:
            self._queue.clear()
            self._pending.clear()
            self._paused_until = None

    def pause(self, max_s: float = MAX_PAUSE_S) -> None:
        """Hold the voice from the next callback block on, keeping the queue (hands-free heard
        someone start to speak over it); `resume()` goes on where it stopped, `flush()` drops it.
        The pause ends by itself after `max_s`."""
        with self._lock:
            self._fade_out = self._paused_until is None  # not when already held
            self._paused_until = time.monotonic() + max_s

    def resume(self) -> None:
        with self._lock:
            if self._paused_until is not None:
                self._paused_until = time.monotonic()  # the next callback fades back in

    @property
    def paused(self) -> bool:
        with self._lock:
            return self._paused_until is not None and time.monotonic() < self._paused_until

    def close(self) -> None:
        self.flush()
        self._close_stream()

    @property
    def is_open(self) -> bool:
        return self._stream is not None

    def first_heard(self, turn: int) -> float | None:
        """Monotonic time the device callback took the turn's first sample (None: not yet)."""
        with self._lock:
            return self._first_heard.get(turn)

    def forget(self, turn: int) -> None:
        with self._lock:
            self._first_heard.pop(turn, None)

    def take_played(self, turn: int) -> dict[int, float]:
        with self._lock:
            frames = self._played.pop(turn, {})
            for old in sorted(self._played)[:-FIRST_HEARD_KEEP]:  # turns never closed
                del self._played[old]
            rate = max(1, self.rate)
        return {sentence: n / rate for sentence, n in frames.items()}

    def queued_seconds(self) -> float:
        with self._lock:
            frames = sum(len(p) - off for _, _, p, off in self._queue)
        return frames / self.rate if self.rate else 0.0
