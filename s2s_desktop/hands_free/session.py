"""Hands-free conversation on real devices, Qt-free: an open microphone whose blocks (with
their capture times) feed a `HandsFreeListener` on a worker thread, and a speaker that tells
the echo canceller what it hands to the device (with the time it did). The microphone is
opened when the session starts and closed when it ends, whatever ends it: `stop()`, the
timeout, or the device going away (a STOPPED event says which, and what to do)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import numpy as np

from ..audio.microphone import Microphone
from ..audio.speaker import SpeakerSink
from ..audio_format import SAMPLE_RATE
from ..errors import AudioDeviceError
from .listener import HandsFreeEvent, HandsFreeEventKind, HandsFreeListener

log = logging.getLogger(__name__)

MIC_CHECK_S = 0.5  # no block this long: ask the microphone whether it is still there
NO_REFERENCE_S = 1.0  # replying this long with nothing heard from the speaker: warn
# after a barge-in, audio the pipeline hands over before it has stopped the reply waits this
# long (its flush, which drops it, ends the wait)
BARGE_IN_HOLD_S = 1.0
# 64 ms blocks (two VAD windows): an always-open microphone's callbacks cost ~1 % of a core
# less than with 40 ms here (idle target < 5 %), for at most 64 ms more to a decision
BLOCK_MS = 64


class StreamingMicrophone(Microphone):
    """A Microphone that also hands every block, resampled to 16 kHz, with the time its first
    sample was captured, to `on_block` (from the audio thread: keep it quick)."""

    on_block: Callable[[np.ndarray, float], None] | None = None
    _block_resampler = None

    def __init__(self, *args, block_ms: int = BLOCK_MS, **kwargs):
        super().__init__(*args, block_ms=block_ms, **kwargs)

    def _callback(self, indata, frames, time_info, status) -> None:
        super()._callback(indata, frames, time_info, status)
        sink = self.on_block
        if sink is None:
            return
        mono = np.array(indata[:, 0] if indata.ndim == 2 else indata, dtype=np.float32)
        captured_at = self.clock() - self._behind_s(time_info, len(mono))
        if self.rate != SAMPLE_RATE:
            if self._block_resampler is None:
                import soxr

                self._block_resampler = soxr.ResampleStream(
                    self.rate, SAMPLE_RATE, 1, dtype="float32"
                )
            mono = self._block_resampler.resample_chunk(mono)
        sink(mono, captured_at)

    def _behind_s(self, time_info, frames: int) -> float:
        """How long ago the block's first sample was captured: PortAudio's ADC time for it
        where the host API gives one (it counts the input latency), else the block's length."""
        try:
            behind = float(time_info.currentTime) - float(time_info.inputBufferAdcTime)
        except (AttributeError, TypeError, ValueError):
            behind = -1.0
        return behind if 0.0 <= behind < 1.0 else frames / self.rate

    def close(self) -> None:
        super().close()
        self._block_resampler = None


class EchoReferenceSpeaker(SpeakerSink):
    """A SpeakerSink that passes what its callback hands to the device, and when it will be
    heard, to `on_played` — the echo canceller's reference, at the device's rate, after any
    flush (a barge-in's silence is silence)."""

    on_played: Callable[[np.ndarray, int, float], None] | None = None

    def _callback(self, outdata, frames, time_info, status) -> None:
        super()._callback(outdata, frames, time_info, status)
        sink = self.on_played
        if sink is not None and self.rate:  # every block, silence too: the timeline is contiguous
            sink(outdata[:, 0].copy(), self.rate, time.monotonic() + self._ahead_s(time_info))

    def _ahead_s(self, time_info) -> float:
        """How long until this block is heard: PortAudio's DAC time for it where the host API
        gives one (it counts an underrun's gap), else the stream's output latency."""
        try:
            ahead = float(time_info.outputBufferDacTime) - float(time_info.currentTime)
        except (AttributeError, TypeError, ValueError):
            ahead = -1.0
        return ahead if 0.0 <= ahead < 1.0 else self.latency_ms / 1000


