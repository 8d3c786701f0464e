"""Acoustic echo cancellation for hands-free conversation: WebRTC's audio processing module
(AEC3 + noise suppression + high-pass), from the `livekit` wheel (Linux, macOS and Windows,
any Python >= 3.9; docs/hands-free.md says why this one).

The canceller is fed what the app itself plays (the reply and earcons, as the speaker's
callback handed them to the device, with the time it did) and the microphone's blocks with the
time they were captured. Both go on one 16 kHz timeline by those timestamps, and each 10 ms
microphone frame is processed right after the reference frame played at the same moment; the
remaining delay (output latency + room + input latency) is what AEC3's own delay estimator
finds. Push-to-talk never builds one: it costs nothing there.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from ..errors import S2SError

log = logging.getLogger(__name__)

RATE = 16000  # the canceller's rate: the rate the VAD, the turn model and STT read
FRAME = RATE // 100  # WebRTC processes 10 ms frames
# reference kept on the timeline: the listener's thread may run seconds behind the microphone
# on a loaded machine (a turn-model call, other work); older audio than this is cancelled
# against silence (on the echo rig a 2 s ring lost whole replies that way)
HISTORY_S = 10.0
RESTART_GAP_S = 0.05  # a reference block this far off the running timeline starts it anew
DRIFT_S = 0.006  # two blocks in a row this far off where the stream was placed: a gap
# the echo in a microphone block may come from this far before it (room + a reference that
# slipped after an underrun: 20-120 ms measured on the echo rig) or, misaligned, after it
ECHO_BACK_S, ECHO_AHEAD_S = 0.5, 0.1
# nothing played for this long: no echo can come, and the microphone passes through untouched
# (the VAD reads raw audio in push-to-talk too). Both of WebRTC's streams pause together, its
# state kept for the next reply: it was ~75 % of hands-free's idle CPU (2 FFI calls / 10 ms)
IDLE_AFTER_S = 2.0


class EchoCancellerUnavailable(S2SError):
    """The echo canceller's package is missing or failed to start."""


def load_apm(noise_suppression: bool = True):
    """A WebRTC AudioProcessingModule, or EchoCancellerUnavailable saying what to install."""
    try:
        from livekit import rtc
    except Exception as exc:  # ImportError, or its native library failing to load
        raise EchoCancellerUnavailable(
            f"hands-free conversation needs the echo canceller from the 'livekit' package "
            f"({exc}): pip install \"s2s-desktop[hands-free]\"; push-to-talk works without it"
        ) from exc
    return rtc, rtc.AudioProcessingModule(
        echo_cancellation=True,
        noise_suppression=noise_suppression,
        high_pass_filter=True,
        auto_gain_control=False,  # levels stay as spoken: the VAD's thresholds assume that
    )


