"""Typed questions and local commands on the real starter models, through the CLI a user
runs: `run --text` answers like a spoken turn, a spoken "What time is it?" is answered from
the OS clock without the LLM."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import listen

pytestmark = pytest.mark.e2e


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "s2s_desktop", *args], capture_output=True,
                          text=True, timeout=timeout)


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def clock_forms(when: datetime) -> set[str]:
    """How the reply may write this minute: 24-hour or 12-hour clock."""
    return {f"{when.hour}:{when.minute:02d}", f"{when.hour % 12 or 12}:{when.minute:02d}"}


def test_typed_question_is_answered_and_spoken(starter_settings, speech, starter_stt_model,
                                               tmp_path):
    time_q = speech("What time is it?", voice="en")
    proc = run_cli("run", "--profile", "starter", "--text", "What is the capital of Japan?",
                   "--input", str(time_q), "--text", "Say that again.",
                   "-o", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    tokyo, spoken_time, again = json_lines(proc.stdout)
    assert tokyo["input"] == "text" and tokyo["transcript"] == "What is the capital of Japan?"
    assert tokyo["answered_by"] == "llm" and "tokyo" in tokyo["reply"].lower()
    pcm, rate = sf.read(tokyo["audio"], dtype="float32")
    assert float(np.sqrt(np.mean(pcm**2))) > 0.01, "the reply WAV is silence"
    assert "tokyo" in listen(starter_stt_model, pcm, rate).lower()  # it says Tokyo
    # the order of --text and --input is the conversation's order
    assert spoken_time["input"] == str(time_q) and spoken_time["answered_by"] == "local"
    assert again["answered_by"] == "local" and again["reply"] == spoken_time["reply"]


def test_run_prints_each_turn_typed_or_spoken(speech, tmp_path):
    """The plain (not --json) table: a typed turn has no VAD or STT figures to print."""
    question = speech("What is the capital of France?", voice="en")
    proc = run_cli("run", "--profile", "starter", "--input", str(question), "--text",
                   "What did I just ask?", "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("  assistant: ") == 2 and "paris" in proc.stdout.lower()
    spoken, typed = proc.stdout.split("[turn 2]")
    assert "ms to first audio (vad " in spoken and ", stt " in spoken
    assert "ms to first audio (llm first token " in typed
    assert (tmp_path / "turn-2.wav").exists()


def test_spoken_what_time_is_it_is_answered_from_the_clock(starter_session, speech):
    """Through the real pipeline; the LLM engine is watched: it must not be called."""
    from s2s_desktop.audio.files import read_audio

    llm = starter_session.pipeline.llm.engine
    calls = []
    real_stream = llm.stream

    def watched(messages, stop):
        calls.append(messages)
        return real_stream(messages, stop)

    llm.stream = watched
    try:
        before = datetime.now().astimezone()
        rec = starter_session.turn(read_audio(speech("What time is it?", voice="en-us")))
        after = datetime.now().astimezone()
    finally:
        del llm.stream
    assert "time" in rec["transcript"].lower()
    assert rec["answered_by"] == "local"
    assert calls == []
    allowed = set()
    for when in (before - timedelta(minutes=1), before, after, after + timedelta(minutes=1)):
        allowed |= clock_forms(when)
    assert any(form in rec["reply"] for form in allowed), (rec["reply"], allowed)
    assert float(np.sqrt(np.mean(rec["pcm"] ** 2))) > 0.01  # and spoken


def test_run_without_a_question_says_what_to_give(tmp_path):
    proc = run_cli("run", "--profile", "starter", "-o", str(tmp_path))
    assert proc.returncode == 2
    assert "--input" in proc.stderr and "--text" in proc.stderr
