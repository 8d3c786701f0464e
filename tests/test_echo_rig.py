"""The echo rig as a test (slow lane): a hands-free conversation of six spoken questions
through a PulseAudio room that feeds the app's replies back into its microphone (80 ms later,
at 40 %). Every question must end its turn, the app's own voice must start none, a spoken
"Stop, what is the capital of Italy?" must stop a long reply and be heard as the next turn, a
cough-like burst and the backchannels "Yeah.", "Mm-hm.", "Okay." must not stop it, and the
microphone must be closed at the end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.desktop_env import missing

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.required("livekit", platforms=("linux",))
def test_conversation_through_the_room_never_answers_itself(tmp_path):
    pytest.importorskip("livekit.rtc", reason='pip install "s2s-desktop[hands-free]"')
    tool = missing("pulseaudio", "pactl", "paplay", "parec", "espeak-ng")
    if tool:
        pytest.skip(f"{tool} is not installed (apt-get install pulseaudio pulseaudio-utils "
                    "espeak-ng libportaudio2)")
    out = tmp_path / "rig.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "echo_rig.py"), "--questions", "6",
         "--idle-s", "5", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    figures = json.loads(out.read_text())
    print(json.dumps(figures, indent=1))  # the figures, in the log of a failed run too
    assert figures["turns_ended"] == figures["questions"] == 6, figures
    assert figures["turns_started_by_own_voice"] == 0, figures
    assert figures["barge_in_stopped_reply"] and figures["barge_in_question_turn_ended"], figures
    assert not figures["barge_in_before_user_spoke"], figures
    assert not figures["cough_stopped_reply"], figures
    # "Yeah.", "Mm-hm." and "Okay." over a reply: it may pause, it goes on
    assert not any(b["stopped_reply"] for b in figures["backchannels"].values()), figures
    assert figures["mic_closed_after"], figures
