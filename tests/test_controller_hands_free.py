"""Hands-free conversation through the app's controller: a real HandsFreeSession and
listener (silero VAD) on a fake sound device whose "room" plays a spoken question. On opens
the microphone and off closes it; a question heard is sent with no key; nothing said turns
the mode off with a notice; a failing microphone or a missing echo canceller leaves the mode
off with a clear message while push-to-talk still works."""

from __future__ import annotations

import time

import numpy as np
import pytest

from s2s_desktop.hands_free.listener import HandsFreeListener, TurnTaking
from s2s_desktop.hands_free.session import HandsFreeSession, StreamingMicrophone
from tests.helpers.clips import read_wav
from tests.helpers.fake_sounddevice import FakeSoundDevice, Room
from tests.test_controller import hold, ready, rig  # noqa: F401 (rig is a fixture)


def hands_free(c, vad, sd):
    """The controller's session factory: the app's, less the echo canceller and Smart Turn
    (silence ends a turn), on the fake device."""
    mics = []

    def build(on_event):
        from s2s_desktop.engines.vad.silero_stream import SileroStream

        mic = StreamingMicrophone(c.settings.audio.input_device, sd=sd, keep_open=True)
        mics.append(mic)
        tuning = TurnTaking(use_turn_model=False,
                            timeout_s=c.settings.listen.hands_free_timeout_s)
        return HandsFreeSession(HandsFreeListener(SileroStream(vad), tuning=tuning), mic, on_event)

    c.hands_free_factory = build
    return mics


def test_on_opens_the_microphone_and_off_closes_it(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    mics = hands_free(c, vad, FakeSoundDevice(input_amplitude=0.0))
    c.set_hands_free(True)
    assert mics and mics[0].is_open and c.status()["hands_free"] is True
    assert c.detail == "Just speak: no key needed"
    c.set_hands_free(False)
    assert not mics[0].is_open and c.state == "idle" and c.detail == "Ready"


def test_a_question_heard_is_sent_with_no_key(qtbot, rig, vad, speech):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    room = Room()
    hands_free(c, vad, FakeSoundDevice(room=room))
    c.set_hands_free(True)
    question = read_wav(speech("What is the capital of France?"))
    room.say(question, at=time.monotonic() + 0.3)
    qtbot.waitUntil(lambda: c.state == "listening", timeout=5000)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=8000)
    sent = pipe.submitted[-1]
    assert sent["source"] == "hands-free" and sent["fed"] > 0 and rec.started == []
    fed = np.concatenate(pipe.fed[sent["turn"]])
    assert len(fed) / 16000 >= 0.8 * len(question) / 16000  # the whole question went to STT
    pipe.finish(sent["turn"])
    qtbot.waitUntil(lambda: c.state == "idle", timeout=2000)
    assert c.situation.hands_free_listening  # listening again for the next question
    c.set_hands_free(False)


