"""The everyday features in the whole app (offscreen, scripted engines, a fake microphone):
typing a question in the conversation window, Stop (button, Esc, tray, command), Copy last
answer and per-message copy, timers in the tray menu and their ring, and earcons."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QGuiApplication

from s2s_desktop.assistant.earcons import EARCON_TURN, Earcon, sound
from s2s_desktop.pipeline.turns import FinishedTurn
from tests.helpers.fake_mic import FakeMicrophone
from tests.test_ui import desktop  # noqa: F401  (the fixture)


def menu_texts(app) -> list[str]:
    return [a.text() for a in app.tray.menu.actions() if a.isVisible() and not a.isSeparator()]


def type_question(qtbot, app, text: str) -> None:
    box = app.window.ask_bar.input
    box.setText(text)
    qtbot.keyClick(box, Qt.Key.Key_Return)


def finished(app, turn: int) -> FinishedTurn | None:
    return app.everyday.records.get(turn)


def test_a_typed_question_is_answered_shown_spoken_and_kept(qtbot, desktop):  # noqa: F811
    app = desktop(reply="Tokyo is the capital of Japan.")
    type_question(qtbot, app, "What is the capital of Japan?")
    assert app.window.ask_bar.input.text() == ""  # sent, box emptied
    turn = app.controller.current_turn
    qtbot.waitUntil(lambda: finished(app, turn) is not None and app.controller.state == "idle",
                    timeout=10000)
    rec = finished(app, turn)
    assert rec.transcript == "What is the capital of Japan?" and rec.answered_by == "llm"
    assert rec.reply == "Tokyo is the capital of Japan." and rec.reason == "ok"
    assert len(app.speaker.audio(turn)) > 0  # spoken like a spoken turn
    qtbot.waitUntil(lambda: app.window.entries.get(turn) is not None
                    and app.window.entries[turn].reason == "ok", timeout=5000)
    assert "Tokyo" in app.window.view.toPlainText()
    assert app.history.load()[0][-1].user == "What is the capital of Japan?"
    # an empty box sends nothing
    type_question(qtbot, app, "   ")
    assert app.controller.current_turn == turn


def test_stop_button_esc_tray_and_command_silence_the_reply(qtbot, desktop):  # noqa: F811
    app = desktop(reply=" ".join(f"word{i}." for i in range(60)), word_delay=0.05)
    stop_ways = [
        lambda: qtbot.mouseClick(app.window.ask_bar.stop_button, Qt.MouseButton.LeftButton),
        lambda: qtbot.keyClick(app.window, Qt.Key.Key_Escape),
        lambda: app.everyday.stop_speaking.trigger(),
        lambda: app.server.dispatch(b'{"command": "stop"}'),
    ]
    app.window.show()
    for stop in stop_ways:
        type_question(qtbot, app, "Tell me a long story")
        turn = app.controller.current_turn
        qtbot.waitUntil(lambda t=turn: len(app.speaker.audio(t)) > 0, timeout=10000)
        assert app.window.ask_bar.stop_button.isEnabled()
        assert app.everyday.stop_speaking.isEnabled()
        stop()
        qtbot.waitUntil(lambda t=turn: finished(app, t) is not None, timeout=5000)
        rec = finished(app, turn)
        assert rec.reason == "interrupted"
        assert rec.spoken and len(rec.spoken) < len(rec.reply or "x" * 999)
        assert app.controller.state == "idle"
        assert app.conversation.exchanges()[-1][1] == rec.spoken  # kept as far as spoken
    assert app.window.isVisible()  # Esc stopped the voice, it did not close the window
    assert json.loads(json.dumps(app.server.dispatch(b'{"command": "stop"}')))["message"] == (
        "nothing to stop")


def test_copy_last_answer_and_each_message(qtbot, desktop):  # noqa: F811
    app = desktop(reply="Tokyo is the capital of Japan.")
    clipboard = QGuiApplication.clipboard()
    clipboard.setText("before")
    assert app.everyday.copy_answer.text() in menu_texts(app)
    app.everyday.copy_answer.trigger()
    assert clipboard.text() == "before"  # nothing answered yet: nothing replaced
    type_question(qtbot, app, "What is the capital of Japan?")
    turn = app.controller.current_turn
    qtbot.waitUntil(lambda: finished(app, turn) is not None and app.controller.state == "idle",
                    timeout=10000)
    app.everyday.copy_answer.trigger()
    assert clipboard.text() == "Tokyo is the capital of Japan."
    qtbot.waitUntil(lambda: "copy" in app.window.view.toHtml(), timeout=5000)
    index = list(app.window.entries).index(turn)
    app.window.view.anchorClicked.emit(QUrl(f"copy:{index}:user"))
    assert clipboard.text() == "What is the capital of Japan?"
    app.window.view.anchorClicked.emit(QUrl(f"copy:{index}:assistant"))
    assert clipboard.text() == "Tokyo is the capital of Japan."


def test_tray_menu_has_stop_copy_and_timers_after_talk(desktop):  # noqa: F811
    app = desktop()
    texts = menu_texts(app)
    assert texts[1:4] == ["Talk", "Stop Speaking", "Copy Last Answer"]
    assert not any(t.startswith("Timers") for t in texts)  # none running
    assert not app.everyday.stop_speaking.isEnabled()  # nothing to stop at idle


def chime_in(audio: np.ndarray) -> bool:
    """Whether `audio` starts with the timer's chime (at some level)."""
    chime, _ = sound(Earcon.TIMER)
    if len(audio) < len(chime):
        return False
    head = audio[: len(chime)]
    scale = float(np.dot(head, chime) / np.dot(chime, chime))
    return scale > 0.1 and np.allclose(head, scale * chime, atol=2e-3)


