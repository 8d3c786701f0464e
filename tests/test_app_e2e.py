"""The real app, end to end: `python -m s2s_desktop --profile starter` on an Xvfb screen with a
private PulseAudio server whose null sinks stand in for the microphone and the speaker.

xdotool holds the real hotkey, paplay speaks an espeak question into the virtual microphone,
the key goes up, and what the app plays into the speaker sink is recorded from its monitor;
the reply must name Paris and what Whisper hears played must be that reply. Then a press while the reply plays (barge-in) must silence it
within 200 ms. Release-to-first-audio through the whole loop is measured and printed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import listen, same_words, starter_available
from tests.helpers.desktop_env import LOUD, MonitorRecorder, missing, onset, pulseaudio, xvfb

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.required(platforms=("linux",))]

RATE = 16000
COMBO = "ctrl+alt+space"
# release-to-first-audio here was 1.6-5.8 s on 2 loaded cores (docs/performance.md); past this
# the loop is broken (a stall, a reload, audio stuck in a buffer), not slow
LOOP_BOUND_MS = 15000


def _why_skip() -> str:
    tool = missing("Xvfb", "xdotool", "pulseaudio", "pactl", "paplay", "parec", "espeak-ng")
    if tool:
        return (
            f"{tool} is not installed (see docs: apt-get install xvfb xdotool pulseaudio "
            "pulseaudio-utils espeak-ng)"
        )
    gone = starter_available()
    if gone:
        return f"starter models not installed ({gone}): pip install '.[starter]'"
    if importlib.util.find_spec("pynput") is None:
        return "pynput is not installed: pip install '.[hotkey]'"
    try:
        import sounddevice  # noqa: F401
    except OSError:
        return "PortAudio is not installed (apt-get install libportaudio2)"
    return ""


# barge-in is timed to silence, so no earcons here (test_everyday_desktop.py has them)
STARTER_OPTIONS = ("--profile", "starter", "--set", f"hotkey.combo={COMBO}", "--set",
                   "hotkey.mode=hold", "--set", "audio.earcons=false")  # fmt: skip


def installed_command() -> list[str]:
    """The `s2s-desktop` that pip put beside this Python: run from outside the checkout it
    imports the installed package, so a module the wheel left out fails here as for a user."""
    script = Path(sys.executable).with_name("s2s-desktop.exe" if os.name == "nt" else "s2s-desktop")
    if not script.exists():
        pytest.skip(f"{script} is missing: pip install '.[starter,test,hotkey]'")
    return [str(script)]


class RunningApp:
    def __init__(self, root: Path, env: dict, options: tuple[str, ...] = STARTER_OPTIONS,
                 installed: bool = False):
        self.root, self.env = root, env
        self.log = open(root / "app.log", "ab")
        command = installed_command() if installed else [sys.executable, "-m", "s2s_desktop"]
        self.proc = subprocess.Popen(
            [*command, *options],
            env=env,
            cwd=root if installed else None,  # not the checkout, whose source would shadow it
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self._server: str | None = None

    def cli(self, *args, timeout=60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "s2s_desktop", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def status(self) -> dict:
        res = self.cli("status", "--json")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    def quick_status(self) -> dict | None:
        """The same status over the same socket, without starting a Python each time (polling
        with the CLI would take a CPU core away from the app being measured)."""
        from s2s_desktop import ipc

        if self._server is None:  # named after the app's config folder, as the app sees it
            keys = ("S2S_CONFIG_DIR", "XDG_CONFIG_HOME")
            saved = {k: os.environ.get(k) for k in keys}
            for k in keys:
                os.environ.pop(k, None)
                if k in self.env:
                    os.environ[k] = self.env[k]
            try:
                self._server = ipc.server_name()
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None)
                    if v is not None:
                        os.environ[k] = v
        try:
            reply = ipc.request("status", name=self._server, timeout_ms=5000)
        except TimeoutError:  # its GUI thread busy starting up on a loaded machine: ask again
            return None
        return reply["status"] if reply and reply.get("ok") else None

    def wait(self, what, timeout_s: float, interval: float = 0.05) -> dict:
        deadline = time.monotonic() + timeout_s
        last = {}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the app exited ({self.proc.returncode}):\n{self.log_tail()}")
            status = self.quick_status()
            if status is not None:
                last = status
                if what(last):
                    return last
            time.sleep(interval)
        pytest.fail(f"timed out after {timeout_s:.0f} s; last status {last}\n{self.log_tail()}")

    def log_tail(self) -> str:
        self.log.flush()
        return (self.root / "app.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.cli("quit", timeout=20)
                self.proc.wait(15)
            except Exception:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
        self.log.close()


@contextlib.contextmanager
def running_rig(root: Path, options: tuple[str, ...] = STARTER_OPTIONS):
    """The app (started with `options`) on its own Xvfb screen and PulseAudio server, loaded
    and idle; yields (app, speaker recorder, env)."""
    why = _why_skip()
    if why:
        pytest.skip(why)
    with xvfb() as display, pulseaudio(root / "pulse") as pulse_env:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "QT_QPA_PLATFORM")
        }
        env.update(
            pulse_env,
            DISPLAY=display,
            QT_QPA_PLATFORM="xcb",
            HF_HUB_OFFLINE="1",
            PULSE_SOURCE="micsrc.monitor",
            PULSE_SINK="spk",
            S2S_CONFIG_DIR=str(root / "config"),
            S2S_DATA_DIR=str(root / "data"),
            S2S_LOG_DIR=str(root / "log"),
            S2S_CACHE_DIR=str(root / "cache"),
        )
        recorder = MonitorRecorder(env)
        app = RunningApp(root, env, options)
        try:
            status = app.wait(
                lambda s: s["state"] in ("idle", "error") and all(s["models"].values()),
                timeout_s=300,
                interval=0.5,
            )
            assert status["state"] == "idle", status
            # the hotkey helper may still be starting on a loaded machine
            app.wait(lambda s: s["hotkey"].get("available") or s["hotkey"].get("problem"),
                     timeout_s=30, interval=0.2)
            status = app.status()  # the real `s2s-desktop status --json`
            assert status["state"] == "idle" and all(status["models"].values()), status
            assert status["hotkey"]["available"], status["hotkey"]
            yield app, recorder, env
        finally:
            app.stop()
            recorder.stop()


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with running_rig(tmp_path_factory.mktemp("e2e")) as parts:
        yield parts


def xdotool(env, *args) -> None:
    subprocess.run(["xdotool", *args], env=env, check=True, timeout=10)


def ask(app, env, wav: Path) -> tuple[float, dict]:
    """Hold the hotkey, say `wav` into the microphone, let go. Returns (release time, status)."""
    xdotool(env, "keydown", COMBO)
    app.wait(lambda s: s["state"] == "listening", timeout_s=10)
    subprocess.run(["paplay", "--device=micsrc", str(wav)], env=env, check=True, timeout=30)
    time.sleep(0.3)
    released = time.monotonic()
    xdotool(env, "keyup", COMBO)
    status = app.wait(
        lambda s: (
            s["state"] in ("thinking", "speaking", "idle", "error")
            and s["turn"].get("released_at", 0) >= released - 1.0
        ),
        timeout_s=10,
    )
    return released, status


def test_a_spoken_question_is_answered_aloud(rig, speech, starter_stt_model):
    app, recorder, env = rig
    question = speech("What is the capital of France?", voice="en", pad_s=0.2)
    released, _ = ask(app, env, question)
    done = app.wait(
        lambda s: s["state"] in ("idle", "error") and s["turn"].get("finished_at"),
        timeout_s=120,
        interval=0.2,
    )
    assert done["state"] == "idle" and done["turn"]["reason"] == "ok", done
    time.sleep(0.5)  # the last samples reach the monitor
    times, pcm = recorder.samples(released, time.monotonic())
    first = onset(times, pcm)
    assert first is not None, "the app played nothing into the speaker"
    heard = listen(starter_stt_model, pcm[times >= first - 0.05], RATE)
    history = Path(env["S2S_DATA_DIR"]) / "history.jsonl"
    saved = [json.loads(line) for line in history.read_text().splitlines()]
    assert "capital" in saved[-1]["user"].lower() and "france" in saved[-1]["user"].lower()
    reply = saved[-1]["assistant"]
    assert "paris" in reply.lower(), reply
    # what was played is the reply (as tests/test_e2e_starter.py checks the CLI's)
    assert same_words(reply, heard), (reply, heard)

    turn = done["turn"]
    loop_ms = (first - released) * 1000
    app_ms = (first - turn["released_at"]) * 1000  # from the key-up the hotkey helper saw
    handed_ms = (turn["first_audio_at"] - turn["released_at"]) * 1000
    print(f"\n[e2e] heard: {heard!r}")
    print(
        f"[e2e] release-to-first-audio through the real audio loop: {loop_ms:.0f} ms from "
        f"xdotool keyup ({app_ms:.0f} ms from the key-up the app saw; first chunk handed to "
        f"PortAudio at {handed_ms:.0f} ms; pipeline timings {turn.get('timings_ms')})"
    )
    assert 0 < loop_ms < LOOP_BOUND_MS  # a bound, not a target: the figure is printed
    # what was said stays out of the logs (without -v)
    logs = [p.read_text(errors="replace") for p in Path(env["S2S_LOG_DIR"]).glob("*.log*")]
    logs.append((app.root / "app.log").read_text(errors="replace"))
    assert not any("capital" in text.lower() for text in logs)


def test_a_press_while_it_speaks_stops_playback_within_200ms(rig, speech):
    app, recorder, env = rig
    question = speech("Tell me a long story about a dragon and a knight.", pad_s=0.2)
    ask(app, env, question)
    app.wait(lambda s: s["state"] == "speaking", timeout_s=120, interval=0.02)
    time.sleep(0.6)  # well into the reply
    pressed = time.monotonic()
    xdotool(env, "keydown", COMBO)
    try:
        status = app.wait(lambda s: s["state"] == "listening", timeout_s=10, interval=0.02)
        time.sleep(1.5)
        times, pcm = recorder.samples(pressed - 0.5, pressed + 1.5)
    finally:
        xdotool(env, "keyup", COMBO)  # a silent recording: "nothing heard", back to idle
    before = pcm[times < pressed]
    assert np.abs(before).max() > LOUD, "the reply was not playing when the key went down"
    loud = np.flatnonzero((np.abs(pcm) > LOUD) & (times >= pressed))
    last_sound = float(times[loud[-1]]) if loud.size else pressed
    stop_ms = (last_sound - pressed) * 1000
    t = status["turn"]
    print(
        f"\n[e2e] barge-in: playback silent {stop_ms:.0f} ms after xdotool keydown "
        f"(hotkey helper saw it at {(t['interrupt_pressed_at'] - pressed) * 1000:.0f} ms, "
        f"the app had flushed at {(t['interrupted_at'] - pressed) * 1000:.0f} ms)"
    )
    assert stop_ms < 200, f"playback went on for {stop_ms:.0f} ms after the press"
    end = app.wait(lambda s: s["state"] in ("idle", "error"), timeout_s=60, interval=0.2)
    assert end["state"] == "idle", end
