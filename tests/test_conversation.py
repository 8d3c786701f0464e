"""Conversations that stay fast and sane: the history window slides in blocks (the prompt's
start stays put for several turns), a reply that starts to loop is ended before the loop is
spoken, and New conversation forgets what the LLM saw."""

from __future__ import annotations

import time

import numpy as np

from s2s_desktop.engines.llm.history import build_messages, window
from s2s_desktop.pipeline.chunker import SentenceChunker
from s2s_desktop.pipeline.repetition import LoopGuard, repeated_phrase, share_of_earlier
from s2s_desktop.pipeline.turns import Conversation
from s2s_desktop.profiles import profile_overrides

VOICE = (0.2 * np.sin(np.linspace(0, 800, 16000))).astype(np.float32)


# ---------------------------------------------------------------- history window


def test_the_window_drops_old_exchanges_in_blocks_so_the_prompt_start_holds():
    history = [(f"q{i}", f"a{i}") for i in range(30)]
    firsts, sizes = [], []
    for n in range(1, 31):
        kept = window(history[:n], 8)
        firsts.append(kept[0][0])
        sizes.append(len(kept))
    assert max(sizes) == 8 and min(sizes[8:]) == 5  # never more than 8, at least 8 - 4 + 1
    changes = sum(1 for a, b in zip(firsts[:-1], firsts[1:], strict=True) if a != b)
    assert changes == 6  # turns 9, 13, 17, 21, 25, 29: once every 4 turns, not every turn
    assert window(history, 0) == [] and window(history[:3], 8) == history[:3]


def test_build_messages_uses_the_same_window():
    history = [(f"q{i}", f"a{i}") for i in range(9)]
    msgs = build_messages("S", history, "new", history_turns=8)
    assert [m["content"] for m in msgs[1:3]] == ["q4", "a4"]  # q0..q3 went as one block
    assert msgs[-1] == {"role": "user", "content": "new"}


def test_the_starter_profile_keeps_at_most_two_exchanges():
    assert profile_overrides("starter")["llm.history_turns"] <= 2


def test_a_long_conversation_is_trimmed_in_halves():
    conv = Conversation()
    for i in range(Conversation.KEEP + 1):
        conv.add(f"q{i}", f"a{i}")
    kept = conv.exchanges()
    assert len(kept) == Conversation.KEEP // 2 + 1 and kept[-1] == (f"q{Conversation.KEEP}",
                                                                    f"a{Conversation.KEEP}")


# ---------------------------------------------------------------- loop stop


def test_a_phrase_said_twice_ends_the_reply_before_the_second_time():
    reply = ("Le Grand Paris est le premier lieu de la maire, le premier lieu de la maire, "
             "le premier lieu")
    guard = LoopGuard([])
    cut = None
    for i in range(1, len(reply) + 1):  # fed as it streams
        cut = guard.cut(reply[:i])
        if cut is not None:
            break
    assert reply[:cut].rstrip(", ") == "Le Grand Paris est le premier lieu de la maire"
    assert repeated_phrase(reply[:cut]) is None


def test_a_reply_that_copies_an_earlier_one_is_ended():
    earlier = "The opposite on part is a type of fruit called a fruit."
    guard = LoopGuard(["Paris is the capital of France.", earlier])
    reply = "Well. The opposite on part is a type of fruit called a fruit."
    cuts = [guard.cut(reply[:i]) for i in range(1, len(reply) + 1)]
    cut = next(c for c in cuts if c is not None)
    assert reply[:cut].strip() == "Well."
    assert share_of_earlier(reply[:cut], earlier) < 0.5
    # a copy from the first word: nothing is left (the stage then asks without the history)
    guard = LoopGuard([earlier])
    cuts = [guard.cut(earlier[:i]) for i in range(1, len(earlier) + 1)]
    assert next(c for c in cuts if c is not None) == 0


def test_a_short_earlier_reply_said_again_whole_is_a_copy_once_its_last_word_is_said():
    earlier = 'The answer is: "Echoflighthouse"'
    guard = LoopGuard(["Yes.", earlier])
    reply = 'The answer is: "Echoflighthouse"'
    assert all(guard.cut(reply[:i]) is None for i in range(1, len(reply)))  # still growing
    assert guard.cut(reply) == 0  # the closing quote ends the last word
    guard = LoopGuard([earlier])
    unquoted = "The answer is Echoflighthouse"
    assert all(guard.cut(unquoted[:i]) is None for i in range(1, len(unquoted) + 1))
    assert guard.cut(unquoted, final=True) == 0  # the reply ended on that word