def test_a_two_second_timer_rings_speaks_and_notifies(qtbot, desktop):  # noqa: F811
    app = desktop(reply="The LLM must not answer timers.")
    type_question(qtbot, app, "Set a timer for 2 seconds")
    turn = app.controller.current_turn
    qtbot.waitUntil(lambda: finished(app, turn) is not None, timeout=10000)
    assert finished(app, turn).reply == "Timer set for 2 seconds."
    assert finished(app, turn).answered_by == "local"
    app.tray.menu.aboutToShow.emit()
    timers = [t for t in menu_texts(app) if t.startswith("Timers")]
    assert timers == ["Timers (1)"]
    [entry] = app.everyday.timers_menu.actions()
    assert entry.text().startswith("Cancel 2 second timer (0:0")
    set_at = time.monotonic()
    qtbot.waitUntil(lambda: app.controller.current_turn != turn or
                    app.pipeline.clock.current > turn, timeout=5000)
    announce = app.pipeline.clock.current
    qtbot.waitUntil(lambda: finished(app, announce) is not None, timeout=10000)
    assert 1.5 <= time.monotonic() - set_at <= 6
    rec = finished(app, announce)
    assert rec.reply == "Your 2 second timer is done." and rec.reason == "ok"
    first, *spoken = [pcm for _, pcm in app.speaker.chunks[announce]]
    assert chime_in(first)  # the sound (handed over at its own rate), then the words
    assert sum(len(p) for p in spoken) > 1000
    assert app.window.status.text() == "Your 2 second timer is done."  # the notification
    app.tray.menu.aboutToShow.emit()
    assert not any(t.startswith("Timers") for t in menu_texts(app))


def test_a_timer_is_cancelled_from_the_tray(qtbot, desktop):  # noqa: F811
    app = desktop()
    for text in ("Set a timer for 2 seconds", "Set a timer for 5 minutes"):
        type_question(qtbot, app, text)
        turn = app.controller.current_turn
        qtbot.waitUntil(lambda t=turn: finished(app, t) is not None, timeout=10000)
    app.tray.menu.aboutToShow.emit()
    labels = [a.text() for a in app.everyday.timers_menu.actions() if not a.isSeparator()]
    assert labels[0].startswith("Cancel 2 second timer") and labels[-1] == "Cancel All"
    app.everyday.timers_menu.actions()[0].trigger()
    assert [t.label for t in app.pipeline.timers.running()] == ["5 minute"]
    before = app.pipeline.clock.current
    qtbot.wait(2500)
    assert app.pipeline.clock.current == before  # the cancelled one never rang


