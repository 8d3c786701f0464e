"""`s2s-desktop set` on the real app (Xvfb, a private PulseAudio server, the starter models):
a faster voice is heard at the next answer without a reload, and a model path that does not
exist is refused while the app keeps answering with the model it had."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from tests.test_app_e2e import LOUD, running_rig

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with running_rig(tmp_path_factory.mktemp("settings")) as parts:
        yield parts


def spoken_seconds(app, recorder, question: str) -> tuple[float, dict]:
    """Ask; how long the answer sounded (first to last loud sample), and its record."""
    asked = time.monotonic()
    res = app.cli("ask", question, "--json", timeout=180)
    assert res.returncode == 0, res.stderr
    time.sleep(0.5)  # the last samples reach the monitor
    times, pcm = recorder.samples(asked, time.monotonic())
    loud = times[np.abs(pcm) > LOUD]
    assert loud.size, "nothing was played"
    return float(loud[-1] - loud[0]), json.loads(res.stdout)


def test_set_a_faster_voice_speaks_the_next_answer_faster_without_a_reload(rig):
    app, recorder, env = rig
    before, rec = spoken_seconds(app, recorder, "What time is it?")
    assert rec["answered_by"] == "local"
    res = app.cli("set", "tts.speed=1.6")
    assert res.returncode == 0 and "no model reloads" in res.stdout, res
    assert app.status()["stages"]["tts"] == "ready"
    after, _ = spoken_seconds(app, recorder, "What time is it?")
    print(f"\n[set] 'What time is it?' spoken in {before:.2f} s, at tts.speed=1.6 {after:.2f} s")
    app.cli("set", "tts.speed=1.0")
    assert after < before * 0.8  # 1/1.6 = 0.63 of the time, give or take the words' pauses


def test_a_model_path_that_does_not_exist_is_refused_and_answers_go_on(rig):
    app, recorder, env = rig
    res = app.cli("set", "llm.model=/nonexistent.gguf")
    assert res.returncode == 1
    assert res.stderr.startswith("error: llm model not found at /nonexistent.gguf"), res.stderr
    status = app.status()
    assert status["state"] == "idle" and status["stages"]["llm"] == "ready", status
    _, rec = spoken_seconds(app, recorder, "What is the capital of France?")
    assert rec["reason"] == "ok" and "paris" in rec["reply"].lower(), rec