def test_ordinary_replies_are_not_cut():
    earlier = ["The capital of France is Paris.", "Yes.", "Bees make honey from nectar.",
               "The answer is 8."]
    guard = LoopGuard(earlier)
    reply = ("The capital of Germany is Berlin, and it is a big city. Yes, Berlin is also "
             "known for its museums, and the capital has many parks.")
    assert all(guard.cut(reply[:i]) is None for i in range(1, len(reply) + 1))
    assert guard.cut(reply, final=True) is None
    for other in ("Yes.", "The answer is 12.", "The answer is eight."):  # short, not a copy
        assert LoopGuard(earlier).cut(other, final=True) is None


def test_the_chunker_takes_back_what_it_has_not_said():
    chunker = SentenceChunker()
    said = chunker.feed("Paris is lovely. The first place of the town, the first")
    assert said == ["Paris is lovely."]
    assert chunker.retract(len(" the first")) == len(" the first")
    assert chunker.flush() == ["The first place of the town,"]


# ---------------------------------------------------------------- in the pipeline


def test_a_looping_reply_is_cut_before_the_loop_is_spoken(session_factory):
    loop = "It is the first place of the town, the first place of the town, the first place."
    session = session_factory(reply=loop)
    rec = session.turn(VOICE)
    assert rec["reason"] == "ok"
    assert rec["reply"] == "It is the first place of the town,"
    assert rec["spoken"] == "It is the first place of the town,"
    assert session.pipeline.conversation.exchanges()[-1][1] == rec["reply"]


def test_a_reply_copying_an_earlier_one_is_asked_again_without_the_history(session_factory):
    session = session_factory(reply="The capital of Germany is Berlin, a big city.")
    first = session.turn(VOICE)
    second = session.turn(VOICE)  # this scripted model says the same whatever it is asked
    prompts = session.pipeline.llm.engine.seen
    assert first["reply"] == "The capital of Germany is Berlin, a big city."
    assert [m["role"] for m in prompts[-2]] == ["system", "user", "assistant", "user"]
    assert [m["role"] for m in prompts[-1]] == ["system", "user"]  # asked again, on its own
    # the same answer on its own stands: an answer, not silence
    assert second["reason"] == "ok" and second["reply"] == first["reply"] == second["spoken"]


def test_a_short_reply_said_again_for_a_new_question_is_asked_again_alone(session_factory):
    session = session_factory(reply="The answer is Echoflighthouse")
    first = session.turn(VOICE)
    second = session.turn(VOICE)
    prompts = session.pipeline.llm.engine.seen
    assert [m["role"] for m in prompts[-2]] == ["system", "user", "assistant", "user"]
    assert [m["role"] for m in prompts[-1]] == ["system", "user"]  # asked again, on its own
    assert second["reply"] == first["reply"] == second["spoken"]


def test_new_conversation_forgets_what_the_llm_saw(session_factory):
    session = session_factory(heard="My name is Anna.")
    session.turn(VOICE)
    session.turn(VOICE)
    assert len(session.pipeline.llm.engine.seen[-1]) == 4  # system, exchange 1, question
    session.pipeline.new_conversation()
    assert session.pipeline.conversation.exchanges() == []
    session.turn(VOICE)
    assert [m["role"] for m in session.pipeline.llm.engine.seen[-1]] == ["system", "user"]


def test_new_conversation_stops_a_running_reply(session_factory):
    session = session_factory(reply=" ".join(f"word{i}" for i in range(300)), word_delay=0.01)
    pipe = session.pipeline
    turn = pipe.submit(VOICE)
    deadline = time.monotonic() + 10
    while "first_audio" not in pipe.book.get(turn).marks and time.monotonic() < deadline:
        time.sleep(0.02)
    pipe.new_conversation()
    assert pipe.book.get(turn).reason == "interrupted"
    assert pipe.conversation.exchanges() == []
