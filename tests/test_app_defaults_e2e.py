"""The real app with its defaults (earcons on, the microphone as shipped), on Xvfb with a
private PulseAudio server: a question said 400 ms after the press keeps its first word, and
typed questions (`s2s-desktop ask`), whose replies open the speaker on demand, reach the
speaker whole: a local answer and an LLM answer, transcribed from the speaker's recording."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import listen, same_words
from tests.test_app_e2e import COMBO, RATE, onset, running_rig
from tests.test_app_first_run_e2e import ask_150ms_after_the_press

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.required(platforms=("linux",))]

DEFAULTS = ("--profile", "starter", "--set", f"hotkey.combo={COMBO}")  # nothing else changed


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with running_rig(tmp_path_factory.mktemp("defaults"), DEFAULTS) as parts:
        yield parts


@pytest.fixture(scope="module")
def starter_voice(starter_settings):
    """The starter's Piper voice in the test process, to say a reply the way the app does."""
    from s2s_desktop.engines.registry import engine_class

    voice = engine_class("tts", starter_settings.tts.backend)(starter_settings.tts, "cpu")
    voice.load()
    return voice


def heard_from_the_voice(voice, listener, text: str) -> str:
    """What the listener hears in `text` said cleanly by the starter voice: tiny.en hears
    piper's "eighteen" as "taking" or "aching" and "four" as "for" (24 hours tried: 2
    misheard), so a reply read at 18:xx fails against its text whatever the speaker did."""
    import numpy as np

    pcm = np.concatenate(list(voice.synthesize(text, None, 1.0)))
    rate = voice.sample_rate
    pad = np.zeros(rate // 4, np.float32)
    return listen(listener, np.concatenate([pad, pcm, pad]), rate)


def last_exchange(app) -> dict:
    lines = (app.root / "data" / "history.jsonl").read_text().splitlines()
    return json.loads(lines[-1])


def heard_whole(reply: str, heard: str, voice, listener) -> bool:
    """The recording says the reply: as its text, or as the same listener hears the reply
    said cleanly (its own mishearings are not the speaker's loss)."""
    return same_words(reply, heard, at_least=0.8) or same_words(
        heard_from_the_voice(voice, listener, reply), heard, at_least=0.8)


def typed_reply_from_the_speaker(rig, starter_stt_model, question: str) -> tuple[str, str]:
    """(the reply, what the speaker's recording says) for a typed question."""
    app, recorder, env = rig
    app.wait(lambda s: s["state"] == "idle", timeout_s=60)
    time.sleep(1.0)  # the speaker closes at idle: this reply opens it on demand
    asked = time.monotonic()
    res = app.cli("ask", question, "--json", timeout=180)
    assert res.returncode == 0, res.stderr
    reply = json.loads(res.stdout)["reply"]
    time.sleep(0.8)  # the last samples reach the monitor
    times, pcm = recorder.samples(asked, time.monotonic())
    first = onset(times, pcm)
    assert first is not None, "nothing was played"
    heard = listen(starter_stt_model, pcm[times >= first - 0.05], RATE)
    print(f"\n[defaults e2e] typed {question!r}: replied {reply!r}, the speaker said {heard!r}")
    return reply, heard


# runs first (file order): the first reply of a brand-new app and PulseAudio server. It was a
# non-strict xfail after session 12 ("It's 16:32." heard as "at 1632."). tiny.en hears a clean
# "It's 16:06." from the voice the same way, and heard_whole now allows for that. It then passed
# in 8 of 8 runs (3 CI, 5 here), so it is a plain test again.
def test_the_first_reply_of_a_new_app_is_heard_whole(rig, starter_stt_model, starter_voice):
    reply, heard = typed_reply_from_the_speaker(rig, starter_stt_model, "What time is it?")
    assert heard_whole(reply, heard, starter_voice, starter_stt_model), (reply, heard)


@pytest.mark.parametrize("question", ["What time is it?", "What is the capital of Japan?"])
def test_a_typed_question_is_heard_whole_from_the_speaker(rig, starter_stt_model, starter_voice,
                                                         question):
    reply, heard = typed_reply_from_the_speaker(rig, starter_stt_model, question)
    assert heard_whole(reply, heard, starter_voice, starter_stt_model), (reply, heard)


def test_a_question_said_400ms_after_the_press_keeps_its_first_word(rig, speech):
    app, recorder, env = rig
    question = speech("What is the capital of France?", voice="en", pad_s=0.0)
    for _attempt in range(3):  # a busy machine can start paplay late: then ask again
        app.wait(lambda s: s["state"] == "idle", timeout_s=120)
        gap_ms, _ = ask_150ms_after_the_press(env, question, app.root, after_s=0.4, combo=COMBO)
        app.wait(lambda s: s["state"] in ("idle", "error") and s["turn"].get("finished_at"), 180)
        print(f"\n[defaults e2e] speech began {gap_ms:.0f} ms after xdotool keydown")
        if 380 <= gap_ms < 600:
            break
    else:
        pytest.fail("paplay never started 400-600 ms after the press: the machine is busy")
    said = last_exchange(app)
    assert said["user"].lower().split()[:1] == ["what"], said
