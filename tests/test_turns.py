"""FinishedTurn: the one rule for what a reply leaves behind, and its JSON record (the keys of
`run --json`, the benchmark and `s2s-desktop ask --json`)."""

from __future__ import annotations

import json

from s2s_desktop import ipc
from s2s_desktop.pipeline.turns import FinishedTurn, TurnBook
from s2s_desktop.states import TurnReason

RECORD_KEYS = [
    "turn",
    "input",
    "transcript",
    "language",  # the spoken language the turn was heard in (issue 33)
    "reply",
    "spoken",
    "reason",
    "stt_reused_partial",
    "prompt_tokens_evaluated_at_release",
    "answered_by",
    "tool_calls",  # issue 31: the turn's tool calls
    "error",
    "timings_ms",
]


def finished(reason: TurnReason) -> FinishedTurn:
    book = TurnBook()
    book.open(3, source="question.wav", released=10.0)
    book.update(3, transcript="What is the capital?", reply="Paris. It is lovely.",
                answered_by="llm")
    book.update(3, spoken=["Paris."])
    book.mark(3, "first_audio", 10.5)
    return book.finish(3, reason).finished_view()


def test_kept_reply_is_the_spoken_part_when_interrupted_and_the_whole_when_ok():
    assert finished(TurnReason.INTERRUPTED).kept_reply() == "Paris."
    assert finished(TurnReason.OK).kept_reply() == "Paris. It is lovely."


def test_the_record_keeps_its_keys_and_reads_back():
    rec = finished(TurnReason.OK)
    data = rec.to_dict()
    assert list(data) == RECORD_KEYS
    assert data["input"] == "question.wav" and data["spoken"] == "Paris."
    assert data["timings_ms"]["release_to_first_audio"] == 500.0
    assert json.loads(json.dumps(data))["reason"] == "ok"
    back = FinishedTurn.from_dict(json.loads(json.dumps(data)))
    assert back.to_dict() == data and back.reason is TurnReason.OK


def test_ask_prints_an_interrupted_reply_as_far_as_it_was_spoken(monkeypatch, capsys):
    rec = finished(TurnReason.INTERRUPTED)

    def request(command, payload=None, name=None, timeout_ms=0):
        if command == "ask":
            return {"ok": True, "turn": rec.turn}
        return {"ok": True, "record": rec.to_dict()}

    monkeypatch.setattr(ipc, "request", request)
    assert ipc.send_question("What is the capital?", poll_s=0) == 0
    assert capsys.readouterr().out == "Paris.\n"
    assert ipc.send_question("What is the capital?", json_output=True, poll_s=0) == 0
    assert json.loads(capsys.readouterr().out) == rec.to_dict()
