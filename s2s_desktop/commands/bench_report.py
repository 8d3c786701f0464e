"""The benchmark's report for people: the table `s2s-desktop bench` prints, and --plot's
timeline of one turn."""

from __future__ import annotations

from ..errors import S2SError


def _cell(st: dict, digits: int = 0) -> str:
    if st["median"] is None:
        return "-"
    return f"{st['median']:.{digits}f} ({st['min']:.{digits}f}–{st['max']:.{digits}f})"


def format_table(report: dict) -> str:
    runs = report["runs"]
    classes = report["classes"].values()
    lines = [
        f"s2s-desktop bench — {runs} run{'s' if runs != 1 else ''} per class, key released "
        "with the last word; medians (min–max) in ms",
        "",
        f"{'':28}" + "".join(f"{c:>24}" for c in report["classes"]),
    ]
    for label, key in (
        ("release → first audio", "release_to_first_audio_ms"),
        ("sequential baseline", "sequential_first_audio_ms"),
        ("ideal (own stage marks)", "ideal_first_audio_ms"),
    ):
        lines.append(f"{label:28}" + "".join(f"{_cell(c[key]):>24}" for c in classes))
    for label, key in (
        ("streamed / sequential", "ratio_streamed_to_sequential"),
        ("streamed / ideal", "ratio_streamed_to_ideal"),
    ):
        lines.append(f"{label:28}" + "".join(
            f"{c[key]:>24.2f}" if c[key] is not None else f"{'-':>24}" for c in classes))
    lines.append("")
    for key in next(iter(classes))["stages"]:
        digits, label = (2, "tts_rtf (× real time)") if key == "tts_rtf" else (0, key)
        lines.append(f"{label:28}"
                     + "".join(f"{_cell(c['stages'][key], digits):>24}" for c in classes))
    lines += ["", "key released after the last word (held-out questions):"]
    for hold, row in report["hold_sweep"].items():
        lines.append(f"  hold {hold:>4} s: release → first audio "
                     f"{_cell(row['release_to_first_audio_ms'])}, STT left after release / "
                     f"whole transcription {row['stt_after_release_ratio']}")
    convo = report["conversation"]
    lines += ["", f"one conversation of {len(convo['by_turn'])} questions, by turn number:"]
    for group, st in convo["by_group"]["release_to_first_audio_ms"].items():
        device = convo["by_group"]["to_device_ms"][group]
        lines.append(f"  turn {group:>4}: release → first audio {_cell(st)}, "
                     f"to the device {_cell(device)}")
    tokens = [r["prompt_tokens_evaluated_at_release"] for r in convo["by_turn"]]
    lines.append("  prompt tokens evaluated at release, by turn: "
                 + (", ".join("-" if t is None else f"{t:.0f}" for t in tokens)))
    lines += [
        "",
        f"longest silence inside a reply: {_cell(report['longest_gap_ms'])} ms",
        f"transcript word error rate: {report['transcript_wer']}",
        f"STT left after release / whole transcription: {report['stt_after_release_ratio']}",
        "load (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in report["load_ms"].items()),
        f"peak memory: {report['peak_memory_mb']} MB; {report['machine']['cpus']} CPUs",
    ]
    if report["to_device"] != "measured":
        lines.append(report["to_device"])
    return "\n".join(lines)
def plot_timeline(record, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise S2SError('--plot needs matplotlib: pip install "s2s-desktop[plot]"') from None
    m = record.marks
    t0 = m["released"]
    spans = [
        ("VAD", "vad_start", "vad_end"),
        ("STT", "stt_start", "stt_end"),
        ("LLM", "llm_start", "llm_end"),
        ("TTS first piece", "tts_first_start", "tts_first_chunk"),
        ("audio out", "first_audio", "end"),
    ]
    fig, ax = plt.subplots(figsize=(8, 2.8))
    for i, (_label, a, b) in enumerate(spans):
        if a in m and b in m:
            ax.barh(i, (m[b] - m[a]) * 1000, left=(m[a] - t0) * 1000, height=0.5)
    ax.set_yticks(range(len(spans)), [s[0] for s in spans])
    ax.invert_yaxis()
    ax.set_xlabel("ms after key release")
    ax.set_title(f'one turn: "{record.transcript}"')
    fig.tight_layout()
    fig.savefig(path, dpi=120)
