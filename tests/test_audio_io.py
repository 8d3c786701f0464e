"""Microphone and speaker over a fake sounddevice module that the test drives block by block:
pre-roll, devices by name with fallback, rate fallback, flush on barge-in, drain, and the
clear errors for no PortAudio, no device, and a device lost mid-recording. (The real
PortAudio path runs in test_app_e2e.py through PulseAudio null sinks.)"""

from __future__ import annotations

import builtins
import threading
import time

import numpy as np
import pytest

from s2s_desktop.audio.microphone import Microphone
from s2s_desktop.audio.speaker import SpeakerSink
from s2s_desktop.errors import AudioDeviceError


class FakePortAudioError(Exception):
    pass


class FakeStream:
    latency = 0.005

    def __init__(
        self,
        sd,
        kind,
        device=None,
        channels=1,
        samplerate=16000,
        dtype="float32",
        blocksize=0,
        callback=None,
        finished_callback=None,
        latency=None,
    ):
        if samplerate in sd.refuse_rates:
            raise FakePortAudioError(f"Invalid sample rate {samplerate}")
        self.kind, self.device, self.samplerate, self.blocksize = (
            kind,
            device,
            samplerate,
            blocksize,
        )
        self.callback, self.finished_callback = callback, finished_callback
        self.active = False
        sd.streams.append(self)

    def start(self):
        self.active = True

    def abort(self):
        self.active = False

    def close(self):
        self.active = False

    # the test plays the audio thread
    def feed(self, block: np.ndarray) -> None:
        self.callback(block.reshape(-1, 1).astype(np.float32), len(block), None, None)

    def pull(self, frames: int, status=None) -> np.ndarray:
        out = np.full((frames, 1), np.nan, np.float32)
        self.callback(out, frames, None, status)
        return out[:, 0].copy()

    def unplug(self):
        self.active = False
        self.finished_callback()


class FakeSD:
    def __init__(
        self, inputs=("Built-in Mic", "USB Headset"), outputs=("Speakers",), refuse_rates=()
    ):
        self.devices = []
        for name in inputs:
            self.devices.append(
                {
                    "name": name,
                    "index": len(self.devices),
                    "max_input_channels": 1,
                    "max_output_channels": 0,
                    "default_samplerate": 48000.0,
                }
            )
        for name in outputs:
            self.devices.append(
                {
                    "name": name,
                    "index": len(self.devices),
                    "max_input_channels": 0,
                    "max_output_channels": 2,
                    "default_samplerate": 48000.0,
                }
            )
        self.refuse_rates = set(refuse_rates)
        self.streams: list[FakeStream] = []

    def query_devices(self, device=None, kind=None):
        if device is None and kind is None:
            return list(self.devices)
        if device is None:
            key = "max_input_channels" if kind == "input" else "max_output_channels"
            return next(d for d in self.devices if d[key] > 0)
        return self.devices[device]

    def InputStream(self, **kw):  # noqa: N802 (sounddevice's names)
        return FakeStream(self, "input", **kw)

    def OutputStream(self, **kw):  # noqa: N802
        return FakeStream(self, "output", **kw)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def feed_seconds(mic, stream, clock, seconds, start_value=0.0, rate=16000, block=320):
    """Feed `seconds` of audio whose sample values count up (value = time in s)."""
    n_blocks = int(seconds * rate / block)
    for i in range(n_blocks):
        clock.t += block / rate
        values = start_value + (i * block + np.arange(block)) / rate
        stream.feed(values.astype(np.float32))
    return start_value + n_blocks * block / rate


# ---------------------------------------------------------------------- microphone


def test_preroll_keeps_what_was_said_before_the_press():
    sd, clock = FakeSD(), Clock()
    mic = Microphone(preroll_ms=300, sd=sd, clock=clock)
    mic.open()
    stream = sd.streams[-1]
    assert stream.samplerate == 16000 and stream.kind == "input"
    t = feed_seconds(mic, stream, clock, 2.0)  # 2 s of audio before the press
    mic.start_recording()
    feed_seconds(mic, stream, clock, 1.0, start_value=t)
    audio = mic.stop_recording()
    # at least 300 ms from before the press, then everything after it
    assert audio[0] <= t - 0.3 + 1e-3 and audio[-1] == pytest.approx(t + 1.0, abs=1e-3)
    assert 1.3 <= len(audio) / 16000 <= 1.35
    assert np.all(np.diff(audio) > 0)  # nothing lost, nothing twice


