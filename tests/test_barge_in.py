"""Barge-in by voice on real speech (espeak), the real silero VAD, end-of-turn model and echo
canceller, in a simulated room whose loudspeaker obeys the listener as the app's does: a voice
over the reply pauses it, "Stop, what is the capital of Italy?" then becomes the next turn
with the reply dropped, while "yeah", "mm-hm", "okay" and a cough let the reply go on where it
stopped; the app's own voice, even with a reference that slipped (an output underrun), starts
no turn."""

from __future__ import annotations

import numpy as np
import pytest

from s2s_desktop.audio import echo as echo_module
from s2s_desktop.engines.vad.silero_stream import SileroStream
from s2s_desktop.hands_free.listener import HandsFreeEventKind, HandsFreeListener, TurnTaking
from tests.conftest import listen
from tests.helpers.clips import read_wav, silence, white_noise

pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')

T0 = 700.0
BLOCK = 1024  # 64 ms, as HandsFreeSession opens the microphone
RATE = 16000
Kind = HandsFreeEventKind
REPLY = ("That is a good question. The short answer is that it depends on a few things. Let me "
         "explain the most important one first, and then we can go into the details.")


@pytest.fixture(scope="module")
def reply(speech):
    return read_wav(speech(REPLY, voice="en-gb"))


