"""The echo canceller: a reply played at the device's rate comes back into the microphone
through a simulated room (80 ms later, attenuated, with reflections); the cleaned signal must
lose it, keep the user's own voice, and a missing wheel must say what to install."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import soxr

from s2s_desktop.audio import echo
from s2s_desktop.audio.echo import EchoCancellerUnavailable, ReferenceTimeline, erle_db
from tests.helpers.clips import read_wav, silence

T0 = 1000.0  # monotonic time the simulation starts at
DEVICE_RATE = 22050  # the voice's rate: what the speaker callback hands the device


def room(far16: np.ndarray, delay_s: float = 0.08, gain: float = 0.3) -> np.ndarray:
    """What the microphone hears of `far16`: a direct path and two weaker reflections."""
    out = np.zeros(len(far16) + 16000, np.float32)
    for extra_s, g in ((0.0, gain), (0.013, gain * 0.4), (0.031, gain * 0.2)):
        d = int((delay_s + extra_s) * 16000)
        out[d : d + len(far16)] += g * far16
    return out


def run_canceller(canceller, far: np.ndarray, mic: np.ndarray, block_s: float = 0.02,
                  lead_blocks: int = 2):
    """Feed the reference (device rate) and the microphone (16 kHz) block by block, each with
    its time, as the speaker's and the microphone's callbacks would: the speaker hands a block
    over `lead_blocks` before it is heard (its output latency), the microphone's block is
    processed after it was captured."""
    n_blocks = int(len(mic) / 16000 / block_s)
    fb, mb = int(DEVICE_RATE * block_s), int(16000 * block_s)
    out = []
    for k in range(-lead_blocks, n_blocks):
        ahead = k + lead_blocks
        canceller.reference(far[ahead * fb : (ahead + 1) * fb], DEVICE_RATE,
                            T0 + ahead * block_s)
        if k >= 0:
            out.append(canceller.clean(mic[k * mb : (k + 1) * mb], T0 + k * block_s))
    return np.concatenate(out)


def test_timeline_places_audio_by_time_and_forgets_old_audio():
    timeline = ReferenceTimeline(origin=T0, history_s=1.0)
    tone = np.linspace(-0.5, 0.5, 160, dtype=np.float32)
    timeline.add(tone, 16000, T0 + 0.5)
    assert np.allclose(timeline.read(timeline.index(T0 + 0.5)), tone)
    assert not timeline.read(timeline.index(T0 + 0.3)).any()  # nothing played then
    assert not timeline.read(timeline.index(T0 + 1.5)).any()  # same ring slot, another time


def test_timeline_resamples_the_device_rate():
    timeline = ReferenceTimeline(origin=T0)
    second = np.sin(np.arange(DEVICE_RATE) * 2 * np.pi * 440 / DEVICE_RATE).astype(np.float32)
    for k in range(50):  # 20 ms blocks, continuous
        timeline.add(second[k * 441 : (k + 1) * 441], DEVICE_RATE, T0 + k * 0.02)
    middle = timeline.read(timeline.index(T0 + 0.5), 1600)
    assert 0.6 < np.sqrt(np.mean(middle**2)) / np.sqrt(0.5) < 1.1  # a 440 Hz sine of amplitude 1


def test_timeline_follows_a_gap_in_the_output_not_one_late_callback():
    """An output underrun delays the rest of the reply by 30 ms (every later block's play time
    says so): the reference moves with it. One callback reporting a late time and the next
    back on time is jitter: nothing moves."""
    timeline = ReferenceTimeline(origin=T0)
    late = {5: 0.01}  # one block's time 10 ms off, then back
    for k in range(20):
        shift = 0.03 if k >= 10 else late.get(k, 0.0)
        timeline.add(np.full(320, k + 1, np.float32), 16000, T0 + k * 0.02 + shift)

    def played_at(t):
        return timeline.read(timeline.index(t) + 100, 1)[0]

    assert played_at(T0 + 7 * 0.02) == 8  # after the jitter, where it was
    assert played_at(T0 + 12 * 0.02 + 0.03) == 13  # after the gap, 30 ms later
    assert played_at(T0 + 19 * 0.02 + 0.03) == 20


@pytest.fixture
def canceller():
    pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
    return echo.EchoCanceller(origin=T0)


def test_reply_echo_is_removed_and_the_users_voice_kept(speech, canceller):
    reply16 = read_wav(speech(
        "The capital of France is Paris. It is known for the Eiffel Tower, its museums and "
        "its cafes. Many people visit it every year."
    ))
    far = soxr.resample(reply16, 16000, DEVICE_RATE).astype(np.float32)
    user = read_wav(speech("What is the weather like tomorrow?"))
    echo_in_mic = room(reply16)
    mic = np.concatenate([echo_in_mic, silence(0.5), user, silence(0.5)])
    far = np.concatenate([far, np.zeros(int((len(mic) - len(reply16)) / 16000 * DEVICE_RATE)
                                        + DEVICE_RATE, np.float32)])
    cleaned = run_canceller(canceller, far, mic)

    settled = slice(int(1.5 * 16000), len(reply16))  # after AEC3 has found the delay
    erle = erle_db(mic[settled], cleaned[settled])
    assert erle >= 15.0, f"echo return loss enhancement {erle:.1f} dB"

    start = len(echo_in_mic) + 8000
    kept = erle_db(mic[start : start + len(user)], cleaned[start : start + len(user)])
    assert kept < 6.0, f"the user's voice lost {kept:.1f} dB"


def test_at_idle_the_microphone_passes_untouched_and_the_next_reply_is_cancelled_at_once(
        speech, canceller):
    """Nothing played for IDLE_AFTER_S: the canceller does no work (hands-free's idle CPU);
    the next reply is cancelled from its start, WebRTC's state kept from the last one."""
    reply16 = read_wav(speech("The capital of France is Paris. It is known for its museums."))
    gap = 5.0  # seconds of a quiet room between the replies
    rng = np.random.default_rng(7)
    room_noise = (rng.standard_normal(int(gap * 16000)) * 0.002).astype(np.float32)
    first = room(reply16)
    mic = np.concatenate([first, room_noise, room(reply16)])
    far16 = np.concatenate([reply16, np.zeros(len(first) - len(reply16) + len(room_noise),
                                              np.float32), reply16, np.zeros(16000, np.float32)])
    far = soxr.resample(far16, 16000, DEVICE_RATE).astype(np.float32)
    cleaned = run_canceller(canceller, far, mic)

    second = len(first) + len(room_noise)
    # from IDLE_AFTER_S after the first reply's echo to just before the second is handed over
    quiet = slice(len(first) + int((echo.IDLE_AFTER_S + 0.5) * 16000), second - 1600)
    assert np.array_equal(cleaned[quiet], mic[quiet])  # not processed: as the microphone heard it
    early = slice(second + 1600, second + 16000)  # its first second, from 0.1 s
    erle = erle_db(mic[early], cleaned[early])
    assert erle >= 15.0, f"the reply after a pause was cancelled by only {erle:.1f} dB at first"


def test_missing_wheel_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "livekit", None)  # import livekit raises ImportError
    with pytest.raises(EchoCancellerUnavailable, match=r"s2s-desktop\[hands-free\].*push-to-talk"):
        echo.EchoCanceller(origin=T0)
