"""A new user's first start, end to end: plain `python -m s2s_desktop` (no options, no settings
file, fresh XDG folders, nothing downloaded) on an Xvfb screen with a private PulseAudio server.

Only the starter set is installed, so the app must run it and answer a spoken question. The
microphone must be closed while the app is idle (no recording stream on the sound server) and
opened on the press, unless it is too slow to open (the app then keeps it open and says so in
its log): a question that starts 150 ms after the key goes down keeps its first word.
A `kill -9` while the reply plays must leave the question in the history.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import starter_available
from tests.helpers.desktop_env import missing, pulseaudio, xvfb
from tests.test_app_e2e import MonitorRecorder, RunningApp, onset

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.required(platforms=("linux",))]

COMBO = "ctrl+shift+space"  # the default talk key off macOS


def _why_skip() -> str:
    tool = missing("Xvfb", "xdotool", "pulseaudio", "pactl", "paplay", "espeak-ng")
    if tool:
        return f"{tool} is not installed (apt-get install xvfb xdotool pulseaudio espeak-ng)"
    gone = starter_available()
    if gone:
        return f"starter models not installed ({gone}): pip install '.[starter]'"
    if importlib.util.find_spec("pynput") is None:  # importing it needs a display
        return "pynput is not installed: pip install '.[hotkey]'"
    try:
        import sounddevice  # noqa: F401
    except OSError:
        return "PortAudio is not installed (apt-get install libportaudio2)"
    return ""


def streams(env, kind: str = "source-outputs") -> list[str]:
    """The sound server's recording streams ("source-outputs": a "microphone in use" light on
    a desktop) or playback streams ("sink-inputs")."""
    out = subprocess.run(
        ["pactl", "list", "short", kind], env=env, capture_output=True, text=True
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


def recording_streams(env) -> list[str]:
    return streams(env, "source-outputs")


@pytest.fixture(scope="module")
def desk(tmp_path_factory):
    why = _why_skip()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("first-run")
    with xvfb() as display, pulseaudio(root / "pulse") as pulse_env:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("S2S_", "XDG_", "HF_")) and k not in ("QT_QPA_PLATFORM",)
        }
        env.update(
            pulse_env,
            DISPLAY=display,
            QT_QPA_PLATFORM="xcb",
            HF_HUB_OFFLINE="1",
            HF_HOME=str(root / "hf"),  # nothing downloaded
            XDG_CONFIG_HOME=str(root / "config"),
            XDG_DATA_HOME=str(root / "data"),
            XDG_CACHE_HOME=str(root / "cache"),
            XDG_STATE_HOME=str(root / "state"),
            PULSE_SOURCE="micsrc.monitor",
            PULSE_SINK="spk",
        )
        yield root, env


MARK_S = 1.0  # a short tone this long before the speech tells when paplay's stream plays


def first_sound(mouth: MonitorRecorder, since: float, timeout_s: float = 10.0) -> float | None:
    """When the first sound after `since` was recorded, waiting up to `timeout_s` for it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        began = onset(*mouth.samples(since, time.monotonic()))
        if began is not None:
            return began
        time.sleep(0.005)
    return None


def recording_steadily(mouth: MonitorRecorder, timeout_s: float = 10.0) -> None:
    """Wait until parec has delivered 0.3 s: it starts in a burst, up to ~1.3 s late here,
    and a burst's samples are stamped late."""
    deadline = time.monotonic() + timeout_s
    while len(mouth.chunks) < 15 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)


def ask_150ms_after_the_press(env, question: Path, tmp: Path, after_s: float = 0.15,
                              combo: str = COMBO) -> tuple[float, list[str]]:
    """Hold the talk key, start speaking ~150 ms (`after_s`) later, let go. Returns (when the
    speech really began after the key went down, in ms; the recording streams while held).

    paplay's stream starts 0-1600 ms after it is started here, so the speech follows a 10 ms
    tone by MARK_S: the tone, played while the microphone is still closed, is heard on the
    recording of the microphone's sink and the key is pressed MARK_S - 0.16 s after it."""
    import soundfile as sf

    from s2s_desktop.audio.files import read_audio

    tone = 0.05 * np.sin(2 * np.pi * 1000 * np.arange(160) / 16000)
    cue = np.zeros(int(MARK_S * 16000))
    cue[: tone.size] = tone
    cued = tmp / "cued.wav"
    sf.write(cued, np.concatenate([cue, read_audio(question)]), 16000, subtype="PCM_16")
    mouth = MonitorRecorder(env, device="micsrc.monitor")
    recording_steadily(mouth)
    asked = time.monotonic()
    player = subprocess.Popen(["paplay", "--device=micsrc", str(cued)], env=env)
    marked = first_sound(mouth, asked)
    if marked is not None:
        time.sleep(max(0.0, marked + MARK_S - after_s - 0.01 - time.monotonic()))  # xdotool
    pressed = time.monotonic()
    subprocess.run(["xdotool", "keydown", combo], env=env, check=True, timeout=10)
    player.wait(30)
    open_during = recording_streams(env)
    times, heard = mouth.samples(pressed, time.monotonic())
    mouth.stop()
    time.sleep(0.3)
    subprocess.run(["xdotool", "keyup", combo], env=env, check=True, timeout=10)
    began = onset(times, heard)
    return ((began - pressed) * 1000 if began is not None else 1e9), open_during


