"""Local commands: the time, the date, timers, "say that again" and "stop" answered without
the LLM — the matcher, the answers, the timers, and the pipeline skipping the LLM for them."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from s2s_desktop.assistant import local_commands
from s2s_desktop.assistant.intents import IntentKind, IntentMatcher
from s2s_desktop.assistant.local_commands import LocalCommands
from s2s_desktop.assistant.timers import TimerBook
from s2s_desktop.pipeline.runner import HeadlessSession
from tests.helpers import scripted_engines as scripted


@pytest.fixture(scope="module")
def matcher():
    return IntentMatcher("en")


@pytest.mark.parametrize("text, kind", [
    ("What time is it?", IntentKind.TIME),
    ("what's the time", IntentKind.TIME),
    ("Hey, can you tell me what time it is please?", IntentKind.TIME),
    ("What’s the date?", IntentKind.DATE),
    ("What day is it today?", IntentKind.DATE),
    ("How long is left on the timer?", IntentKind.TIMER_LEFT),
    ("How much time is left?", IntentKind.TIMER_LEFT),
    ("Cancel the timer.", IntentKind.TIMER_CANCEL),
    ("Say that again.", IntentKind.REPEAT),
    ("Stop.", IntentKind.STOP),
    ("Okay stop talking", IntentKind.STOP),
])
def test_everyday_phrases_are_recognised(matcher, text, kind):
    assert matcher.match(text).kind is kind


@pytest.mark.parametrize("text", [
    "What is the capital of Japan?",
    "How do I stop a memory leak?",
    "What time is it in Tokyo?",
    "Set a timer for my meeting",
    "Tell me a story about a timer",
    "Why did the date of Easter change?",
    "",
    "...",
])
def test_other_questions_go_to_the_llm(matcher, text):
    assert matcher.match(text) is None


@pytest.mark.parametrize("text, seconds", [
    ("Set a timer for 2 seconds.", 2),
    ("Set a timer for two seconds", 2),
    ("set a 5 minute timer", 300),
    ("Start a timer for twenty five minutes", 1500),
    ("Set a timer for two and a half minutes", 150),
    ("Set a timer for a minute and a half", 90),
    ("set a timer for 1 minute and 30 seconds", 90),
    ("timer for half an hour", 1800),
    ("Set a timer for an hour", 3600),
    ("Set a timer for 1.5 hours", 5400),
])
def test_timer_lengths_are_read_from_words_and_digits(matcher, text, seconds):
    intent = matcher.match(text)
    assert intent.kind is IntentKind.TIMER_SET
    assert intent.seconds == seconds


def fixed_clock(hour: int, minute: int):
    when = datetime(2026, 3, 5, hour, minute, tzinfo=timezone(timedelta(hours=9)))
    return lambda: when


def test_time_in_the_users_clock_style(monkeypatch):
    lc = LocalCommands(now=fixed_clock(15, 7))
    monkeypatch.setattr(local_commands, "uses_12_hour_clock", lambda: True)
    assert lc.answer("What time is it?").text == "It's 3:07 PM."
    monkeypatch.setattr(local_commands, "uses_12_hour_clock", lambda: False)
    assert lc.answer("What time is it?").text == "It's 15:07."
    monkeypatch.setattr(local_commands, "uses_12_hour_clock", lambda: True)
    assert LocalCommands(now=fixed_clock(0, 30)).answer("what's the time").text == "It's 12:30 AM."


def test_the_date_names_the_day_month_and_year():
    text = LocalCommands(now=fixed_clock(9, 0)).answer("What's the date?").text
    assert text == "Today is Thursday, March 5, 2026."


def test_the_time_answer_comes_from_the_os_clock():
    before = datetime.now().astimezone()
    text = LocalCommands().answer("What time is it?").text
    after = datetime.now().astimezone()
    shown = {LocalCommands.clock_text(before), LocalCommands.clock_text(after)}
    assert any(f"It's {s}." == text for s in shown), (text, shown)


def test_timers_are_set_listed_and_cancelled():
    timers = TimerBook()
    lc = LocalCommands(timers)
    assert lc.answer("How long is left on the timer?").text == "There is no timer running."
    assert lc.answer("Set a timer for 5 minutes").text == "Timer set for 5 minutes."
    [timer] = timers.running()
    assert timer.label == "5 minute" and 299 <= timer.left_s() <= 300
    left = lc.answer("How long is left on the timer?").text
    assert left.startswith("Your 5 minute timer has 4 minutes 5") or "5 minutes left" in left
    assert lc.answer("Cancel the timer").text == "Cancelled your 5 minute timer."
    assert timers.running() == []
    assert lc.answer("Cancel the timer").text == "There is no timer to cancel."
    lc.answer("Set a timer for 25 hours")
    assert timers.running() == []  # refused, said so
    timers.close()


def test_a_due_timer_rings_once_and_a_cancelled_one_never():
    rung: list = []
    done = threading.Event()
    timers = TimerBook(on_due=lambda t: (rung.append(t.label), done.set()))
    timers.start(1, "1 second")
    cancelled = timers.start(1, "cancelled")
    timers.cancel(cancelled.id)
    assert done.wait(3)
    time.sleep(0.3)
    assert rung == ["1 second"]
    assert timers.running() == []
    assert LocalCommands(timers).timer_done_text("5 minute") == "Your 5 minute timer is done."


def test_say_that_again_repeats_the_last_reply():
    replies = ["The capital of Japan is Tokyo."]
    lc = LocalCommands(last_reply=lambda: replies[-1])
    assert lc.answer("Say that again").text == "The capital of Japan is Tokyo."
    assert LocalCommands().answer("repeat that").text == "I haven't said anything yet."


# ---------------------------------------------------------------- through the pipeline


@pytest.fixture
def session(monkeypatch):
    scripted.install(monkeypatch)
    made = []

    def make(local_commands: bool = True, **kw):
        settings = scripted.settings(**kw)
        settings.assistant.local_commands = local_commands
        s = HeadlessSession(settings)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_the_time_is_answered_locally_and_the_llm_is_not_called(session):
    s = session(reply="It is noon somewhere.")
    rec = s.ask("What time is it?")
    assert rec["answered_by"] == "local"
    assert s.pipeline.llm.engine.seen == []  # the LLM never saw the question
    assert rec["reply"].startswith("It's ") and rec["reason"] == "ok"
    assert len(rec["pcm"]) > 0  # and it was spoken
    other = s.ask("What is the capital of Japan?")
    assert other["answered_by"] == "llm" and other["reply"] == "It is noon somewhere."
    assert len(s.pipeline.llm.engine.seen) == 1


def test_local_commands_off_sends_everything_to_the_llm(session):
    s = session(local_commands=False, reply="I do not know the time.")
    rec = s.ask("What time is it?")
    assert rec["answered_by"] == "llm" and rec["reply"] == "I do not know the time."


def test_typed_and_spoken_turns_mix_in_one_conversation(session):
    s = session(reply="Tokyo is the capital.", heard="What is the capital of Japan?")
    spoken = s.turn(np.concatenate([np.zeros(1600), 0.3 * np.ones(8000)]).astype(np.float32))
    assert spoken["transcript"] == "What is the capital of Japan?"
    again = s.ask("say that again")
    assert again["answered_by"] == "local" and again["reply"] == "Tokyo is the capital."
    stop = s.ask("stop")
    assert stop["answered_by"] == "local" and stop["reply"] == "" and len(stop["pcm"]) == 0
    assert s.ask("repeat")["reply"] == "Tokyo is the capital."  # "stop" said nothing to repeat


def test_an_empty_typed_question_is_refused(session):
    s = session()
    with pytest.raises(ValueError, match="empty"):
        s.pipeline.submit_text("   ")
