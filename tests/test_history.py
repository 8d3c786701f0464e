"""history.jsonl: one line per finished turn, private to the user, robust to torn and corrupt
lines, an interrupted reply kept as far as it was spoken, clear() forgets it all."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from s2s_desktop.history import Exchange, History
from s2s_desktop.pipeline.turns import FinishedTurn
from s2s_desktop.states import TurnReason


def turn(
    transcript="What is the capital of France?",
    reply="Paris. It is lovely.",
    spoken="Paris.",
    reason="ok",
    **kw,
):
    return FinishedTurn(
        turn=1,
        transcript=transcript,
        reply=reply,
        spoken=spoken,
        reason=TurnReason(reason),
        error="",
        timings_ms={"release_to_first_audio": 812.5, "total": None},
        **kw,
    )


def test_turns_round_trip_and_come_back_in_order(tmp_path):
    h = History(tmp_path / "history.jsonl")
    assert h.append(Exchange.from_turn(turn()))
    assert h.append(Exchange.from_turn(turn("And of Japan?", "Tokyo.", "Tokyo.")))
    loaded, problems = History(h.path).load()
    assert problems == []
    assert [(e.user, e.assistant) for e in loaded] == [
        ("What is the capital of France?", "Paris. It is lovely."),
        ("And of Japan?", "Tokyo."),
    ]
    assert loaded[0].timings_ms == {"release_to_first_audio": 812.5}  # None timings dropped
    assert len(h.path.read_text().splitlines()) == 2


def test_an_interrupted_reply_is_kept_as_far_as_it_was_spoken(tmp_path):
    ex = Exchange.from_turn(turn(reason="interrupted"))
    assert ex.assistant == "Paris." and ex.reason == "interrupted"
    h = History(tmp_path / "history.jsonl")
    h.append(ex)
    assert History(h.path).load()[0][0].assistant == "Paris."


def test_turns_with_nothing_heard_are_not_kept():
    assert Exchange.from_turn(turn(transcript="", reason="no speech")) is None
    assert Exchange.from_turn(turn(transcript="  ")) is None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_the_file_is_private_to_the_user(tmp_path):
    path = tmp_path / "data" / "history.jsonl"
    History(path).append(Exchange.from_turn(turn()))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_corrupt_lines_are_skipped_and_reported(tmp_path):
    path = tmp_path / "history.jsonl"
    good = Exchange("Hi", "Hello!").to_json()
    path.write_bytes(
        b"\n".join([good.encode(), b"{not json", b"[1, 2]", b"\xff\xfe binary", good.encode()])
        + b"\n"
    )
    loaded, problems = History(path).load()
    assert [e.user for e in loaded] == ["Hi", "Hi"]
    assert len(problems) == 1 and "3 unreadable lines" in problems[0]


def test_a_torn_last_line_does_not_swallow_the_next_turn(tmp_path):
    path = tmp_path / "history.jsonl"
    good = Exchange("Hi", "Hello!").to_json()
    path.write_text(good + "\n" + good[:20], encoding="utf-8")  # a crash mid-write
    h = History(path)
    loaded, problems = h.load()
    assert len(loaded) == 1 and problems
    h.append(Exchange("Next", "One."))
    again, _ = History(path).load()
    assert [e.user for e in again] == ["Hi", "Next"]


def test_each_line_is_one_complete_json_object(tmp_path):
    h = History(tmp_path / "history.jsonl")
    text = 'Line one\nline two with "quotes" and ünïcode ✓'
    h.append(Exchange(text, text))
    raw = h.path.read_text(encoding="utf-8")
    assert raw.count("\n") == 1
    assert json.loads(raw)["user"] == text


def test_clear_removes_the_file_and_history_can_be_off(tmp_path):
    h = History(tmp_path / "history.jsonl")
    h.append(Exchange("Hi", "Hello"))
    h.clear()
    assert not h.path.exists()
    h.clear()  # twice is fine
    assert History(h.path).load() == ([], [])
    off = History(tmp_path / "off.jsonl", enabled=False)
    assert off.append(Exchange("Hi", "Hello")) is False
    assert not off.path.exists()


def test_default_location_is_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("S2S_DATA_DIR", str(tmp_path / "d"))
    assert History().path == tmp_path / "d" / "history.jsonl"