class EchoMicrophone(FakeMicrophone):
    """A warm microphone that hears the speaker: while recording, 20 ms blocks arrive from the
    audio thread, the start sound (from when it was played) mixed over a 300 Hz 'voice'."""

    def __init__(self, speaker):
        super().__init__()
        self.speaker = speaker
        self._running = threading.Event()

    def start_recording(self, since=None, on_chunk=None):
        super().start_recording(since, on_chunk)
        on_chunk(np.zeros(320, np.float32))  # a warm stream's pre-roll, handed over at once
        self.delivered = 320
        self._running.set()
        threading.Thread(target=self._deliver, args=(on_chunk,), daemon=True).start()

    def _deliver(self, on_chunk):
        import soxr

        voice = (0.2 * np.sin(2 * np.pi * 300 * np.arange(16000) / 16000)).astype(np.float32)
        echo, at = np.zeros(0, np.float32), None  # the start sound from where it began
        for i in range(0, len(voice), 320):
            if not self._running.is_set():
                return
            block = voice[i:i + 320].copy()
            if at is None and len(self.speaker.audio(EARCON_TURN)):  # it plays: heard from now
                pcm = self.speaker.audio(EARCON_TURN)
                rate = self.speaker.sample_rates.get(EARCON_TURN, 16000)
                echo, at = soxr.resample(pcm, rate, 16000).astype(np.float32), i
            if at is not None:
                part = echo[i - at:i - at + len(block)]
                block[: len(part)] += part
            self.delivered += len(block)
            on_chunk(block)
            time.sleep(0.02)

    def stop_recording(self):
        self._running.clear()
        self._on_chunk = None
        return super().stop_recording()

    def cancel_recording(self):
        self._running.clear()
        super().cancel_recording()


def tone_level(audio: np.ndarray, freq: float) -> float:
    t = np.arange(len(audio)) / 16000
    return float(abs(np.dot(audio, np.exp(-2j * np.pi * freq * t))) / max(1, len(audio)))


def test_the_start_sound_plays_at_a_press_and_nothing_said_over_it_is_dropped(qtbot, desktop):  # noqa: F811
    """Issue 33: dropping the 120 ms of microphone audio under the start sound took the first
    word of a question said at once ("What is…" heard as "But is…"): every sample is kept."""
    from s2s_desktop.audio.sink import CaptureSink

    speaker = CaptureSink()
    mic = EchoMicrophone(speaker)
    app = desktop(mic=mic)
    app.speaker = speaker  # the fixture's sink is replaced by the one the mic hears
    app.everyday.earcons.sink = speaker
    app.settings.audio.earcons, app.settings.audio.earcon_volume = True, 0.8
    fed: list[np.ndarray] = []
    real_feed = app.pipeline.feed
    app.pipeline.feed = lambda turn, pcm: (fed.append(np.array(pcm)), real_feed(turn, pcm))

    app.actions.talk.trigger()
    start, rate = sound(Earcon.LISTEN_START)
    played = speaker.audio(EARCON_TURN)
    assert np.allclose(played[: len(start)], 0.8 * start, atol=1e-6)  # in the speaker stream
    qtbot.wait(1000)
    app.actions.talk.trigger()
    qtbot.wait(100)  # a block on its way when the recording stopped
    question = np.concatenate(fed)
    assert len(question) == mic.delivered > 8000  # every block, the ones under the sound too
    assert tone_level(question[:4000], 300) > 0.05  # the voice said while it played is there
    stop, _ = sound(Earcon.LISTEN_STOP)
    assert len(speaker.audio(EARCON_TURN)) == len(start) + len(stop)  # and the stop sound


def test_earcons_off_or_at_zero_volume_are_silent(qtbot, desktop):  # noqa: F811
    app = desktop()
    app.settings.audio.earcons = True
    app.settings.audio.earcon_volume = 0.0
    assert app.everyday.earcons.play(Earcon.LISTEN_START) == 0.0
    app.settings.audio.earcon_volume = 0.5
    app.settings.audio.earcons = False
    assert app.everyday.earcons.play(Earcon.ERROR) == 0.0
    assert len(app.speaker.audio(EARCON_TURN)) == 0


@pytest.mark.parametrize("earcon", list(Earcon))
def test_earcons_are_short_and_not_silent(earcon):
    pcm, rate = sound(earcon)
    longest = 0.8 if earcon is Earcon.TIMER else 0.150
    assert 0.05 < len(pcm) / rate <= longest
    assert 0.05 < np.abs(pcm).max() <= 1.0
    assert abs(pcm[0]) < 0.01 and abs(pcm[-1]) < 0.01  # faded: no click