def to_int16(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


class ReferenceTimeline:
    """What the app played, resampled to 16 kHz and placed by time on a ring of HISTORY_S;
    `read(index)` gives the 10 ms played at that timeline sample (silence where nothing)."""

    def __init__(self, origin: float, history_s: float = HISTORY_S):
        self.origin = origin
        self.size = int(history_s * RATE)
        self._ring = np.zeros(self.size, np.float32)
        self._stamp = np.full(self.size, -1, np.int64)  # absolute index each slot holds
        self._next: int | None = None  # where the running stream's next sample goes
        self._expected_at: float | None = None  # when the running stream's next block plays
        self._placed_at = 0.0  # when the next block plays by where the stream was placed
        self._drift = 0.0  # how far the last block's own time was from that
        self._rate = 0
        self._resampler = None
        self._lock = threading.Lock()
        self.last_played_index = -1

    def index(self, t: float) -> int:
        return int(round((t - self.origin) * RATE))

    def add(self, pcm: np.ndarray, rate: int, played_at: float) -> None:
        pcm = np.asarray(pcm, dtype=np.float32).reshape(-1)
        if not pcm.size:
            return
        with self._lock:
            # judged on the input side: the resampler holds back a varying few hundred samples
            off_track = self._expected_at is None or abs(
                played_at - self._expected_at
            ) > RESTART_GAP_S
            self._expected_at = played_at + len(pcm) / rate
            if off_track or rate != self._rate:  # a new stream: resample it afresh
                self._next, self._rate = self.index(played_at), rate
                self._placed_at, self._drift = played_at, 0.0
                self._resampler = None
                if rate != RATE:
                    import soxr

                    self._resampler = soxr.ResampleStream(rate, RATE, 1, dtype="float32")
            else:
                self._follow_gap(played_at)
            self._placed_at += len(pcm) / rate
            if self._resampler is not None:
                pcm = self._resampler.resample_chunk(pcm)
            pos = self._next + np.arange(len(pcm))
            self._ring[pos % self.size] = pcm
            self._stamp[pos % self.size] = pos
            self._next += len(pcm)
            if np.any(pcm):
                self.last_played_index = self._next

    def _follow_gap(self, played_at: float) -> None:
        """A block that plays later (or sooner) than the stream so far, and the next one
        agreeing: the output had a gap (an underrun that dropped or delayed audio), so the
        reference moves by as much. One block off and the next back is the callback's jitter.
        Left alone, such gaps add up: on the echo rig the echo drifted 20-120 ms behind the
        reference within a reply, and the canceller lost the room each time."""
        drift = played_at - self._placed_at
        if abs(drift) >= DRIFT_S and abs(drift - self._drift) < DRIFT_S / 2:
            self._next += int(round(drift * RATE))
            self._placed_at, drift = played_at, 0.0
        self._drift = drift

    def read(self, start: int, n: int = FRAME) -> np.ndarray:
        if self.last_played_index < 0 or start - self.last_played_index > self.size:
            return np.zeros(n, np.float32)  # nothing but silence on the whole ring
        pos = start + np.arange(n)
        with self._lock:
            slots = pos % self.size
            return np.where(self._stamp[slots] == pos, self._ring[slots], 0.0).astype(np.float32)


class EchoCanceller:
    """Microphone audio cleaned of what the app plays. `reference()` from the speaker's thread,
    `clean()` from the listener's thread; both take monotonic times."""

    def __init__(self, origin: float, noise_suppression: bool = True, delay_hint_ms: int = 0):
        self._rtc, self._apm = load_apm(noise_suppression)
        self.timeline = ReferenceTimeline(origin)
        # AEC3 finds the delay itself; the hint is set once, as the API asks
        self._apm.set_stream_delay_ms(max(0, int(delay_hint_ms)))
        self._pending = np.zeros(0, np.float32)
        self._pending_index: int | None = None  # timeline index of _pending[0]
        self.last_input = np.zeros(0, np.float32)  # the microphone audio of clean()'s output
        # the loudest 10 ms of what was played that could echo in clean()'s output (mean square)
        self.last_reference_power = 0.0

    def reference(self, pcm: np.ndarray, rate: int, played_at: float) -> None:
        """Audio the app handed to the output device, starting at `played_at`."""
        self.timeline.add(pcm, rate, played_at)

    def clean(self, mic: np.ndarray, captured_at: float) -> np.ndarray:
        """16 kHz microphone audio whose first sample was captured at `captured_at`, cleaned;
        returned in whole 10 ms frames (a remainder waits for the next call)."""
        mic = np.asarray(mic, dtype=np.float32).reshape(-1)
        start = self.timeline.index(captured_at)
        if self._pending_index is None or abs(
            start - (self._pending_index + len(self._pending))
        ) > RESTART_GAP_S * RATE:  # first block, or the stream jumped (device reopened)
            self._pending, self._pending_index = np.zeros(0, np.float32), start
        self._pending = np.concatenate([self._pending, mic])
        n_frames = len(self._pending) // FRAME
        out = np.empty(n_frames * FRAME, np.float32)
        if self.idle(self._pending_index):
            out[:] = self._pending[: n_frames * FRAME]
            n_frames = 0  # nothing to process below
        for i in range(n_frames):
            frame = self._pending[i * FRAME : (i + 1) * FRAME]
            index = self._pending_index + i * FRAME
            out[i * FRAME : (i + 1) * FRAME] = self._process(frame, self.timeline.read(index))
        n = len(out)
        self.last_input = self._pending[:n]
        self.last_reference_power = self._reference_power(self._pending_index, n)
        self._pending = self._pending[n:]
        self._pending_index += n
        return out

    def idle(self, index: int) -> bool:
        """Nothing was played within IDLE_AFTER_S before timeline sample `index`, nor after."""
        return self.timeline.last_played_index < index - IDLE_AFTER_S * RATE

    def _reference_power(self, start: int, n: int) -> float:
        back, ahead = int(ECHO_BACK_S * RATE), int(ECHO_AHEAD_S * RATE)
        ref = self.timeline.read(start - back, (back + n + ahead) // FRAME * FRAME)
        return float(np.max(np.mean(np.square(ref.reshape(-1, FRAME)), axis=1))) if ref.size else 0.0

    def _process(self, mic: np.ndarray, far: np.ndarray) -> np.ndarray:
        rtc = self._rtc
        far_frame = rtc.AudioFrame(to_int16(far).tobytes(), RATE, 1, FRAME)
        self._apm.process_reverse_stream(far_frame)
        near = rtc.AudioFrame(to_int16(mic).tobytes(), RATE, 1, FRAME)
        self._apm.process_stream(near)
        return np.frombuffer(bytes(near.data), dtype=np.int16).astype(np.float32) / 32768.0

    def playing_recently(self, now: float, within_s: float = 0.3) -> bool:
        """The app played sound (not silence) within `within_s` of `now`: echo may still come."""
        last = self.timeline.last_played_index
        return last >= 0 and self.timeline.index(now) - last <= within_s * RATE


def erle_db(mic: np.ndarray, cleaned: np.ndarray) -> float:
    """Echo return loss enhancement: how much quieter the cleaned signal is than the
    microphone's, in dB, over the same stretch of echo-only audio."""
    n = min(len(mic), len(cleaned))
    before = float(np.mean(np.square(mic[:n], dtype=np.float64))) if n else 0.0
    after = float(np.mean(np.square(cleaned[:n], dtype=np.float64))) if n else 0.0
    return 10.0 * np.log10(max(before, 1e-12) / max(after, 1e-12))
