"""The microphone: a sounddevice input stream opened when a recording starts and closed when
it ends (so the desktop's "microphone in use" light is off at idle), or — with `keep_open` —
kept warm with a pre-roll ring buffer so the first word said as the key goes down is not cut;
a level for a meter, and clear errors when there is no device, no PortAudio, or the device
goes away mid-recording. `open_to_first_sample_ms` says how long opening took to deliver
audio: what is said in that time is lost (PulseAudio took 1.5 s to start an idle source here,
every time), so a device that opens slower than SLOW_OPEN_MS is kept open between questions
(`slow_open_ms` says why) even when the user did not ask for it."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from ..audio_format import SAMPLE_RATE
from ..errors import AudioDeviceError
from .devices_by_name import device_label, find_device, import_sounddevice

log = logging.getLogger(__name__)

STALL_S = 1.0  # no audio callback for this long while open ⇒ the device is gone
# a device just opened may take this long to deliver its first block (a suspended PulseAudio
# source took 1.4 s here) before it counts as gone
FIRST_BLOCK_S = 5.0
# a device that takes longer than this to deliver its first block after opening loses the
# start of a question said at once after the press: it stays open from then on
SLOW_OPEN_MS = 120.0


class Microphone:
    def __init__(
        self,
        device_name: str = "",
        preroll_ms: int = 500,
        max_record_s: float = 120.0,
        on_notice: Callable[[str], None] | None = None,
        sd=None,
        block_ms: int = 20,
        clock=time.monotonic,
        keep_open: bool = True,
    ):
        self.device_name = device_name
        self.keep_open = keep_open  # False: open on press, closed again when the recording ends
        self.preroll_s = max(0.3, preroll_ms / 1000)  # at least 300 ms before the press
        self.max_record_s = max_record_s
        self.on_notice = on_notice
        self._sd = sd
        self._block_ms = block_ms
        self.clock = clock
        self._lock = threading.Lock()
        self._warming = threading.Lock()  # a warm-up (in its own thread) and a press never race
        self._stream = None
        self.rate = SAMPLE_RATE
        self.label = ""
        self._ring: collections.deque[tuple[float, np.ndarray]] = collections.deque()
        self._ring_len = 0
        self._recording: list[np.ndarray] | None = None
        self._recorded = 0
        self._on_chunk: Callable[[np.ndarray], None] | None = None  # live: 16 kHz pieces
        self._resampler = None
        self._last_callback = 0.0
        self._lost = ""
        self._level = 0.0
        self._opened_at: float | None = None  # until the first block arrives
        self.open_to_first_sample_ms: float | None = None
        self.slow_open_ms: float | None = None  # set: kept open because opening took this long
        self.warmed_up = False  # the warm-up at start has measured the device

    # ------------------------------------------------------------------ stream
    def open(self) -> None:
        """Open (or reopen) the input stream. Raises AudioDeviceError with what to do."""
        self.close()
        sd = self._sd or import_sounddevice()
        self._sd = sd
        index, notice = find_device(sd, self.device_name, "input")
        if notice and self.on_notice:
            self.on_notice(notice)
        stream, rate = None, SAMPLE_RATE
        errors = []
        self._opened_at, self.open_to_first_sample_ms = self.clock(), None
        for rate in (SAMPLE_RATE, None):  # 16 kHz where the device allows, else its own rate
            try:
                if rate is None:
                    rate = int(sd.query_devices(index, kind="input")["default_samplerate"])
                stream = sd.InputStream(
                    device=index,
                    channels=1,
                    samplerate=rate,
                    dtype="float32",
                    blocksize=int(rate * self._block_ms / 1000),
                    callback=self._callback,
                    finished_callback=self._finished,
                )
                stream.start()
                break
            except Exception as exc:  # PortAudioError, ValueError for a bad rate
                errors.append(str(exc))
                if stream is not None:
                    try:
                        stream.close()
                    except Exception:
                        pass
                stream = None
        if stream is None:
            raise AudioDeviceError(
                f"cannot open the microphone ({'; '.join(errors)}): check that it is "
                "connected and not used by another program, or choose another in Settings…"
            )
        with self._lock:
            self._stream, self.rate = stream, rate
            self._ring.clear()
            self._ring_len = 0
            self._lost = ""
            self._last_callback = self.clock()
        self.label = device_label(sd, index, "input")
        log.info("microphone open: %s at %d Hz", self.label, rate)

    def warm_up(self, timeout_s: float = 2.0) -> float | None:
        """Open, wait for the first block, close, and open once more to measure how long a
        press will wait for audio: the sound system's first open of a run is slow (1.4-2 s
        through PulseAudio), and on some systems any open may be (an idle PulseAudio source,
        1.5 s here). A device slower than SLOW_OPEN_MS on either open stays open. Returns the
        first open's time to the first sample (ms). Safe to run in a thread: a press meanwhile
        takes the stream over, and the warm-up then neither reopens nor closes it."""
        took = self._warm_open(timeout_s)
        if not self.keep_open:
            again = self._warm_open(timeout_s)
            # one slow open is enough: the same PulseAudio source opened in 990 ms, then 53,
            # then 1957 on the press (real loop, 2026-12-06), which lost the whole question
            slowest = max((t for t in (took, again) if t is not None), default=None)
            with self._warming:
                if not self.recording and (slowest is None or not self._kept_if_slow(slowest)):
                    self.close()
        self.warmed_up = True
        if took is None:
            log.info("microphone warm-up: no audio within %.0f s (the first press may wait "
                     "for the sound system)", timeout_s)
        else:
            log.info("microphone warmed up: first audio after %.0f ms", took)
        return took

    def _warm_open(self, timeout_s: float) -> float | None:
        """(Re)open and wait for the first sample; None when a press owns the stream or no
        audio came. The wait holds no lock, so a press is never kept waiting by it."""
        with self._warming:
            if self.recording:
                return None
            self.open()
        deadline = time.monotonic() + timeout_s  # real time, whatever clock stamps the audio
        while self.open_to_first_sample_ms is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.open_to_first_sample_ms

    def _kept_if_slow(self, open_ms: float) -> bool:
        """Keep the stream open from now on when opening it took longer than SLOW_OPEN_MS."""
        if self.keep_open or self.slow_open_ms is not None or open_ms <= SLOW_OPEN_MS:
            return self.slow_open_ms is not None
        self.slow_open_ms = open_ms
        log.warning(
            "microphone: it took %.0f ms to start delivering audio (over %.0f ms), so words "
            "said just after the press would be lost: it stays open between questions from "
            "now on (nothing is kept but a %.1f s pre-roll)", open_ms, SLOW_OPEN_MS,
            self.preroll_s)
        if self.on_notice:  # an open microphone is shown, not only logged
            self.on_notice(
                f"The microphone took {open_ms / 1000:.1f} s to start, so it now stays open "
                f"between questions (only the last {self.preroll_s:.1f} s is kept) and the "
                "first word after the press is not lost")
        return True

    @property
    def stays_open(self) -> bool:
        """Open between questions: asked for (keep_open) or needed (a slow device)."""
        return self.keep_open or self.slow_open_ms is not None

    def close(self) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
            self._recording, self._on_chunk = None, None
        if stream is not None:
            try:
                stream.abort()
                stream.close()
            except Exception:
                pass

    @property
    def is_open(self) -> bool:
        return self._stream is not None

    def _callback(self, indata, frames, time_info, status) -> None:
        mono = np.array(indata[:, 0] if indata.ndim == 2 else indata, dtype=np.float32)
        now = self.clock()
        level = float(np.sqrt(np.mean(mono * mono))) if mono.size else 0.0
        with self._lock:
            if self._opened_at is not None:  # how long the device took to deliver audio
                self.open_to_first_sample_ms = (now - self._opened_at) * 1000
                self._opened_at = None
                log.info("microphone: first audio %.0f ms after open", self.open_to_first_sample_ms)
            self._last_callback = now
            self._level = level
            self._ring.append((now, mono))
            self._ring_len += len(mono)
            keep = int(self.preroll_s * self.rate) + len(mono)
            while self._ring_len - len(self._ring[0][1]) >= keep:
                self._ring_len -= len(self._ring.popleft()[1])
            if self._recording is not None and self._recorded < self.max_record_s * self.rate:
                self._recording.append(mono)
                self._recorded += len(mono)
                self._pass_on(mono)

    def _finished(self) -> None:
        # PortAudio ended the stream on its own (device unplugged, server gone) unless we closed
        if self._stream is not None:
            self._lost = "the microphone stopped (was it unplugged?)"

    # ------------------------------------------------------------------ recording
    def start_recording(
        self, since: float | None = None, on_chunk: Callable[[np.ndarray], None] | None = None
    ) -> None:
        """Begin a recording that starts with up to the pre-roll of audio already heard
        (none from before `since`). `on_chunk` gets the recording as it grows, 16 kHz mono,
        pre-roll first (from the audio thread). Opens the device on first use or after a loss."""
        with self._warming:  # a warm-up in its thread neither reopens nor closes it now
            if self._stream is None or self._lost:
                self.open()
            self.check()
            self._begin(since, on_chunk)

    def _begin(self, since: float | None, on_chunk) -> None:
        with self._lock:  # under the lock, so pre-roll and new blocks are passed on in order
            blocks = [b for t, b in self._ring if since is None or t > since]
            self._recording = blocks
            self._recorded = sum(len(b) for b in blocks)
            self._on_chunk = on_chunk
            self._resampler = None
            if on_chunk is not None and self.rate != SAMPLE_RATE:
                import soxr

                self._resampler = soxr.ResampleStream(self.rate, SAMPLE_RATE, 1, dtype="float32")
            for block in blocks:
                self._pass_on(block)

    def _pass_on(self, block: np.ndarray) -> None:
        if self._on_chunk is None:
            return
        if self._resampler is not None:
            block = self._resampler.resample_chunk(block)
            if not block.size:
                return
        try:
            self._on_chunk(block)
        except Exception:  # never let a listener break the audio thread
            log.exception("microphone chunk listener failed")
            self._on_chunk = None

    def stop_recording(self) -> np.ndarray:
        """The recording as 16 kHz mono float32."""
        try:
            self.check()
        finally:
            with self._lock:
                blocks, self._recording, self._on_chunk = self._recording, None, None
            self._close_unless_kept()
        audio = np.concatenate(blocks) if blocks else np.zeros(0, np.float32)
        if self.rate != SAMPLE_RATE and audio.size:
            import soxr

            audio = soxr.resample(audio, self.rate, SAMPLE_RATE).astype(np.float32)
        return audio

    def cancel_recording(self) -> None:
        with self._lock:
            self._recording, self._on_chunk = None, None
        self._close_unless_kept()

    def _close_unless_kept(self) -> None:
        opened = self.open_to_first_sample_ms
        if opened is not None and self._kept_if_slow(opened):
            return
        if not self.keep_open:
            self.close()

    def check(self) -> None:
        """Raise AudioDeviceError when the stream is gone or has stopped delivering audio."""
        stream = self._stream
        if stream is None:
            raise AudioDeviceError("the microphone is not open: check Settings… → audio input")
        with self._lock:  # both as the audio thread left them, never one old and one new
            opened_at, last_callback = self._opened_at, self._last_callback
        limit = FIRST_BLOCK_S if opened_at is not None else STALL_S
        stalled = self.clock() - last_callback > limit
        if self._lost or stalled or not stream.active:
            reason = self._lost or "the microphone stopped delivering audio (was it unplugged?)"
            self._lost = reason
            raise AudioDeviceError(f"{reason}: reconnect it or choose another in Settings…")

    @property
    def level(self) -> float:
        """RMS of the last block, 0..1 (for a meter)."""
        return self._level

    @property
    def recording(self) -> bool:
        return self._recording is not None
