"""`s2s-desktop bench` end to end on deterministic engines: the report has every figure the
issue names, the ratios are computed from the medians, and --plot writes a picture."""

from __future__ import annotations

import argparse
import json

from s2s_desktop import bench
from tests.helpers import scripted_engines as scripted


def test_bench_reports_streamed_sequential_and_ideal(monkeypatch, tmp_path, capsys):
    scripted.install(monkeypatch)
    settings = scripted.settings(reply="Paris it is. " + "More words here. " * 6,
                                 word_delay=0.01)
    args = argparse.Namespace(runs=1, json=True, plot=str(tmp_path / "timeline.png"))
    assert bench.bench_command(args, settings) == 0
    report = json.loads(capsys.readouterr().out)
    for cls in ("short", "open"):
        c = report["classes"][cls]
        for key in ("release_to_first_audio_ms", "sequential_first_audio_ms",
                    "ideal_first_audio_ms"):
            assert set(c[key]) == {"median", "min", "max"} and c[key]["median"] > 0
        assert c["ratio_streamed_to_sequential"] == round(
            c["release_to_first_audio_ms"]["median"] / c["sequential_first_audio_ms"]["median"], 3)
        # streaming starts speaking on the first sentence; sequential waits for all of it
        assert c["ratio_streamed_to_sequential"] < 1.0
        assert c["stages"]["llm_first_token_ms"]["median"] is not None
    assert report["stt_after_release_ratio"] is not None
    assert set(report["load_ms"]) >= {"vad", "stt", "llm", "tts"}
    assert report["peak_memory_mb"] > 0
    assert (tmp_path / "timeline.png").stat().st_size > 1000
    assert "release → first audio" in bench.format_table(report)