def test_nothing_said_turns_it_off_with_a_notice(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig(listen__hands_free_timeout_s=0.5)
    ready(qtbot, c, pipe)
    mics = hands_free(c, vad, FakeSoundDevice(input_amplitude=0.0))
    sounds = []
    c.sounds = lambda name: sounds.append(name) or 0.0
    c.set_hands_free(True)
    qtbot.waitUntil(lambda: not c.situation.hands_free, timeout=5000)
    assert not mics[0].is_open
    assert "turned off: nothing was said for 0.5 s" in c.notices[-1]
    assert sounds == ["listen-start", "listen-stop"]


def test_a_press_inside_it_is_a_push_to_talk_turn_on_the_other_microphone(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    mics = hands_free(c, vad, FakeSoundDevice(input_amplitude=0.0))
    c.set_hands_free(True)
    c.hotkey_pressed()
    assert c.state == "listening" and not mics[0].is_open and len(rec.started) == 1
    qtbot.wait(300)
    c.hotkey_released()
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    assert len(mics) == 2 and mics[1].is_open  # listening again once the key's turn is sent
    c.set_hands_free(False)
    assert not mics[1].is_open


def test_a_double_tap_of_the_talk_key_toggles_it(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    hands_free(c, vad, FakeSoundDevice(input_amplitude=0.0))
    for on in (True, False):
        # the key's own times, as the hotkey helper stamps them (the app may be busy between)
        t0 = time.monotonic()
        c.hotkey_pressed(t0)
        qtbot.wait(70)
        c.hotkey_released(t0 + 0.06)  # a tap
        qtbot.wait(120)  # past the release grace
        c.hotkey_pressed(t0 + 0.25)
        assert c.situation.hands_free is on and pipe.submitted == []
        c.hotkey_released(t0 + 0.3)
        qtbot.wait(450)
    assert c.state == "idle"
    assert not any("presses under" in n for n in c.notices)  # the taps were not mistakes


def test_a_failing_microphone_leaves_it_off_and_push_to_talk_works(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    sd = FakeSoundDevice(inputs=(), outputs=("Built-in Speakers",))  # no microphone at all
    hands_free(c, vad, sd)
    c.set_hands_free(True)
    assert not c.situation.hands_free and c.state == "idle"
    assert "hands-free conversation is off" in c.notices[-1]
    assert "push-to-talk still works" in c.notices[-1]
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)


def test_a_new_input_device_moves_its_microphone_at_once(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    sd = FakeSoundDevice(input_amplitude=0.0)
    mics = hands_free(c, vad, sd)
    c.set_hands_free(True)
    assert mics[0].label.startswith("Built-in Microphone")
    moved = c.settings.copy()
    moved.audio.input_device = "USB Headset"  # Settings, or `s2s-desktop set audio.input_device=`
    c.apply_settings(moved)
    assert len(mics) == 2 and not mics[0].is_open and mics[1].is_open
    assert mics[1].label.startswith("USB Headset")
    assert [s.device for s in sd.open_streams()] == [1]  # only the new one is open
    assert c.situation.hands_free_listening and c.state == "idle"
    c.apply_settings(moved.copy())  # other settings: the microphone stays as it is
    assert len(mics) == 2 and mics[1].is_open
    c.set_hands_free(False)
    assert sd.open_streams() == []


def test_a_new_input_device_that_cannot_open_turns_it_off_with_the_reason(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    sd = FakeSoundDevice(input_amplitude=0.0)
    hands_free(c, vad, sd)
    c.set_hands_free(True)
    opens = sd.InputStream

    def busy(**kw):  # the headset is held by another program
        if kw["device"] == 1:
            raise RuntimeError("Device unavailable [PaErrorCode -9985]")
        return opens(**kw)

    sd.InputStream = busy
    moved = c.settings.copy()
    moved.audio.input_device = "USB Headset"
    c.apply_settings(moved)
    assert not c.situation.hands_free and sd.open_streams() == [] and c.state == "idle"
    notice = c.notices[-1]
    assert "hands-free conversation is off" in notice and "Device unavailable" in notice
    assert "choose another in Settings" in notice and "push-to-talk still works" in notice


def test_a_microphone_that_disappears_turns_it_off_and_the_reply_goes_on(qtbot, rig, vad):  # noqa: F811
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    sd = FakeSoundDevice(input_amplitude=0.0)
    mics = hands_free(c, vad, sd)
    sounds = []
    c.sounds = lambda name: sounds.append(name) or 0.0
    c.set_hands_free(True)
    hold(qtbot, c)  # a push-to-talk question, being answered when the microphone goes
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    pipe.events.first_audio.emit(pipe.turn)
    qtbot.waitUntil(lambda: c.state == "speaking", timeout=1000)
    assert mics[-1].is_open
    interrupts = pipe.interrupts
    for stream in sd.open_streams():
        if stream in [m._stream for m in mics]:
            stream.abort()  # unplugged: no more audio, the stream no longer active
    qtbot.waitUntil(lambda: not c.situation.hands_free, timeout=5000)
    assert not mics[-1].is_open and sd.open_streams() == []
    notice = c.notices[-1]
    assert "hands-free conversation stopped" in notice and "unplugged" in notice
    assert "push-to-talk still works" in notice and sounds[-1] == "error"
    assert c.state == "speaking" and pipe.interrupts == interrupts  # the reply was not cut
    pipe.finish(pipe.turn)
    qtbot.waitUntil(lambda: c.state == "idle", timeout=2000)
    hold(qtbot, c)  # and the key still asks
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)


def test_without_the_echo_canceller_wheel_it_says_how_to_install_it(qtbot, rig, monkeypatch):  # noqa: F811
    import sys

    from s2s_desktop.config import Settings
    from s2s_desktop.hands_free.build import HandsFreeBuilder

    monkeypatch.setitem(sys.modules, "livekit", None)  # the wheel is not installed
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    c.hands_free_factory = HandsFreeBuilder(Settings, speaker=None)
    c.set_hands_free(True)
    assert not c.situation.hands_free
    assert "livekit" in c.notices[-1] and "push-to-talk still works" in c.notices[-1]
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)


def test_the_app_starts_in_it_and_answers_a_spoken_question(qtbot, monkeypatch, tmp_path, vad,
                                                             speech):
    """listen.hands_free=true: once the models are loaded the app listens; a question said in
    the room is answered (scripted STT/LLM) and shown, with no key pressed."""
    from s2s_desktop.app import DesktopApp
    from s2s_desktop.audio.sink import CaptureSink
    from tests.helpers import scripted_engines as scripted
    from tests.helpers.fake_mic import FakeMicrophone

    monkeypatch.setenv("S2S_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("S2S_DATA_DIR", str(tmp_path / "data"))
    scripted.install(monkeypatch)
    s = scripted.settings(reply="Paris.", heard="Capital of France?")
    s.hotkey.enabled = False
    s.listen.hands_free = True

    class FakeQApp:
        def quit(self):
            pass

    ptt_mic = FakeMicrophone()
    app = DesktopApp(FakeQApp(), s, use_tray=False, mic=ptt_mic, speaker=CaptureSink())
    room = Room()
    apps_own = app.controller.hands_free_factory  # HandsFreeBuilder, as app.py wires it
    mics = hands_free(app.controller, vad, FakeSoundDevice(room=room))
    try:
        assert app.start()
        qtbot.waitUntil(lambda: app.controller.situation.hands_free_listening, timeout=10000)
        assert mics[0].is_open and app.actions.hands_free.isChecked()
        assert app.floating.state_label.text() == "Hands-free"
        room.say(read_wav(speech("What is the capital of France?")), at=time.monotonic() + 0.2)
        qtbot.waitUntil(lambda: "Paris." in app.window.view.toPlainText(), timeout=15000)
        assert app.controller.turn_info["source"] == "hands-free" and ptt_mic.opened == 0
        # the app's own listener hears words through the pipeline's STT (a voice over a
        # reply: "Stop." or "yeah"); a turn's live words: tests/test_hands_free_words.py
        said = read_wav(speech("Stop."))
        assert apps_own.transcript(said) == "Capital of France?"  # the scripted STT's words
        assert apps_own.words_so_far(1) is None  # the turn ended: no words are "so far"
        qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)
        assert mics[-1].is_open  # listening for the next question
        moved = app.settings.copy()  # as `s2s-desktop set audio.input_device=…` applies it
        moved.audio.input_device = "USB Headset"
        app.apply_settings(moved)
        assert len(mics) == 2 and not mics[0].is_open and mics[1].is_open
        assert mics[1].label.startswith("USB Headset")
    finally:
        app.shutdown()
        app.window.close()
        app.floating.close()
    assert not mics[-1].is_open  # closed with the app


def test_the_apps_session_hears_what_the_speaker_plays_only_while_it_runs(qtbot, rig):  # noqa: F811
    """The real builder: livekit's echo canceller, silero VAD and Smart Turn; the speaker's
    output is its echo reference while hands-free runs, and nothing after."""
    pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
    from s2s_desktop.hands_free.build import HandsFreeBuilder
    from s2s_desktop.hands_free.session import EchoReferenceSpeaker

    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    sd = FakeSoundDevice(input_amplitude=0.0)
    speaker = EchoReferenceSpeaker(sd=sd)
    c.hands_free_factory = HandsFreeBuilder(lambda: c.settings, speaker, sd=sd)
    c.set_hands_free(True)
    assert c.situation.hands_free_listening, c.notices
    echo = c._session.listener.echo
    mic = c._session.microphone
    assert speaker.on_played == echo.reference and mic.is_open
    c.set_hands_free(False)
    assert speaker.on_played is None and not mic.is_open


def test_listen_settings_changed_while_on_apply_at_once(qtbot, rig):  # noqa: F811
    """`set listen.turn_model=false` (silence alone ends a turn) or a new timeout while
    hands-free listens: the real builder's next session has them, with no off and on."""
    pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
    from s2s_desktop.hands_free.build import HandsFreeBuilder

    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    sd = FakeSoundDevice(input_amplitude=0.0)
    c.hands_free_factory = HandsFreeBuilder(lambda: c.settings, None, sd=sd)
    c.set_hands_free(True)
    first = c._session
    assert first.listener.tuning.use_turn_model and first.listener.turn_model is not None
    changed = c.settings.copy()
    changed.listen.turn_model, changed.listen.hands_free_timeout_s = False, 30.0
    c.apply_settings(changed)
    assert c._session is not first and not first.microphone.is_open
    assert not c._session.listener.tuning.use_turn_model
    assert c._session.listener.tuning.timeout_s == 30.0 and c._session.microphone.is_open
    c.set_hands_free(False)
    assert sd.open_streams() == []
