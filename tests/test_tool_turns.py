"""A tool turn through the headless pipeline (scripted model, tone voice): the cue comes as
soon as the model begins a call, while it is still writing it (the phrase, or the earcon),
the model's own words before a call are said then, and the answer after the results is
spoken sentence by sentence as it is written."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt

from s2s_desktop.assistant.earcons import Earcon, sound
from tests.helpers import scripted_engines as scripted

WAIT_S = 10.0


def _call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


class CallingLLM(scripted.WordByWordLLM):
    """Round one: `before` then a lookup call, written in two halves with a pause between
    them until `gate` (set by the test) opens. Round two: two sentences, the second only
    once the first has been handed to the voice (`gate2`)."""

    name = "calling"
    before = ""
    gate = threading.Event()
    gate2 = threading.Event()
    gate_opened: list[bool] = []

    def can_call_tools(self) -> bool:
        return True

    def stream(self, messages, stop, options):
        self.seen.append(messages)
        if messages[-1]["role"] == "tool":
            yield f"The lookup says {messages[-1]['content']}. "
            CallingLLM.gate_opened.append(CallingLLM.gate2.wait(WAIT_S))
            yield "That is all."
            return
        if self.before:
            yield self.before
        call = _call("lookup")
        yield call[:14]
        CallingLLM.gate_opened.append(CallingLLM.gate.wait(WAIT_S))
        yield call[14:]


@pytest.fixture
def make_session(monkeypatch):
    from s2s_desktop.engines import registry
    from s2s_desktop.pipeline.runner import HeadlessSession
    from s2s_desktop.tools.spec import Tool, ToolSpec

    scripted.install(monkeypatch)
    monkeypatch.setitem(registry.BACKENDS["llm"], "calling", f"{__name__}:CallingLLM")
    sessions = []

    def make(before="", cue="phrase", earcons=True):
        CallingLLM.before = before
        CallingLLM.gate, CallingLLM.gate2 = threading.Event(), threading.Event()
        CallingLLM.gate_opened = []
        settings = scripted.settings()
        settings.llm.backend = "calling"
        settings.tools.checking_cue = cue
        settings.audio.earcons = earcons
        session = HeadlessSession(settings)
        sessions.append(session)
        session.pipeline.tools.add(Tool(ToolSpec("lookup", "Looks it up."),
                                        lambda args, stop: "forty-two"))
        events = session.pipeline.events
        # the first sound opens the model's pause in its call; the first answer sentence
        # handed to the voice lets it write the second
        events.first_audio.connect(lambda turn: CallingLLM.gate.set(),
                                   Qt.ConnectionType.DirectConnection)
        events.sentence.connect(
            lambda turn, text: CallingLLM.gate2.set() if "lookup says" in text else None,
            Qt.ConnectionType.DirectConnection)
        return session

    yield make
    for session in sessions:
        session.close()


def test_let_me_check_is_heard_while_the_model_is_still_writing_its_call(make_session):
    session = make_session()
    rec = session.ask("Look it up.")
    # the model's pause in mid-call ended because the cue was heard, not by its time-out
    assert CallingLLM.gate_opened[0], "no sound until the call was written"
    assert rec["reply"] == "Let me check. The lookup says forty-two. That is all."
    assert rec["spoken"].startswith("Let me check.")
    assert rec["answered_by"] == "tool"


def test_the_answer_after_a_tool_is_spoken_sentence_by_sentence(make_session):
    session = make_session()
    rec = session.ask("Look it up.")
    # the second sentence was written only after the first went to the voice
    assert CallingLLM.gate_opened == [True, True]
    assert "The lookup says forty-two." in rec["spoken"] and "That is all." in rec["spoken"]


def test_the_models_own_words_before_a_call_are_said_then_and_no_phrase_is_added(
        make_session):
    session = make_session(before="Sure, ")
    rec = session.ask("Look it up.")
    assert CallingLLM.gate_opened[0], "'Sure,' was held until the call was written"
    assert "Let me check" not in rec["reply"]
    assert rec["spoken"].startswith("Sure,") and "forty-two" in rec["spoken"]


def test_the_earcon_cue_plays_first_and_is_not_part_of_the_reply(make_session):
    session = make_session(cue="earcon")
    rec = session.ask("Look it up.")
    assert CallingLLM.gate_opened[0]
    assert rec["reply"] == "The lookup says forty-two. That is all."
    earcon, _ = sound(Earcon.CHECKING)
    volume = session.pipeline.settings.audio.earcon_volume
    head = rec["pcm"][: len(earcon)]
    assert np.allclose(head, earcon * volume, atol=1e-4)  # the turn's audio opens with it


def test_with_earcons_off_the_earcon_cue_falls_back_to_the_phrase(make_session):
    session = make_session(cue="earcon", earcons=False)
    rec = session.ask("Look it up.")
    assert rec["reply"].startswith("Let me check.") and CallingLLM.gate_opened[0]


def test_an_unknown_cue_is_refused_with_the_choices():
    from s2s_desktop import config
    from s2s_desktop.errors import SettingsError

    with pytest.raises(SettingsError, match="phrase or earcon"):
        config.apply_overrides(config.Settings(), {"tools.checking_cue": "beep"})
