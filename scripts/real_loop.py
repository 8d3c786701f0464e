"""Release → first reply sound through the real audio loop, with the app as shipped.

    python scripts/real_loop.py --runs 3 [--questions scripts/questions/reporting.txt]
                                [--turns 12] [--hold 0] [--profile starter] [--keep DIR]
                                [--history 300]

What it does, per run (each run is a fresh app, so a fresh conversation):
- starts a private Xvfb screen and a private PulseAudio server whose null sinks stand in for
  the microphone (`micsrc`, its monitor is the app's input) and the speaker (`spk`);
- starts the app plainly (`python -m s2s_desktop`, no options: the default talk key, earcons
  and microphone as shipped; `--profile` adds a profile) with its settings, history and logs
  in a temporary folder, and waits until its models load;
- for each question (`--questions FILE`: "espeak voice | question" a line, see
  scripts/questions/; else the bench's held-out set, then LATER, in en-us), spoken by
  espeak-ng with its trailing silence trimmed: holds the real talk key with xdotool, plays
  the question into the microphone with paplay, releases the key `--hold` seconds after
  paplay returns (0: with the last word), and records the speaker's monitor with parec;
- on that recording, separates the listen-stop sound (played at the release) from the reply
  (handed to the output at the app's `first_audio_at`): release → first reply sound, release
  → stop sound, and the silence between the stop sound's end and the reply (negative: they
  overlap); the app's own stage figures and the history's transcript and reply beside them;
- with `--history N`: the app starts with N earlier exchanges in its saved history, as after
  weeks of use (the window shows them all), and a "new conversation" mark after them, so the
  model's prompt is the same as on a first start;
- with `--keep DIR`: each turn's recording of the speaker from the release on
  (`runR-turnN.wav`), a screenshot of the screen after the run's last turn (`runR.png`) and
  the app's own log (`runR-<name>.log`).

Prints JSON: `release_to_first_sound_ms` {"median","p90","min","max"} over every turn,
`stages_ms` (the app's per-stage split, median and p90), `stop_sound`, `by_turn`,
`by_group` (turns 1, 2-8, 9+), `last4_over_first4`, the machine and its load. Needs Xvfb,
xdotool, pulseaudio, pactl, paplay, parec, espeak-ng and the app's models installed
(docs/performance.md quotes its figures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from s2s_desktop import ipc  # noqa: E402
from s2s_desktop.audio.files import write_wav  # noqa: E402
from s2s_desktop.commands.bench import HELD_OUT, spoken  # noqa: E402
from s2s_desktop.commands.bench_measures import TURN_GROUPS, stats  # noqa: E402
from s2s_desktop.commands.bench_questions import SpokenQuestion, read_questions  # noqa: E402
from s2s_desktop.config import HotkeySettings  # noqa: E402
from s2s_desktop.history import Exchange, History  # noqa: E402
from s2s_desktop.states import TurnReason  # noqa: E402
from tests.helpers.desktop_env import (  # noqa: E402
    LOUD,
    RATE,
    MonitorRecorder,
    missing,
    onset,
    pulseaudio,
    xvfb,
)

# a longer conversation (--turns up to 24) goes on with these, also never used for tuning
LATER = [
    "Who painted the Mona Lisa?",
    "How many legs does a spider have?",
    "What is the boiling point of water in Fahrenheit?",
    "Which country has the largest population?",
    "What is the fastest land animal?",
    "How many sides does a hexagon have?",
    "What is the chemical symbol for gold?",
    "Who was the first person to walk on the moon?",
    "What is the largest desert in the world?",
    "How many strings does a violin have?",
    "What do caterpillars turn into?",
    "Which instrument has black and white keys?",
]
QUESTIONS = [*HELD_OUT, *LATER]

COMBO = HotkeySettings().combo  # the talk key as shipped
BETWEEN_TURNS_S = 1.0  # a person's pause before the next question
APP_STAGES = ("stt_after_release", "llm_first_token", "first_sentence", "tts_first_chunk",
              "release_to_first_audio")


class App:
    """The app as a user starts it, reachable through its local status socket."""

    def __init__(self, root: Path, env: dict, profile: str):
        self.root, self.env = root, env
        cmd = [sys.executable, "-m", "s2s_desktop"]  # as a user starts it: no --set
        if profile:
            cmd += ["--profile", profile]
        self.log = open(root / "app.log", "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=ROOT)
        os.environ["S2S_CONFIG_DIR"] = env["S2S_CONFIG_DIR"]  # the socket's name lives there
        self.server = ipc.server_name()

    def status(self) -> dict | None:
        reply = ipc.request("status", name=self.server, timeout_ms=5000)
        return reply["status"] if reply and reply.get("ok") else None

    def wait(self, what, timeout_s: float, interval: float = 0.05) -> dict:
        deadline, last = time.monotonic() + timeout_s, {}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the app exited ({self.proc.returncode}):\n{self.tail()}")
            last = self.status() or last
            if last and what(last):
                return last
            time.sleep(interval)
        raise SystemExit(f"timed out after {timeout_s:.0f} s; last status {last}\n{self.tail()}")

    def tail(self) -> str:
        """The end of the app's output and of its own log."""
        self.log.flush()
        logs = sorted(Path(self.env["S2S_LOG_DIR"]).glob("*.log*"), key=lambda p: p.stat().st_mtime)
        text = (self.root / "app.log").read_text(errors="replace")[-1500:]
        return text + "".join(p.read_text(errors="replace")[-3000:] for p in logs[-1:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            subprocess.run([sys.executable, "-m", "s2s_desktop", "quit"], env=self.env,
                           capture_output=True, timeout=30, cwd=ROOT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


def xdotool(env: dict, *args: str) -> None:
    subprocess.run(["xdotool", *args], env=env, check=True, timeout=10)


def screenshot(env: dict, path: Path) -> None:
    """The whole X screen, as the user would see it, through Qt (no ImageMagick needed)."""
    code = ("import sys; from PySide6.QtGui import QGuiApplication; a = QGuiApplication([]); "
            "QGuiApplication.primaryScreen().grabWindow(0).save(sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True, timeout=30)


def ask(app: App, env: dict, recorder: MonitorRecorder, wav: Path, hold_s: float,
        keep: Path | None = None) -> dict:
    """One spoken question, the key up with its last word; what was heard back, and when
    (and, with `keep`, the speaker's recording from the release on, as a WAV there)."""
    xdotool(env, "keydown", COMBO)
    app.wait(lambda s: s["state"] == "listening", timeout_s=15)
    subprocess.run(["paplay", "--device=micsrc", str(wav)], env=env, check=True, timeout=60)
    time.sleep(hold_s)
    released = time.monotonic()
    xdotool(env, "keyup", COMBO)
    done = app.wait(lambda s: s["state"] in ("idle", "error") and s["turn"].get("finished_at")
                    and s["turn"].get("released_at", 0) >= released - 1.0,
                    timeout_s=180, interval=0.1)
    time.sleep(0.3)  # the last samples reach the monitor
    times, pcm = recorder.samples(released, time.monotonic())
    if keep is not None:
        write_wav(keep, pcm, RATE)
    turn = done["turn"]
    app_ms = None
    if turn.get("first_audio_at") and turn.get("released_at"):
        app_ms = round((turn["first_audio_at"] - turn["released_at"]) * 1000, 1)
    sounds = stop_sound_and_reply(times, pcm, turn.get("first_audio_at"))
    return {
        "reason": turn.get("reason"),
        "release_to_first_sound_ms": ms(sounds["reply"], released),
        "release_to_stop_sound_ms": ms(sounds["stop_sound"], released),
        "stop_sound_to_reply_gap_ms": ms(sounds["reply"], sounds["stop_sound_end"]),
        "app_release_to_first_audio_ms": app_ms,
        "timings_ms": turn.get("timings_ms", {}),
    }


def question_wavs(asked: list[SpokenQuestion], folder: Path) -> list[tuple[SpokenQuestion, Path]]:
    """Each question said by espeak-ng, its trailing silence trimmed, as a WAV in `folder`."""
    questions = []
    for i, q in enumerate(asked):
        wav = folder / f"q{i}.wav"
        write_wav(wav, spoken(folder, f"raw{i}", q.text, q.voice), 16000)
        questions.append((q, wav))
    return questions


def ms(later: float | None, earlier: float | None) -> float | None:
    return round((later - earlier) * 1000, 1) if later and earlier else None


def stop_sound_and_reply(times, pcm, handed_at: float | None) -> dict:
    """When the listen-stop sound (before the reply was handed to the output) began and
    ended, and when the reply was first heard (the first sound after both)."""
    loud = abs(pcm) > LOUD
    before = loud & (times < handed_at) if handed_at else loud & False
    stop = float(times[before][0]) if before.any() else None
    stop_end = float(times[before][-1]) if before.any() else None
    after = loud & (times >= (handed_at or 0.0))
    if stop_end is not None:  # the stop sound may still play when the reply is handed over
        quiet = ~loud & (times > stop_end)
        first_quiet = times[quiet][0] if quiet.any() else stop_end
        if first_quiet > (handed_at or 0.0):
            stop_end = float(first_quiet)
            after &= times > stop_end
    reply = float(times[after][0]) if after.any() else onset(times, pcm)
    return {"stop_sound": stop, "stop_sound_end": stop_end, "reply": reply}


@contextlib.contextmanager
def running_app(root: Path, profile: str = "", history: int = 0):
    """A private screen and sound server, and the app started plainly on them with its user
    folders under `root` (`history` earlier exchanges saved), its models loaded: (app, env,
    recorder of the speaker)."""
    earlier_history(root / "s2s_data_dir", history)
    with xvfb() as display, pulseaudio(root / "pulse") as pulse_env:
        env = {k: v for k, v in os.environ.items()
               if k not in ("WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "QT_QPA_PLATFORM")}
        env.update(pulse_env, DISPLAY=display, QT_QPA_PLATFORM="xcb", HF_HUB_OFFLINE="1",
                   PULSE_SOURCE="micsrc.monitor", PULSE_SINK="spk",
                   **{v: str(root / v.lower()) for v in (
                       "S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_LOG_DIR", "S2S_CACHE_DIR")})
        recorder = MonitorRecorder(env)
        app = App(root, env, profile)
        try:
            app.wait(lambda s: s["state"] in ("idle", "error") and all(s["models"].values()),
                     timeout_s=300, interval=0.5)
            yield app, env, recorder
        finally:
            app.stop()
            recorder.stop()


def earlier_history(data_dir: Path, count: int) -> None:
    """`count` answered exchanges a day old in the saved history, then a new conversation."""
    if not count:
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    saved, day_ago = History(data_dir / "history.jsonl"), time.time() - 86400
    for n in range(count):
        saved.append(Exchange(f"Earlier question number {n}: what is the capital of Peru?",
                              "The capital of Peru is Lima, on the Pacific coast.",
                              time=day_ago + n, timings_ms={"release_to_first_audio": 600.0}))
    saved.append(Exchange("", "", reason=TurnReason.NEW_CONVERSATION, time=day_ago + count))


def saved_exchanges(root: Path) -> list[dict]:
    """The app's history, one entry per turn (a question is written, then its answer)."""
    history = root / "s2s_data_dir" / "history.jsonl"
    lines = history.read_text().splitlines() if history.exists() else []
    saved: list[dict] = []
    for entry in map(json.loads, lines):
        if saved and saved[-1].get("user") == entry.get("user"):
            saved.pop()
        saved.append(entry)
    return saved


def add_exchanges(root: Path, turns: list[dict]) -> None:
    """Each turn's transcript and reply, as the app's history saved them."""
    saved = saved_exchanges(root)
    for row, ex in zip(turns, saved[-len(turns):], strict=False):
        row.update(transcript=ex.get("user", ""), reply=ex.get("assistant", ""),
                   stt_while_speaking=ex.get("stt_while_speaking"))


def one_run(questions: list[tuple[SpokenQuestion, Path]], hold_s: float, profile: str,
            keep: Path | None = None, run: int = 1, history: int = 0) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="s2s-real-loop-") as tmp:
        root = Path(tmp)
        with running_app(root, profile, history) as (app, env, recorder):
            turns = []
            for n, (q, wav) in enumerate(questions, start=1):
                row = ask(app, env, recorder, wav, hold_s,
                          keep / f"run{run}-turn{n}.wav" if keep else None)
                turns.append({"turn": n, "question": q.text, "voice": q.voice, **row})
                print(f"[real-loop] turn {n}: {row['release_to_first_sound_ms']} ms",
                      file=sys.stderr)
                time.sleep(BETWEEN_TURNS_S)
            if keep:
                screenshot(env, keep / f"run{run}.png")
                for log_file in Path(env["S2S_LOG_DIR"]).glob("*.log*"):  # stage timings
                    (keep / f"run{run}-{log_file.name}").write_bytes(log_file.read_bytes())
            add_exchanges(root, turns)
            return turns


def p90(values) -> float | None:
    values = sorted(v for v in values if v is not None)
    return round(values[min(len(values) - 1, int(0.9 * len(values)))], 1) if values else None


def summary(values) -> dict:
    return {**stats(values), "p90": p90(values)}


def report(runs: list[list[dict]], hold_s: float, profile: str, questions: str) -> dict:
    key = "release_to_first_sound_ms"
    turns = [t for run in runs for t in run]
    by_turn = []
    for n in range(1, max(len(r) for r in runs) + 1):
        rows = [r[n - 1] for r in runs if len(r) >= n]
        by_turn.append({
            "turn": n,
            key: stats([t[key] for t in rows]),
            "stop_sound_to_reply_gap_ms": stats([t["stop_sound_to_reply_gap_ms"] for t in rows]),
            "app_stages_ms": {stage: stats([t["timings_ms"].get(stage) for t in rows])["median"]
                              for stage in APP_STAGES},
            "question": rows[-1]["question"],
            "voice": rows[-1]["voice"],
            "transcript": rows[-1].get("transcript", ""),
            "reply": rows[-1].get("reply", ""),
        })
    every = [t[key] for t in turns]
    groups = {name: stats([t[key] for t in turns if lo <= t["turn"] <= hi])
              for name, lo, hi in TURN_GROUPS}
    first4 = stats([t[key] for run in runs for t in run[:4]])["median"]
    last4 = stats([t[key] for run in runs for t in run[-4:]])["median"]
    gaps = [t["stop_sound_to_reply_gap_ms"] for t in turns]
    return {
        "runs": len(runs),
        "turns": max(len(r) for r in runs),
        "questions": questions,
        "hold_s": hold_s,
        "profile": profile or "(plain start)",
        key: summary(every),
        "stages_ms": {stage: summary([t["timings_ms"].get(stage) for t in turns])
                      for stage in APP_STAGES},
        "stop_sound": {
            "release_to_stop_sound_ms": summary([t["release_to_stop_sound_ms"] for t in turns]),
            "stop_sound_to_reply_gap_ms": summary(gaps),
            "overlapping_turns": sum(1 for g in gaps if g is not None and g < 0),
        },
        "turns_over_1200_ms": sum(1 for v in every if v is None or v > 1200),
        "last4_over_first4": round(last4 / first4, 2) if first4 and last4 else None,
        "by_group": groups,
        "by_turn": by_turn,
        "failed_turns": sum(1 for t in turns if t["reason"] != "ok"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_average": [round(x, 2) for x in os.getloadavg()]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="conversations, each in a fresh app")
    parser.add_argument("--questions", type=Path,
                        help="'espeak voice | question' a line (scripts/questions/reporting.txt)")
    parser.add_argument("--turns", type=int, default=0,
                        help="questions per conversation (default: all of --questions, else "
                             f"{len(HELD_OUT)} of the bench's held-out set and LATER)")
    parser.add_argument("--hold", type=float, default=0.0,
                        help="seconds the key stays down after the last word")
    parser.add_argument("--profile", default="", help="a model profile (default: plain start)")
    parser.add_argument("--keep", type=Path, help="keep each reply's recording and a screenshot here")
    parser.add_argument("--history", type=int, default=0,
                        help="earlier exchanges in the saved history at start (default: none)")
    args = parser.parse_args()
    tool = missing("Xvfb", "xdotool", "pulseaudio", "pactl", "paplay", "parec", "espeak-ng")
    if tool:
        print(f"{tool} is not installed: apt-get install xvfb xdotool pulseaudio "
              "pulseaudio-utils espeak-ng", file=sys.stderr)
        return 2
    asked = (read_questions(args.questions) if args.questions
             else [SpokenQuestion(text) for text in QUESTIONS])
    asked = asked[: args.turns or (len(asked) if args.questions else len(HELD_OUT))]
    with tempfile.TemporaryDirectory(prefix="s2s-real-loop-q-") as tmp:
        questions = question_wavs(asked, Path(tmp))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        runs = [one_run(questions, args.hold, args.profile, args.keep, r, args.history)
                for r in range(1, max(1, args.runs) + 1)]
    source = str(args.questions) if args.questions else "the bench's held-out set (en-us)"
    out = report(runs, args.hold, args.profile, source)
    out["earlier_history"] = args.history
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