class Room:
    """A loudspeaker playing `reply` (paused, resumed and flushed by the listener's events, as
    HandsFreeSession does to the app's speaker) whose sound reaches the microphone 90 ms later
    at `gain`, plus what the user says there. `slip_at_s`: from then on the reference the
    canceller is told about is `slip_ms` early (an underrun the output's timestamps missed)."""

    def __init__(self, reply, user, user_at_s, gain=0.4, slip_at_s=None, slip_ms=40):
        self.reply, self.pos, self.paused, self.flushed = reply, 0, False, False
        self.user, self.user_at = user, int(user_at_s * RATE)
        self.gain, self.delay = gain, int(0.09 * RATE)
        self.slip_at = None if slip_at_s is None else int(slip_at_s * RATE)
        self.slip = int(slip_ms / 1000 * RATE)
        self.played: list[np.ndarray] = []  # what the loudspeaker gave out, block by block

    def on(self, event) -> None:
        if event.kind is Kind.REPLY_PAUSED:
            self.paused = True
        elif event.kind is Kind.REPLY_RESUMED:
            self.paused = False
        elif event.kind is Kind.BARGE_IN:
            self.flushed = True

    def run(self, hf, seconds) -> list:
        events, heard = [], np.zeros(0, np.float32)
        for k in range(int(seconds * RATE) // BLOCK):
            out = np.zeros(BLOCK, np.float32)
            if not (self.paused or self.flushed) and self.pos < len(self.reply):
                chunk = self.reply[self.pos : self.pos + BLOCK]
                out[: len(chunk)], self.pos = chunk, self.pos + len(chunk)
            self.played.append(out)
            t = T0 + k * BLOCK / RATE
            hf.replying = self.pos < len(self.reply) and not self.flushed
            lead = self.slip if self.slip_at is not None and k * BLOCK >= self.slip_at else 0
            hf.echo.reference(out, RATE, t - lead / RATE)
            heard = np.concatenate([heard, out])
            start = k * BLOCK
            echo = np.zeros(BLOCK, np.float32)
            src = heard[max(0, start - self.delay) : start + BLOCK - self.delay]
            echo[BLOCK - len(src) :] = self.gain * src if start >= self.delay else 0
            mic = echo.copy()
            u0 = start - self.user_at
            if 0 <= u0 + BLOCK and u0 < len(self.user):
                part = self.user[max(0, u0) : u0 + BLOCK]
                mic[max(0, -u0) : max(0, -u0) + len(part)] += part
            for event in hf.process(mic, t):
                self.on(event)
                events.append(event)
        return events

    def loud_after(self, seconds) -> bool:
        """The loudspeaker played the reply after `seconds` into the room."""
        played = np.concatenate(self.played)[int(seconds * RATE) :]
        return bool(np.any(np.abs(played) > 0.01))


def listener(vad, turn_model, transcript=None):
    hf = HandsFreeListener(SileroStream(vad), turn_model, echo_module.EchoCanceller(origin=T0),
                           TurnTaking())
    hf.transcript = transcript
    return hf


def kinds(events):
    return [e.kind for e in events]


def test_stop_over_the_reply_pauses_it_then_takes_the_turn(speech, vad, turn_model, reply):
    question = read_wav(speech("Stop, what is the capital of Italy?"))
    room = Room(reply, np.concatenate([question, silence(0.1)]), user_at_s=2.0)
    events = room.run(listener(vad, turn_model), 6.0)
    assert kinds(events) == [Kind.REPLY_PAUSED, Kind.BARGE_IN, Kind.TURN_ENDED]
    paused, barged, ended = events
    onset = T0 + 2.0 + np.flatnonzero(np.abs(question) > 0.02)[0] / RATE
    assert onset < paused.at < barged.at  # held at the voice's onset, dropped once it is a turn
    assert paused.at - onset < 0.35  # on "Stop," (audio time), not on the words after it
    assert not room.loud_after(paused.at - T0 + 0.07)  # silent from the pause (one block on)
    assert room.pos < len(reply)  # the rest of the reply was never played
    assert len(ended.audio) >= len(question) - 3200  # the turn holds the whole question


@pytest.mark.parametrize("said", ["Yeah.", "Mm-hm.", "Okay."])
def test_a_backchannel_lets_the_reply_go_on(speech, vad, turn_model, reply, said):
    sound = read_wav(speech(said))
    room = Room(reply, sound, user_at_s=2.0)
    events = room.run(listener(vad, turn_model), len(reply) / RATE + 3.0)
    assert Kind.BARGE_IN not in kinds(events) and Kind.SPEECH_STARTED not in kinds(events)
    assert kinds(events) in ([], [Kind.REPLY_PAUSED, Kind.REPLY_RESUMED])
    assert room.pos == len(reply)  # all of the reply was played, the pause lost none of it


def test_a_cough_over_the_reply_does_not_stop_it(vad, turn_model, reply):
    rng = np.random.default_rng(1)
    cough = white_noise(0.18, 0.3, seed=2) * np.hanning(int(0.18 * RATE)).astype(np.float32)
    cough += 0.05 * rng.standard_normal(len(cough)).astype(np.float32)
    room = Room(reply, cough, user_at_s=2.0)
    events = room.run(listener(vad, turn_model), len(reply) / RATE + 2.0)
    assert Kind.BARGE_IN not in kinds(events) and room.pos == len(reply)


def test_a_short_word_that_is_not_a_backchannel_takes_the_turn(speech, vad, turn_model, reply,
                                                               starter_stt_model):
    """ "Stop." is as short as "yeah": its words decide (where the app has a transcript)."""
    stop = read_wav(speech("Stop."))
    room = Room(reply, stop, user_at_s=2.0)
    words = lambda audio: listen(starter_stt_model, audio, RATE)  # noqa: E731
    events = room.run(listener(vad, turn_model, transcript=words), 5.0)
    assert kinds(events)[:2] == [Kind.REPLY_PAUSED, Kind.BARGE_IN]
    assert room.pos < len(reply)


def test_own_voice_with_a_slipped_reference_starts_no_turn(vad, turn_model, reply):
    """After an output underrun the reference the canceller is given can be tens of ms off
    what the room hears, and the canceller loses the room for a while: its echo must still
    neither start a turn nor drop the reply."""
    room = Room(reply, np.zeros(0, np.float32), user_at_s=0.0, slip_at_s=3.0, slip_ms=40)
    events = room.run(listener(vad, turn_model), len(reply) / RATE + 2.0)
    assert Kind.BARGE_IN not in kinds(events) and Kind.SPEECH_STARTED not in kinds(events)
    assert room.pos == len(reply)


class ScriptedVAD:
    """A VAD stream that hears voice exactly where the script says (one entry per 32 ms)."""

    def __init__(self, voiced: list[bool]):
        self.voiced = list(voiced)

    def push(self, block):
        n = len(block) // 512
        said, self.voiced = self.voiced[:n], self.voiced[n:]
        return [0.9 if v else 0.0 for v in said] + [0.0] * (n - len(said))


class SilentEcho:
    """A canceller that hands the microphone on as it is; the reply's last sound was played
    at `last_sound_at`."""

    def __init__(self, last_sound_at: float):
        self.last_sound_at = last_sound_at
        self.last_input = np.zeros(0, np.float32)
        self.last_reference_power = 0.0

    def clean(self, block, captured_at):
        self.last_input = block
        return block

    def playing_recently(self, now, within_s=0.3):
        return now - self.last_sound_at <= within_s


@pytest.mark.parametrize("ends_after_sound_s, pauses_again", [(0.1, False), (0.6, True)])
def test_a_voice_that_ends_with_the_replys_sound_was_its_echo(ends_after_sound_s, pauses_again):
    """On a loaded machine the echo went on ~250 ms after the pause (output buffer, room, the
    VAD's hangover) and the reply paused again every second. Speech that ends just after the
    reply's last sound was its echo: for a while only the guard may pause it; a voice that
    goes on well after that was the user, and a voice may pause the reply again at once."""
    w = 0.032
    pause_run, after = 4, 10  # 128 ms pause the reply, then 320 ms more speech while paused
    quiet = 20  # 640 ms of silence: resumed
    script = [True] * (pause_run + after) + [False] * quiet + [True] * 6 + [False] * 10
    hf = HandsFreeListener(ScriptedVAD(script), None, None, TurnTaking(use_turn_model=False))
    speech_end = T0 + (pause_run + after) * w
    hf.echo = SilentEcho(last_sound_at=speech_end - ends_after_sound_s)
    hf.guard.judge = lambda *args, **kw: False  # never "well above the echo": the guard is off
    hf.guard.louder_than_echo = False
    hf.guard.canceller_working = lambda: True  # so only a working canceller lets a voice pause
    hf.replying = True
    events = []
    for k in range(len(script) // 2):  # 64 ms blocks
        events += hf.process(np.zeros(1024, np.float32), T0 + k * 2 * w)
    assert kinds(events)[:2] == [Kind.REPLY_PAUSED, Kind.REPLY_RESUMED]
    assert (Kind.REPLY_PAUSED in kinds(events)[2:]) is pauses_again
    assert Kind.BARGE_IN not in kinds(events)


def test_the_words_are_asked_for_once_per_pause_before_the_turn_model():
    """Hands-free's answer starts when its transcript is ready: STT starts on the words so far
    after `words_after_ms` of silence, once per pause, before the end-of-turn model is asked
    (it ran only at the model's check, 100 ms later, and the decision then waited for it)."""
    w = 0.032
    script = [True] * 20 + [False] * 4 + [True] * 10 + [False] * 30  # a short pause, the end
    calls: list[tuple[str, int]] = []

    class Model:
        def probability(self, audio):
            calls.append(("model", len(audio)))
            return 0.99

    hf = HandsFreeListener(ScriptedVAD(script), Model(), None, TurnTaking())
    hf.on_pause = lambda: calls.append(("words", hf._silence))
    events = []
    for k in range(len(script) // 2):
        events += hf.process(np.zeros(1024, np.float32), T0 + k * 2 * w)
    assert [c[0] for c in calls] == ["words", "words", "model"]
    assert [c[1] for c in calls if c[0] == "words"] == [2, 2]  # 64 ms of silence each time
    assert kinds(events) == [Kind.SPEECH_STARTED, Kind.TURN_ENDED]
