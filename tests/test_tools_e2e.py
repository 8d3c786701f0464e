"""Tools, spoken end to end: the real app (`python -m s2s_desktop --profile starter`) on an Xvfb
screen with a private PulseAudio server, its LLM the OpenAI backend pointed at a scripted
local server that calls tools (tests/helpers/fake_openai_tools.py), and the user's MCP server
(tests/helpers/mcp_test_server.py, FastMCP over stdio) configured in the test's mcp.json.

xdotool holds the real talk key and paplay speaks espeak questions and answers into the
virtual microphone; what the app plays is recorded from the speaker sink's monitor:
- a slow MCP tool (3 s): "Let me check" is heard before the tool's result exists, then the
  answer is heard;
- Stop (`s2s-desktop stop`) during that slow tool: the turn ends at once, the model never
  gets the result and nothing more is spoken;
- a writing tool (save_note) asks "Shall I save the note 'buy milk'?": holding the key and
  saying "yes" writes the note, "no" does not.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import listen
from tests.helpers.desktop_env import LOUD, onset
from tests.helpers.fake_openai_tools import FakeToolModel
from tests.test_app_e2e import COMBO, RATE, STARTER_OPTIONS, ask, running_rig, xdotool

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.required(platforms=("linux",))]

MCP_SERVER = Path(__file__).parent / "helpers" / "mcp_test_server.py"
TOOL_S = 3.0  # shelf_slow's sleep (fake_openai_tools.CALLS)


@pytest.fixture(scope="module")
def tool_rig(tmp_path_factory):
    root = tmp_path_factory.mktemp("tools-e2e")
    (root / "config").mkdir()
    (root / "config" / "mcp.json").write_text(json.dumps({"mcpServers": {"shelf": {
        "command": sys.executable, "args": [str(MCP_SERVER)],
        "env": {"SHELF_FILE": str(root / "shelf.txt")}}}}))
    model = FakeToolModel()
    options = (*STARTER_OPTIONS, "--set", "llm.backend=openai",
               "--set", f"llm.base_url={model.base_url}")
    try:
        with running_rig(root, options) as (app, recorder, env):
            log = Path(env["S2S_LOG_DIR"]) / "s2s-desktop.log"
            deadline = time.monotonic() + 60
            while "MCP server shelf:" not in (log.read_text() if log.exists() else ""):
                assert time.monotonic() < deadline, f"the MCP server did not start\n{app.log_tail()}"
                time.sleep(0.2)
            yield app, recorder, env, model
    finally:
        model.close()


def _last_turn(env) -> dict:
    history = Path(env["S2S_DATA_DIR"]) / "history.jsonl"
    return json.loads(history.read_text().splitlines()[-1])


def _finished(app, after: float) -> dict:
    return app.wait(lambda s: s["state"] in ("idle", "error")
                    and s["turn"].get("finished_at", 0) > after, timeout_s=120, interval=0.1)


def test_a_slow_tool_says_let_me_check_before_the_answer(tool_rig, speech, starter_stt_model):
    app, recorder, env, model = tool_rig
    question = speech("How many books are on the shelf?", pad_s=0.2)
    released, _ = ask(app, env, question)
    done = _finished(app, released)
    assert done["state"] == "idle" and done["turn"]["reason"] == "ok", done
    time.sleep(0.5)  # the last samples reach the monitor
    sent = model.since(released)
    assert [p["messages"][-1]["role"] for _, p in sent] == ["user", "tool"], sent
    call_at, result_at = sent[0][0], sent[1][0]
    assert result_at - call_at >= TOOL_S - 0.2  # the tool really took its 3 s
    times, pcm = recorder.samples(released, time.monotonic())
    first = onset(times, pcm)
    assert first is not None, "the app played nothing"
    # the user hears something while the tool runs, not 3 s of silence
    assert first < result_at, f"first sound {first - call_at:.1f} s after the call"
    early = listen(starter_stt_model, pcm[(times >= first - 0.05) & (times < result_at)], RATE)
    assert "check" in early.lower(), early
    late = listen(starter_stt_model, pcm[times >= result_at], RATE)
    assert "done" in late.lower() and "count" in late.lower(), late
    turn = _last_turn(env)
    assert turn["answered_by"] == "tool"
    assert [(c["name"], c["outcome"]) for c in turn["tool_calls"]] == [("shelf_slow", "ok")]
    print(f"\n[e2e] tool turn: first sound {(first - released) * 1000:.0f} ms after the key "
          f"went up ({(first - call_at) * 1000:.0f} ms after the model's call); heard "
          f"{early!r} then {late!r}")


def test_stop_during_a_slow_tool_cancels_it_and_nothing_more_is_said(tool_rig, speech):
    app, recorder, env, model = tool_rig
    question = speech("How many books are on the shelf?", pad_s=0.2)
    released, _ = ask(app, env, question)
    deadline = time.monotonic() + 60
    while not model.since(released):
        assert time.monotonic() < deadline, "the question never reached the model"
        time.sleep(0.05)
    call_at = model.since(released)[0][0]
    time.sleep(max(0.0, call_at + 1.5 - time.monotonic()))  # "Let me check." is said
    stopped = time.monotonic()
    res = app.cli("stop")
    assert res.returncode == 0, res.stderr
    end = app.wait(lambda s: s["state"] in ("idle", "error"), timeout_s=10, interval=0.05)
    assert end["state"] == "idle" and end["turn"]["reason"] == "interrupted", end
    assert time.monotonic() - call_at < TOOL_S  # ended before the tool would have
    time.sleep(TOOL_S + 1.0)  # past the tool's own end: an answer would come now
    assert [p["messages"][-1]["role"] for _, p in model.since(released)] == ["user"]
    # from when the app took the Stop (the CLI's own start-up is not the app's doing)
    took = end["turn"].get("interrupted_at") or end["turn"]["finished_at"]
    times, pcm = recorder.samples(took + 0.3, time.monotonic())
    loud = times[np.abs(pcm) > LOUD]
    assert len(pcm) and not loud.size, (
        f"the app spoke {loud[0] - took:.2f}-{loud[-1] - took:.2f} s after it took the Stop")
    print(f"\n[e2e] stop during a tool: `s2s-desktop stop` taken {(took - stopped) * 1000:.0f} ms "
          f"after it was run; silent from then on")
    # the cancelled call is not in the history yet: tests/test_tool_answer.py's strict xfail


def _answer_by_voice(app, env, wav: Path) -> tuple[float, float]:
    """The question is up: hold the talk key, say `wav`, let go. Returns (listening since,
    key up)."""
    import subprocess

    xdotool(env, "keydown", COMBO)
    try:
        app.wait(lambda s: s["state"] == "listening", timeout_s=10, interval=0.02)
        listening = time.monotonic()
        subprocess.run(["paplay", "--device=micsrc", str(wav)], env=env, check=True, timeout=30)
        time.sleep(0.3)
    finally:
        up = time.monotonic()
        xdotool(env, "keyup", COMBO)
    return listening, up


def _notes(env) -> list[str]:
    path = Path(env["S2S_DATA_DIR"]) / "notes.md"
    return path.read_text().splitlines() if path.exists() else []


# "No." is said at once, over the question: holding the key silences it
@pytest.mark.parametrize("said, written, wait_s", [("Yes.", True, 1.0), ("No.", False, 0.0)])
def test_a_writing_tool_asks_and_a_spoken_yes_or_no_decides(tool_rig, speech, said, written,
                                                             wait_s):
    app, recorder, env, model = tool_rig
    before = _notes(env)
    question = speech("Please save a note that says buy milk.", pad_s=0.2)
    released, _ = ask(app, env, question)
    asked = app.wait(lambda s: s.get("asking") or s["state"] in ("idle", "error"),
                     timeout_s=60, interval=0.1)
    assert asked.get("asking"), asked
    assert "say yes or no" in asked["detail"], asked["detail"]
    time.sleep(wait_s)
    answered_at = time.monotonic()
    listening, up = _answer_by_voice(app, env, speech(said, pad_s=0.3))
    times, pcm = recorder.samples(listening + 0.2, up)
    assert len(pcm) and np.abs(pcm).max() <= LOUD, "the app spoke while the key was held"
    done = _finished(app, answered_at)
    assert done["state"] == "idle" and done["turn"]["reason"] == "ok", done
    turn = _last_turn(env)
    outcome = [(c["name"], c["outcome"]) for c in turn["tool_calls"]]
    assert outcome == [("save_note", "ok" if written else "denied")], (turn, app.log_tail())
    log = (Path(env["S2S_LOG_DIR"]) / "s2s-desktop.log").read_text()
    assert f"the spoken answer reads as {'yes' if written else 'no'}" in log  # by voice
    added = _notes(env)[len(before):]
    if written:
        assert len(added) == 1 and re.search(r"buy milk$", added[0]), added
    else:
        assert added == []