def test_a_live_recording_is_passed_on_as_it_grows_preroll_first():
    sd, clock = FakeSD(), Clock()
    mic = Microphone(preroll_ms=300, sd=sd, clock=clock)
    mic.open()
    stream = sd.streams[-1]
    t = feed_seconds(mic, stream, clock, 1.0)
    chunks = []
    mic.start_recording(on_chunk=chunks.append)
    assert sum(len(c) for c in chunks) >= 0.3 * 16000  # the pre-roll, at once
    feed_seconds(mic, stream, clock, 0.5, start_value=t)
    audio = mic.stop_recording()
    live = np.concatenate(chunks)
    assert np.array_equal(live, audio)  # the same samples, in the same order
    stream.feed(np.ones(320, np.float32))
    assert len(np.concatenate(chunks)) == len(audio)  # nothing after the stop


def test_a_live_recording_at_48khz_is_passed_on_at_16khz():
    sd, clock = FakeSD(refuse_rates={16000}), Clock()
    mic = Microphone(sd=sd, clock=clock)
    mic.open()
    chunks = []
    mic.start_recording(since=clock.t, on_chunk=chunks.append)
    feed_seconds(mic, sd.streams[-1], clock, 1.0, rate=48000, block=960)
    mic.stop_recording()
    assert sum(len(c) for c in chunks) == pytest.approx(16000, abs=400)


def test_recording_since_a_moment_drops_older_preroll():
    sd, clock = FakeSD(), Clock()
    mic = Microphone(preroll_ms=500, sd=sd, clock=clock)
    mic.open()
    stream = sd.streams[-1]
    t = feed_seconds(mic, stream, clock, 1.0)
    reply_ended = clock.t - 0.1  # the assistant stopped talking 100 ms ago
    mic.start_recording(since=reply_ended)
    audio = mic.stop_recording()
    assert len(audio) / 16000 == pytest.approx(0.1, abs=0.021) and audio[-1] < t


def test_level_and_recording_cap():
    sd, clock = FakeSD(), Clock()
    mic = Microphone(max_record_s=0.5, sd=sd, clock=clock)
    mic.open()
    stream = sd.streams[-1]
    stream.feed(np.full(320, 0.25, np.float32))
    assert mic.level == pytest.approx(0.25)
    mic.start_recording(since=clock.t)
    feed_seconds(mic, stream, clock, 2.0)
    assert len(mic.stop_recording()) <= int(0.5 * 16000) + 320


def test_device_by_name_and_fallback_to_the_default_with_a_notice():
    sd, notices = FakeSD(), []
    mic = Microphone(device_name="USB Headset", sd=sd, on_notice=notices.append)
    mic.open()
    assert sd.streams[-1].device == 1 and mic.label == "USB Headset" and notices == []
    mic = Microphone(device_name="usb head", sd=sd, on_notice=notices.append)
    mic.open()
    assert sd.streams[-1].device == 1  # a part of the name, any case
    mic = Microphone(device_name="Studio Mic", sd=sd, on_notice=notices.append)
    mic.open()
    assert sd.streams[-1].device is None
    assert "'Studio Mic' is not connected" in notices[-1] and "default" in notices[-1]


def test_a_device_that_refuses_16khz_is_recorded_at_its_rate_and_resampled():
    sd, clock = FakeSD(refuse_rates={16000}), Clock()
    mic = Microphone(sd=sd, clock=clock)
    mic.open()
    stream = sd.streams[-1]
    assert mic.rate == 48000 == stream.samplerate
    mic.start_recording(since=clock.t)
    feed_seconds(mic, stream, clock, 1.0, rate=48000, block=960)
    assert len(mic.stop_recording()) == pytest.approx(16000, abs=40)


def test_no_input_device_is_a_clear_error():
    with pytest.raises(AudioDeviceError, match="no microphone found"):
        Microphone(sd=FakeSD(inputs=())).open()


