"""The app's one state machine: every input (hotkey, tray, CLI) and every pipeline signal goes
through AppController. Headless: a fake recorder and pipeline, real Qt signals and timers."""

from __future__ import annotations

import time

import numpy as np
import pytest

from s2s_desktop.config import Settings
from s2s_desktop.controller import AppController
from s2s_desktop.errors import AudioDeviceError
from s2s_desktop.pipeline.events import PipelineEvents
from s2s_desktop.pipeline.turns import FinishedTurn
from s2s_desktop.states import TurnReason


class FakeRecorder:
    def __init__(self):
        self.started: list[float | None] = []
        self.cancelled = 0
        self.fail_start = ""
        self.fail_check = ""
        self.recording = False

    def start_recording(self, since=None, on_chunk=None):
        if self.fail_start:
            raise AudioDeviceError(self.fail_start)
        self.started.append(since)
        self.recording = True
        if on_chunk is not None:
            on_chunk(np.full(320, 0.1, np.float32))  # the pre-roll goes out at once

    def stop_recording(self):
        self.recording = False
        return np.full(8000, 0.1, np.float32)

    def cancel_recording(self):
        self.recording = False
        self.cancelled += 1

    def check(self):
        if self.fail_check:
            raise AudioDeviceError(self.fail_check)


class FakePipeline:
    def __init__(self):
        self.events = PipelineEvents()
        self.submitted: list[dict] = []
        self.sources: dict[int, str] = {}
        self.fed: dict[int, list] = {}
        self.interrupts = 0
        self.interrupt_reasons: list[str] = []
        self.key_ups: list[int] = []
        self.turn = 0

    def begin_turn(self, source=""):
        self.interrupt()
        self.turn += 1
        self.sources[self.turn] = source
        return self.turn

    def feed(self, turn, pcm):
        self.fed.setdefault(turn, []).append(pcm)

    def key_up(self, turn):
        self.key_ups.append(turn)

    def end_turn(self, turn, released_at=None):
        self.submitted.append(
            {
                "turn": turn,
                "released_at": released_at,
                "source": self.sources[turn],
                "fed": len(self.fed.get(turn, [])),
            }
        )

    def interrupt(self, reason="interrupted"):
        self.interrupts += 1
        self.interrupt_reasons.append(reason)
        return []

    def loaded(self):
        return {"vad": "v", "stt": "s", "llm": "l", "tts": "t"}

    def all_ready(self):
        for stage in ("vad", "stt", "llm", "tts"):
            self.events.stage_state.emit(stage, "ready", stage)

    def finish(self, turn, reason="ok", error=""):
        self.events.turn_finished.emit(
            FinishedTurn(
                turn=turn,
                reason=TurnReason(reason),
                error=error,
                transcript="hi",
                reply="hello",
                spoken="",
                timings_ms={"release_to_first_audio": 500.0},
            )
        )


@pytest.fixture
def rig(qtbot):
    def make(**settings_kw):
        s = Settings()
        for key, value in settings_kw.items():
            section, name = key.split("__")
            setattr(getattr(s, section), name, value)
        pipe, rec = FakePipeline(), FakeRecorder()
        c = AppController(s, pipe, rec)
        c.notices, c.states = [], []
        c.notice.connect(c.notices.append)
        c.state_changed.connect(lambda st, d: c.states.append(st))
        return c, pipe, rec

    return make


def ready(qtbot, c, pipe):
    pipe.all_ready()
    qtbot.waitUntil(lambda: c.state == "idle", timeout=2000)


def hold(qtbot, c, seconds=0.3):
    c.hotkey_pressed()
    qtbot.wait(int(seconds * 1000))
    c.hotkey_released()


def speaking(qtbot, c, pipe):
    """A first turn, asked and now being spoken."""
    ready(qtbot, c, pipe)
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    pipe.events.first_audio.emit(1)
    qtbot.waitUntil(lambda: c.state == "speaking")


def close_turns_at_once(pipe):
    """As the real Pipeline does: interrupt() closes the current turn in the calling thread
    (turn_finished reaches the controller through a direct connection, before it returns)."""
    interrupt = pipe.interrupt

    def interrupt_closing_the_turn(reason="interrupted"):
        pipe.finish(pipe.turn, reason=reason)
        return interrupt(reason)

    pipe.interrupt = interrupt_closing_the_turn


def test_starts_loading_and_a_press_says_models_are_loading(qtbot, rig):
    c, pipe, rec = rig()
    assert c.state == "loading"
    pipe.events.stage_state.emit("vad", "ready", "silero")
    qtbot.waitUntil(lambda: c.stage_states["vad"] == "ready")
    c.hotkey_pressed()
    assert c.state == "loading" and rec.started == []
    assert "still loading" in c.notices[-1] and "1 of 4 ready" in c.notices[-1]
    assert "loading stt, llm, tts" in c.detail  # the tooltip's progress
    ready(qtbot, c, pipe)