class HandsFreeSession:
    """Runs a listener on a worker thread; `on_event` is called from that thread."""

    def __init__(
        self,
        listener: HandsFreeListener,
        microphone: StreamingMicrophone,
        on_event: Callable[[HandsFreeEvent], None],
    ):
        self.listener = listener
        self.microphone = microphone
        self.on_event = on_event
        self._blocks: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._replying_since: float | None = None
        self._warned_no_reference = False
        self.max_behind_s = 0.0  # how far the listener fell behind the microphone at worst
        # holds the reply while the listener decides whether a voice over it is a barge-in:
        # pause() / resume() (a SpeakerSink); a barge-in's flush, by whoever stops the reply,
        # ends the pause
        self.player = None
        self._holding = False

    def start(self) -> None:
        """Open the microphone and listen. Raises AudioDeviceError (with what to do) when the
        microphone cannot be opened; nothing is left open then."""
        self._stop.clear()
        self.microphone.on_block = lambda block, t: self._blocks.put((block, t))
        try:
            self.microphone.open()
        except AudioDeviceError:
            self.microphone.on_block = None
            raise
        self._thread = threading.Thread(target=self._run, name="hands-free", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        self._close_microphone()
        self._hold_reply(None)

    def _hold_reply(self, kind: HandsFreeEventKind | None) -> None:
        """Pause the reply the moment a voice is heard over it (the stop the user hears),
        resume it after a backchannel or when listening ends; a barge-in drops it at once and
        holds what the pipeline may still hand over until its own flush."""
        player = self.player
        if player is None:
            return
        if kind is HandsFreeEventKind.REPLY_PAUSED:
            player.pause()
            self._holding = True
        elif kind is HandsFreeEventKind.BARGE_IN:
            player.flush()
            player.pause(BARGE_IN_HOLD_S)
            self._holding = False
        elif self._holding and kind in (HandsFreeEventKind.REPLY_RESUMED, None):
            player.resume()
            self._holding = False

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def set_replying(self, replying: bool) -> None:
        """The app started or finished speaking a reply."""
        self.listener.replying = replying
        self.listener.voice_barge_in = True
        self._replying_since = time.monotonic() if replying else None
        self._warned_no_reference = False

    def _close_microphone(self) -> None:
        self.microphone.on_block = None
        self.microphone.close()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    block, captured_at = self._blocks.get(timeout=MIC_CHECK_S)
                except queue.Empty:
                    self.microphone.check()  # raises when the device has gone
                    continue
                self.max_behind_s = max(self.max_behind_s, time.monotonic() - captured_at)
                for event in self.listener.process(block, captured_at):
                    self._hold_reply(event.kind)
                    self.on_event(event)
                    if event.kind is HandsFreeEventKind.TIMED_OUT:
                        self._end(event)
                        return
                self._check_reference()
        except AudioDeviceError as exc:
            self._end(HandsFreeEvent(
                HandsFreeEventKind.STOPPED, time.monotonic(), time.monotonic(),
                message=f"hands-free conversation stopped: {exc}; push-to-talk still works",
            ))
        except Exception as exc:  # never leave the microphone open behind a crash
            log.exception("hands-free listener failed")
            self._end(HandsFreeEvent(
                HandsFreeEventKind.STOPPED, time.monotonic(), time.monotonic(),
                message=f"hands-free conversation stopped ({exc}): push-to-talk still works",
            ))

    def _end(self, event: HandsFreeEvent) -> None:
        self._stop.set()
        self._close_microphone()
        if event.kind is HandsFreeEventKind.STOPPED:
            self.on_event(event)

    def _check_reference(self) -> None:
        """Replying, but the speaker has handed nothing to the echo canceller: the output
        device changed, or the reply plays elsewhere. Say so once per reply."""
        echo, since = self.listener.echo, self._replying_since
        if echo is None or since is None or self._warned_no_reference:
            return
        now = time.monotonic()
        if now - since >= NO_REFERENCE_S and not echo.playing_recently(now, NO_REFERENCE_S):
            self._warned_no_reference = True
            self.listener.voice_barge_in = False  # its own voice would interrupt it
            self.on_event(self.listener.notice(
                "hands-free cannot hear what the app plays (did the output device change?): "
                "your voice does not interrupt this reply; the talk key still does"
            ))
