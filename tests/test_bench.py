"""`s2s-desktop bench` end to end on deterministic engines: the report has every figure the
issues name, the ratios are computed from the medians, and --plot writes a picture."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pytest

from s2s_desktop.audio.silence import trim_trailing_silence
from s2s_desktop.audio.speaker import SpeakerSink
from s2s_desktop.commands import bench
from s2s_desktop.commands.bench_measures import (
    by_group,
    ideal_ms,
    longest_gap_ms,
    wer,
)
from tests.helpers import scripted_engines as scripted
from tests.helpers.fake_sounddevice import FakeSoundDevice


@pytest.fixture
def fast_bench(monkeypatch):
    """Scripted engines, recordings fed 20x faster than real time, a fake output device."""
    scripted.install(monkeypatch)
    monkeypatch.setattr(bench, "PACE", 0.05)

    def speaker(settings):
        sink = SpeakerSink(sd=FakeSoundDevice())
        sink.open(16000)
        return sink

    monkeypatch.setattr(bench, "open_speaker", speaker)
    return scripted.settings(reply="Paris it is. " + "More words here. " * 6, word_delay=0.01,
                             heard="What is the capital of France?")


def test_bench_reports_streamed_sequential_and_ideal(fast_bench, tmp_path, capsys):
    args = argparse.Namespace(runs=1, json=True, plot=str(tmp_path / "timeline.png"))
    assert bench.bench_command(args, fast_bench) == 0
    report = json.loads(capsys.readouterr().out)
    for cls in ("short", "open"):
        c = report["classes"][cls]
        for key in ("release_to_first_audio_ms", "sequential_first_audio_ms",
                    "ideal_first_audio_ms"):
            assert set(c[key]) == {"median", "min", "max"} and c[key]["median"] > 0
        assert c["ratio_streamed_to_sequential"] == pytest.approx(
            c["release_to_first_audio_ms"]["median"] / c["sequential_first_audio_ms"]["median"],
            abs=0.002)  # medians of unrounded figures
        # streaming starts speaking on the first sentence; sequential waits for all of it
        assert c["ratio_streamed_to_sequential"] < 1.0
        # the ideal is made of the same turn's own stage spans: never above the streamed time
        assert c["ideal_first_audio_ms"]["median"] <= c["release_to_first_audio_ms"]["median"]
        assert c["stages"]["llm_first_token_ms"]["median"] is not None
        assert c["replies"] and c["replies"][0].startswith("Paris it is.")
    assert report["stt_after_release_ratio"] is not None
    assert set(report["load_ms"]) >= {"vad", "stt", "llm", "tts"}
    assert report["peak_memory_mb"] > 0
    assert (tmp_path / "timeline.png").stat().st_size > 1000
    assert "release → first audio" in bench.format_table(report)


def test_bench_reports_the_hold_sweep_a_conversation_gaps_and_word_errors(fast_bench, capsys):
    args = argparse.Namespace(runs=1, json=True, plot=None)
    assert bench.bench_command(args, fast_bench) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["press"]["trailing_quiet_s"] == 0.0
    assert set(report["hold_sweep"]) == {"0", "0.15", "0.3"}
    for row in report["hold_sweep"].values():
        assert set(row["release_to_first_audio_ms"]) == {"median", "min", "max"}
        assert row["release_to_first_audio_ms"]["median"] > 0
        assert row["stt_after_release_ratio"] is not None and row["stt_after_release_ratio"] >= 0

    turns = report["conversation"]["by_turn"]
    assert len(turns) >= 12 and [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
    for t in turns:
        assert {"turn", "release_to_first_audio_ms", "to_device_ms",
                "prompt_tokens_evaluated_at_release"} <= set(t)
        assert t["release_to_first_audio_ms"]["median"] > 0
        # the device callback takes the first sample after it was handed over
        assert t["to_device_ms"]["median"] >= t["release_to_first_audio_ms"]["median"]
        assert t["reply"].startswith("Paris it is.") and t["question"] in bench.HELD_OUT
    # the scripted LLM sees the whole conversation: history grows turn by turn
    groups = report["conversation"]["by_group"]["release_to_first_audio_ms"]
    assert set(groups) == {"1", "2-8", "9+"}

    assert set(report["longest_gap_ms"]) == {"median", "min", "max"}
    assert report["longest_gap_ms"]["min"] >= 0
    # the scripted STT always hears the capital of France: far from the held-out questions
    assert 0.3 < report["transcript_wer"] <= 2.0
    assert report["to_device"] == "measured"
    table = bench.format_table(report)
    assert "1 run per class" in table and "1 runs" not in table
    assert re.search(r"turn +9\+: release → first audio \d", table)
    assert re.search(r"hold +0.15 s: release → first audio \d", table)
    assert "tts_rtf (× real time)" in table


def test_bench_without_an_output_device_says_to_device_was_not_measured(monkeypatch):
    scripted.install(monkeypatch)
    monkeypatch.setattr(bench, "PACE", 0.05)
    monkeypatch.setattr(bench, "open_speaker", lambda settings: None)
    monkeypatch.setattr(bench, "HELD_OUT", bench.HELD_OUT[:2])
    b = bench.Bench(scripted.settings(reply="Yes. It is."), runs=1)
    try:
        text, audio = "What is the capital of France?", np.zeros(16000, np.float32)
        audio[4000:12000] = 0.3 * np.sin(np.arange(8000) * 0.1)
        rec = b.press(text, audio)
    finally:
        b.close()
    assert rec["to_device_ms"] is None and rec["ideal_ms"] is not None


def test_measures_from_a_turns_own_marks():
    marks = {"released": 0.0, "vad_start": 0.01, "vad_end": 0.02, "stt_end": 0.05,
             "llm_start": 0.06, "first_sentence": 0.16, "tts_first_start": 0.17,
             "tts_first_chunk": 0.27, "first_audio": 0.30}
    assert ideal_ms(marks) == pytest.approx(10 + 30 + 100 + 100)
    assert ideal_ms({k: v for k, v in marks.items() if k != "stt_end"}) is None
    # 1 s of audio handed at 0, the next at 1.5 s: half a second of silence in between
    assert longest_gap_ms([(0.0, 16000), (1.5, 8000), (1.6, 8000)], 16000) == 500.0
    assert wer([("What is the capital of France?", "what is the capital and friends")]) == (
        round(2 / 6, 3))
    rows = [{"turn": n, "x": [float(n)]} for n in range(1, 13)]
    assert by_group(rows, "x") == {"1": {"median": 1.0, "min": 1.0, "max": 1.0},
                                   "2-8": {"median": 5.0, "min": 2.0, "max": 8.0},
                                   "9+": {"median": 10.5, "min": 9.0, "max": 12.0}}
    speech = np.concatenate([np.full(1600, 0.2, np.float32), np.zeros(8000, np.float32)])
    assert len(trim_trailing_silence(speech, 16000)) == 1600


def test_bench_asks_the_questions_of_a_file_in_their_voices(fast_bench, tmp_path, capsys):
    from s2s_desktop.commands.bench_questions import read_questions

    asked = tmp_path / "q.txt"
    asked.write_text("# two voices\nen-us | What is the capital of Canada?\n\n"
                     "en-gb-scotland | Where do penguins live?\n")
    assert [(q.voice, q.text) for q in read_questions(asked)] == [
        ("en-us", "What is the capital of Canada?"),
        ("en-gb-scotland", "Where do penguins live?")]
    args = argparse.Namespace(runs=1, json=True, plot=None, questions=asked)
    assert bench.bench_command(args, fast_bench) == 0
    turns = json.loads(capsys.readouterr().out)["conversation"]["by_turn"]
    assert [t["question"] for t in turns] == [
        "What is the capital of Canada?", "Where do penguins live?"]


def test_a_questions_file_it_cannot_read_says_which_line_and_how():
    from pathlib import Path

    from s2s_desktop.commands.bench_questions import read_questions
    from s2s_desktop.errors import S2SError

    gone = Path(__file__).with_name("no-such-questions.txt")
    with pytest.raises(S2SError, match="cannot read the questions"):
        read_questions(gone)


def test_a_malformed_questions_line_is_named(tmp_path):
    from s2s_desktop.commands.bench_questions import read_questions
    from s2s_desktop.errors import S2SError

    bad = tmp_path / "q.txt"
    bad.write_text("en-us | What time is it?\nen us | Who are you?\n")
    with pytest.raises(S2SError, match=r"q.txt:2: write one question a line as 'voice \| q"):
        read_questions(bad)


def test_the_tuning_and_reporting_sets_are_apart_and_in_four_voices():
    from pathlib import Path

    from s2s_desktop.commands.bench_questions import read_questions

    folder = Path(__file__).resolve().parent.parent / "scripts" / "questions"
    tuning, reporting = (read_questions(folder / f"{name}.txt")
                         for name in ("tuning", "reporting"))
    assert len(reporting) >= 24 and len({q.voice for q in reporting}) >= 4
    assert not {q.text for q in tuning} & {q.text for q in reporting}
    used = set(bench.HELD_OUT) | {t for texts in bench.QUESTIONS.values() for t in texts}
    assert not {q.text for q in reporting} & used  # never tuned on through the bench either