def test_no_portaudio_is_a_clear_error(monkeypatch):
    real_import = builtins.__import__

    def no_portaudio(name, *args, **kw):
        if name == "sounddevice":
            raise OSError("PortAudio library not found")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_portaudio)
    with pytest.raises(AudioDeviceError, match="PortAudio is not installed.*libportaudio2"):
        Microphone().open()
    with pytest.raises(AudioDeviceError, match="PortAudio"):
        SpeakerSink().play(np.zeros(100, np.float32), 16000, 1)


def test_a_device_lost_mid_recording_is_reported_and_reopened_next_time():
    sd, clock = FakeSD(), Clock()
    mic = Microphone(sd=sd, clock=clock)
    mic.open()
    stream = sd.streams[-1]
    mic.start_recording()
    feed_seconds(mic, stream, clock, 0.3)
    stream.unplug()
    with pytest.raises(AudioDeviceError, match="unplugged"):
        mic.check()
    with pytest.raises(AudioDeviceError, match="unplugged"):
        mic.stop_recording()
    assert not mic.recording
    mic.start_recording()  # plugged back in: a fresh stream
    assert len(sd.streams) == 2 and sd.streams[-1].active


def test_a_stream_that_stops_delivering_audio_counts_as_lost():
    sd, clock = FakeSD(), Clock()
    mic = Microphone(sd=sd, clock=clock)
    mic.open()
    mic.start_recording()
    feed_seconds(mic, sd.streams[-1], clock, 0.1)
    clock.t += 2.0  # no callbacks for 2 s
    with pytest.raises(AudioDeviceError, match="stopped delivering audio"):
        mic.check()
    mic.open()
    clock.t += 6.0  # a new stream that never delivers its first block
    with pytest.raises(AudioDeviceError, match="stopped delivering audio"):
        mic.check()


# ---------------------------------------------------------------------- speaker


def tone(seconds, rate=22050, value=0.5):
    return np.full(int(seconds * rate), value, np.float32)


def test_speaker_plays_what_it_is_given_then_silence():
    sd = FakeSD()
    sink = SpeakerSink(sd=sd)
    sink.play(tone(0.01, value=0.5), 22050, turn=1)
    sink.play(tone(0.01, value=-0.5), 22050, turn=1)
    stream = sd.streams[-1]
    assert stream.kind == "output" and stream.samplerate == 22050
    out = stream.pull(600)
    assert np.all(out[:220] == 0.5) and np.all(out[220:440] == -0.5)
    assert np.all(out[440:] == 0.0)  # an empty queue plays silence, never garbage


def test_flush_silences_the_next_block_at_once():
    sd = FakeSD()
    sink = SpeakerSink(sd=sd)
    sink.play(tone(2.0), 22050, turn=3)
    stream = sd.streams[-1]
    assert np.all(stream.pull(441) == 0.5)
    sink.flush()
    assert np.all(stream.pull(441) == 0.0) and sink.queued_seconds() == 0.0


def test_a_paused_reply_is_silent_and_resumes_where_it_stopped():
    """Hands-free hears a voice over the reply: it goes quiet at once, and after a "yeah"
    goes on with the next word, not from the start and without losing any."""
    sd = FakeSD()
    sink = SpeakerSink(sd=sd)
    sink.play(np.linspace(0.1, 0.9, 22050, dtype=np.float32), 22050, turn=4)
    stream = sd.streams[-1]
    before = stream.pull(441)
    sink.pause()
    held = stream.pull(2205)
    fade = np.flatnonzero(held)  # the voice ramps down over 5 ms, no click, then silence
    assert sink.paused and 0 < len(fade) <= 0.006 * 22050 and fade[-1] == len(fade) - 1
    assert held[0] >= 0.9 * before[-1] and held[fade[-1]] < 0.1 * before[-1]
    assert np.all(stream.pull(2205) == 0.0)
    sink.resume()
    after = stream.pull(22050)
    heard = np.concatenate([before, held, after])
    assert np.count_nonzero(heard) == 22050  # nothing dropped while it waited
    assert after[200] > before[-1]  # it went on from where it stopped (after a short fade in)
    assert not sink.paused