def slow_to_open(root: Path) -> bool:
    """Whether the app found the microphone too slow to open on a press (its log says so)."""
    logs = "".join(p.read_text(errors="replace") for p in (root / "state").rglob("*.log*"))
    return "stays open between questions" in logs


def history(root: Path) -> list[dict]:
    path = root / "data" / "s2s-desktop" / "history.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_plain_first_start_answers_with_the_starter_set_and_the_mic_is_closed_at_idle(
    desk, speech
):
    root, env = desk
    app = RunningApp(root, env, options=(), installed=True)  # plain `s2s-desktop`, as installed
    try:
        status = app.wait(
            lambda s: s["state"] in ("idle", "error") and all(s["models"].values()), 300, 0.5
        )
        assert status["state"] == "idle", status  # not "tts failed to load"
        assert status["hotkey"]["available"] and status["hotkey"]["combo"] == COMBO
        assert not (root / "config" / "s2s-desktop" / "settings.json").exists()
        # closed at idle, unless the device is too slow to start on a press (an idle
        # PulseAudio source took 1.5 s here): then the app keeps it open and says why
        kept_open = slow_to_open(root)  # the warm-up (at start) has measured it by now
        if not kept_open:
            assert recording_streams(env) == [], "the microphone is open while the app is idle"

        question = speech("What is the capital of France?", voice="en", pad_s=0.0)
        for _attempt in range(3):  # a busy machine can still start it late: then ask again
            gap_ms, open_during = ask_150ms_after_the_press(env, question, root)
            assert open_during, "no recording stream while the key was held"
            done = app.wait(
                lambda s: s["state"] in ("idle", "error") and s["turn"].get("finished_at"), 180
            )
            print(f"\n[first-run e2e] speech began {gap_ms:.0f} ms after xdotool keydown")
            if 140 <= gap_ms < 300:
                break
        else:
            pytest.fail("paplay never started within 300 ms of the press: the machine is busy")
        assert done["state"] == "idle" and done["turn"]["reason"] == "ok", done
        said = history(root)[-1]
        words = said["user"].lower().replace(",", " ").split()
        assert words[:1] == ["what"], said  # the first word survived the opening microphone
        assert "capital" in said["user"].lower() and "paris" in said["assistant"].lower(), said
        time.sleep(1.0)
        if not slow_to_open(root):
            assert recording_streams(env) == [], "the microphone stayed open after the question"
        assert streams(env, "sink-inputs") == [], "the speaker stream stayed open at idle"
        logs = "".join(p.read_text(errors="replace") for p in (root / "state").rglob("*.log*"))
        opened = re.findall(r"microphone: first audio (\d+) ms after open", logs)
        assert opened, "the app did not log how long the microphone took to open"
        print(f"[first-run e2e] heard {said['user']!r}, answered {said['assistant']!r}")
        print(f"[first-run e2e] microphone open-to-first-sample: {', '.join(opened)} ms")
    finally:
        app.stop()


def test_a_kill_mid_reply_keeps_the_question(desk, speech):
    root, env = desk
    app = RunningApp(root, env, options=())  # plain `s2s-desktop`
    try:
        app.wait(lambda s: s["state"] == "idle" and all(s["models"].values()), 300, 1.0)
        before = len(history(root))
        question = speech("Tell me a long story about a dragon and a knight.", pad_s=0.2)
        subprocess.run(["xdotool", "keydown", COMBO], env=env, check=True, timeout=10)
        time.sleep(0.2)
        subprocess.run(["paplay", "--device=micsrc", str(question)], env=env, timeout=30)
        time.sleep(0.3)
        subprocess.run(["xdotool", "keyup", COMBO], env=env, check=True, timeout=10)
        app.wait(lambda s: s["state"] == "speaking", 120, 0.1)
        os.kill(app.proc.pid, signal.SIGKILL)
        app.proc.wait(10)
    finally:
        app.stop()
    saved = history(root)[before:]
    assert len(saved) == 1 and "dragon" in saved[0]["user"].lower(), saved
    assert saved[0]["reason"] == "unanswered"
