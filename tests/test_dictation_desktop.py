"""Dictation in the real app on Xvfb with a PulseAudio virtual microphone: a test window's
text field has the focus, the dictation key is held with xdotool while a spoken sentence
plays into the microphone; the field receives the sentence's words and the clipboard holds
what it held before. Nothing is answered or added to the conversation."""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s2s_desktop.audio.files import read_audio
from tests.conftest import listen
from tests.test_app_e2e import STARTER_OPTIONS, running_rig, xdotool

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

DICTATION_COMBO = "ctrl+shift+f8"  # types nothing into the field itself
XDOTOOL_COMBO = "ctrl+shift+F8"
BEFORE = "what the user had copied"


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    options = (*STARTER_OPTIONS, "--set", f"hotkey.dictation_combo={DICTATION_COMBO}",
               "--set", "audio.keep_mic_open=true", "--set", "ui.show_conversation=false")
    with running_rig(tmp_path_factory.mktemp("dictation"), options) as parts:
        yield parts


def read_status(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def wait_status(path: Path, what, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    status = {}
    while time.monotonic() < deadline:
        status = read_status(path)
        if status and what(status):
            return status
        time.sleep(0.1)
    pytest.fail(f"timed out; the test window says {status}")


def test_dictation_types_into_the_focused_field_and_keeps_the_clipboard(rig, speech, tmp_path,
                                                                         starter_stt_model):
    app, recorder, env = rig
    status_path = tmp_path / "target.json"
    target = subprocess.Popen([sys.executable, "-m", "tests.helpers.dictation_target",
                               str(status_path), BEFORE], env=env)
    try:
        wait_status(status_path, lambda s: s["clipboard"] == BEFORE, 30)
        xdotool(env, "search", "--sync", "--name", "dictation-target", "windowfocus", "--sync")
        wait_status(status_path, lambda s: s["focus"], 10)
        sentence = speech("Please call me back after lunch tomorrow.", voice="en", pad_s=0.2)
        before_turn = app.status()["turn"].get("id")
        xdotool(env, "keydown", XDOTOOL_COMBO)
        time.sleep(0.8)  # the key helper reports the press; the microphone is already open
        subprocess.run(["paplay", "--device=micsrc", str(sentence)], env=env, check=True,
                       timeout=30)
        time.sleep(0.3)
        xdotool(env, "keyup", XDOTOOL_COMBO)
        typed = wait_status(status_path, lambda s: s["field"].strip(), 60)
        words = set(re.findall(r"[a-z]+", typed["field"].lower()))
        assert len(words & {"please", "call", "back", "after", "lunch", "tomorrow"}) >= 4, typed
        # and it is what Whisper hears in that recording, typed as heard
        heard = listen(starter_stt_model, read_audio(sentence), 16000)
        assert difflib.SequenceMatcher(None, heard.lower(), typed["field"].lower()).ratio() > 0.8
        final = wait_status(status_path, lambda s: s["clipboard"] == BEFORE, 5)
        assert final["field"] == typed["field"]
        status = app.status()
        assert status["turn"].get("id") == before_turn  # dictation is not a turn
        assert status["state"] == "idle"
    finally:
        target.terminate()
        target.wait(10)