def test_a_pause_ends_with_a_flush_or_by_itself():
    sd = FakeSD()
    sink = SpeakerSink(sd=sd)
    sink.play(tone(2.0), 22050, turn=5)
    stream = sd.streams[-1]
    sink.pause()
    sink.flush()  # a barge-in drops the reply: the next one is not held
    sink.play(tone(0.5), 22050, turn=6)
    assert np.all(stream.pull(441) == 0.5)
    sink.pause(max_s=0.05)  # nobody resumed it (a lost event): it does not stay mute
    assert np.all(stream.pull(441)[int(0.006 * 22050):] == 0.0)  # silent after its fade
    time.sleep(0.1)
    assert np.count_nonzero(stream.pull(441)) > 400


def test_drain_waits_until_the_turn_was_played_or_stopped():
    sd = FakeSD()
    sink = SpeakerSink(sd=sd)
    sink.play(tone(0.2), 22050, turn=1)
    stream = sd.streams[-1]
    done = threading.Event()
    threading.Thread(target=lambda: (sink.drain(1, threading.Event()), done.set())).start()
    time.sleep(0.05)
    assert not done.is_set()
    for _ in range(11):
        stream.pull(441)
    assert done.wait(1.0)
    sink.play(tone(5.0), 22050, turn=2)
    stop = threading.Event()
    stop.set()  # barge-in: drain returns without waiting
    t0 = time.monotonic()
    sink.drain(2, stop)
    assert time.monotonic() - t0 < 0.05


def test_a_speaker_that_keeps_underrunning_is_reopened_and_loses_nothing_queued(caplog):
    from types import SimpleNamespace

    sd = FakeSD()
    sink = SpeakerSink(sd=sd)
    sink.play(tone(1.0), 22050, turn=1)
    first = sd.streams[-1]
    late = SimpleNamespace(output_underflow=True)  # PortAudio: the device ran dry before this
    played = [first.pull(441, late) for _ in range(6)]
    with caplog.at_level("WARNING", logger="s2s_desktop.audio.speaker"):
        sink.play(tone(0.5, value=0.25), 22050, turn=1)  # the reply's next chunk
    again = sd.streams[-1]
    assert again is not first and again.active and not first.active
    assert again.blocksize == 2 * first.blocksize
    assert "ran out of audio 6 times" in caplog.text and "40 ms blocks" in caplog.text
    played.append(again.pull(int(1.6 * 22050)))
    heard = np.concatenate(played)
    assert np.sum(heard == 0.5) == 22050 and np.sum(heard == 0.25) == int(0.5 * 22050)


def test_underruns_in_silence_reopen_nothing():
    from types import SimpleNamespace

    sd = FakeSD()
    sink = SpeakerSink(sd=sd)
    sink.play(tone(0.01), 22050, turn=1)
    stream = sd.streams[-1]
    for _ in range(10):  # nothing queued: an underrun is silence late, nothing lost
        stream.pull(441, SimpleNamespace(output_underflow=True))
    sink.play(tone(0.1), 22050, turn=2)
    assert sd.streams[-1] is stream


def test_speaker_resamples_when_the_device_refuses_the_voice_rate():
    sd = FakeSD(refuse_rates={22050})
    sink = SpeakerSink(sd=sd)
    sink.play(tone(1.0), 22050, turn=1)
    assert sink.rate == 48000
    assert sink.queued_seconds() == pytest.approx(1.0, abs=0.01)


def test_speaker_by_name_falls_back_and_reopens_after_a_loss():
    sd, notices = FakeSD(), []
    sink = SpeakerSink(device_name="HDMI", sd=sd, on_notice=notices.append)
    sink.play(tone(0.1), 22050, turn=1)
    assert "'HDMI' is not connected" in notices[-1]
    sd.streams[-1].unplug()
    sink.play(tone(0.1), 22050, turn=2)
    assert len(sd.streams) == 2 and sd.streams[-1].active


def test_no_output_device_is_a_clear_error():
    with pytest.raises(AudioDeviceError, match="no speaker found"):
        SpeakerSink(sd=FakeSD(outputs=())).play(tone(0.1), 22050, turn=1)