def test_hold_press_release_submits_one_turn_with_the_release_time(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    c.hotkey_pressed()
    assert c.state == "listening" and len(rec.started) == 1
    qtbot.wait(250)
    released = time.monotonic()
    c.hotkey_released(at=released)
    assert c.state == "listening"  # the release grace has not run out yet
    assert pipe.key_ups == [1]  # ...but the speech so far is on its way to STT already
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    assert len(pipe.submitted) == 1
    assert pipe.submitted[0]["released_at"] == pytest.approx(released)
    assert pipe.submitted[0]["source"] == "hotkey"
    assert pipe.submitted[0]["fed"] >= 1  # a live turn: the recording went in as it grew
    pipe.events.first_audio.emit(1)
    qtbot.waitUntil(lambda: c.state == "speaking")
    pipe.finish(1)
    qtbot.waitUntil(lambda: c.state == "idle")
    assert c.status()["turn"]["reason"] == "ok"
    assert c.states[-4:] == ["listening", "thinking", "speaking", "idle"]


def test_a_tap_is_ignored_with_a_hint(qtbot, rig):
    c, pipe, rec = rig(audio__min_press_ms=150)
    ready(qtbot, c, pipe)
    hold(qtbot, c, seconds=0.05)
    qtbot.waitUntil(lambda: c.state == "idle", timeout=1000)
    assert pipe.submitted == [] and rec.cancelled == 1
    assert pipe.interrupts >= 2  # the live turn begun at the press was dropped
    assert pipe.interrupt_reasons[-1] == "too short"  # its own reason, not "interrupted"
    # said once a second tap (a double tap: hands-free) can no longer follow
    qtbot.waitUntil(lambda: bool(c.notices) and "Hold the key" in c.notices[-1], timeout=1000)
    assert "Hold the key" in c.notices[-1] and "150 ms" in c.notices[-1]


def test_release_grace_absorbs_key_repeat_and_bounce(qtbot, rig):
    c, pipe, rec = rig(hotkey__release_grace_ms=50)
    ready(qtbot, c, pipe)
    c.hotkey_pressed()
    qtbot.wait(200)
    for _ in range(5):  # X11 auto-repeat: release + press pairs while the key is held
        c.hotkey_released()
        qtbot.wait(10)
        c.hotkey_pressed()
        qtbot.wait(20)
    assert c.state == "listening" and len(rec.started) == 1
    c.hotkey_released()
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    assert len(pipe.submitted) == 1


def test_debounce_ignores_a_second_press_within_30ms_in_toggle_mode(qtbot, rig):
    c, pipe, rec = rig(hotkey__mode="toggle", hotkey__debounce_ms=30)
    ready(qtbot, c, pipe)
    c.hotkey_pressed()
    c.hotkey_pressed()  # contact bounce: would otherwise stop at once
    assert c.state == "listening"
    qtbot.wait(300)
    c.hotkey_released()  # releases mean nothing in toggle mode
    qtbot.wait(100)
    assert c.state == "listening"
    c.hotkey_pressed()
    assert c.state == "thinking" and len(pipe.submitted) == 1


def test_press_while_speaking_is_barge_in_without_preroll(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    pipe.events.first_audio.emit(1)
    qtbot.waitUntil(lambda: c.state == "speaking")
    pressed = time.monotonic()
    before = pipe.interrupts
    c.hotkey_pressed()
    assert pipe.interrupts > before and c.state == "listening"
    # the new recording keeps nothing from before the press: that is the assistant's voice
    assert rec.started[-1] >= pressed
    assert c.turn_info["interrupted_at"] >= pressed
    pipe.finish(1, reason="interrupted")  # the old turn's end must not end the new recording
    qtbot.wait(200)
    assert c.state == "listening"
    c.hotkey_released()
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    assert [s["turn"] for s in pipe.submitted] == [1, 2]


def test_barge_in_records_though_the_pipeline_closes_the_old_turn_at_once(qtbot, rig):
    """The real Pipeline.interrupt() closes the interrupted turn in the calling thread: its
    turn_finished arrives in the middle of the press, which must still start recording."""
    c, pipe, rec = rig()
    speaking(qtbot, c, pipe)
    close_turns_at_once(pipe)
    c.states.clear()
    c.hotkey_pressed()
    assert c.state == "listening" and len(rec.started) == 2 and rec.recording
    assert {"interrupt_pressed_at", "interrupted_at"} <= set(c.turn_info)
    assert c.states == ["listening"]  # shown once, when the recording runs
    qtbot.wait(200)
    c.hotkey_released()
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    assert [s["turn"] for s in pipe.submitted] == [1, 2]


@pytest.mark.parametrize("while_", ["speaking", "listening"])
def test_a_typed_question_thinks_though_the_pipeline_closes_the_old_turn_at_once(
    qtbot, rig, while_
):
    """A typed question barges in (or drops the recording); the real pipeline closes that
    turn in the calling thread, and the app must go on thinking about the new question."""
    c, pipe, rec = rig()
    speaking(qtbot, c, pipe)
    if while_ == "listening":
        c.hotkey_pressed()
        assert c.state == "listening"

    close_turns_at_once(pipe)
    pipe.submit_text = lambda text, source="": pipe.begin_turn(source)  # begin_turn barges in
    turn = c.ask("What time is it?")
    assert c.state == "thinking" and c.current_turn == turn == pipe.turn
    assert c.turn_info["source"] == "typed"
    pipe.finish(turn)
    qtbot.waitUntil(lambda: c.state == "idle")


def test_preroll_never_reaches_back_into_the_last_reply(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    pipe.finish(1)
    qtbot.waitUntil(lambda: c.state == "idle")
    reply_finished = c.turn_info["finished_at"]
    c.hotkey_pressed()
    assert rec.started[-1] is not None and rec.started[-1] >= reply_finished - 0.001


def test_cli_toggle_and_talk_commands(qtbot, rig):
    c, pipe, rec = rig(audio__min_press_ms=100)
    ready(qtbot, c, pipe)
    assert c.talk_start("cli")
    c.hotkey_released()  # a hotkey release does not end a CLI recording
    qtbot.wait(200)
    assert c.state == "listening"
    c.talk_stop("cli")
    assert c.state == "thinking" and pipe.submitted[0]["source"] == "cli"
    pipe.finish(1)
    qtbot.waitUntil(lambda: c.state == "idle")
    c.toggle("tray")
    qtbot.wait(150)
    c.toggle("tray")
    assert c.state == "thinking" and len(pipe.submitted) == 2


def test_recording_is_capped_with_a_notice(qtbot, rig):
    c, pipe, rec = rig(audio__max_record_s=0.4)
    ready(qtbot, c, pipe)
    c.hotkey_pressed()
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=2000)
    assert len(pipe.submitted) == 1 and c.turn_info["capped"]
    assert "0.4 s limit" in c.notices[-1]


def test_a_failed_turn_shows_error_and_the_next_press_works(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    pipe.events.error.emit("tts", "voice file is corrupt: reinstall it")
    pipe.finish(1, reason="error", error="tts: voice file is corrupt: reinstall it")
    qtbot.waitUntil(lambda: c.state == "error")
    assert "corrupt" in c.detail and "corrupt" in c.status()["last_error"]
    c.hotkey_pressed()
    assert c.state == "listening"


def test_no_speech_goes_back_to_idle_with_a_hint(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    pipe.finish(1, reason="no speech")
    qtbot.waitUntil(lambda: c.state == "idle")
    assert "Nothing was heard" in c.notices[-1]


def test_a_model_that_fails_to_load_is_an_error_and_presses_say_why(qtbot, rig):
    c, pipe, rec = rig()
    for stage in ("vad", "stt", "tts"):
        pipe.events.stage_state.emit(stage, "ready", stage)
    pipe.events.stage_state.emit("llm", "failed", "llm model not found at /x: check llm.model")
    qtbot.waitUntil(lambda: c.state == "error")
    assert "llm" in c.detail and "not found" in c.detail
    c.hotkey_pressed()
    assert c.state == "error" and rec.started == []
    assert "Cannot listen" in c.notices[-1] and "not found" in c.notices[-1]
    # fixed by a reload: loading again, then idle
    pipe.events.stage_state.emit("llm", "reloading", "llama-cpp")
    qtbot.waitUntil(lambda: c.state == "loading")
    pipe.events.stage_state.emit("llm", "ready", "llama-cpp")
    qtbot.waitUntil(lambda: c.state == "idle")


def test_microphone_errors_put_the_app_in_error_and_it_keeps_going(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    rec.fail_start = "no microphone found: connect one"
    c.hotkey_pressed()
    assert c.state == "error" and "no microphone" in c.detail
    rec.fail_start = ""
    qtbot.wait(40)
    c.hotkey_pressed()
    assert c.state == "listening"
    rec.fail_check = "the microphone stopped delivering audio (was it unplugged?)"
    qtbot.waitUntil(lambda: c.state == "error", timeout=2000)  # the watchdog noticed
    assert "unplugged" in c.status()["last_error"] and not rec.recording
    c.hotkey_released()
    qtbot.wait(100)
    assert pipe.submitted == []


def test_a_microphone_missing_at_start_is_shown_once_models_are_loaded(qtbot, rig):
    c, pipe, rec = rig()
    c.report_error("PortAudio is not installed: install libportaudio2")
    assert c.state == "loading"
    pipe.all_ready()
    qtbot.waitUntil(lambda: c.state == "error")
    assert "PortAudio" in c.detail


def test_events_of_an_old_turn_do_not_move_the_state(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    pipe.events.first_audio.emit(99)
    pipe.finish(99)
    qtbot.wait(50)
    assert c.state == "thinking"


def test_interrupt_stops_the_reply_and_goes_idle(qtbot, rig):
    c, pipe, rec = rig()
    ready(qtbot, c, pipe)
    hold(qtbot, c)
    qtbot.waitUntil(lambda: c.state == "thinking", timeout=1000)
    before = pipe.interrupts
    c.interrupt()
    assert c.state == "idle" and pipe.interrupts == before + 1
