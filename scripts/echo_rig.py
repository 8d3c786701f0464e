"""The echo rig: hands-free conversation through a simulated room, with the real echo
canceller, VAD and end-of-turn model on real (PulseAudio) devices, and the figures it gives.

A private PulseAudio server has three null sinks: `spk` (the app's speaker), `micsrc` (its
microphone: the app records `micsrc.monitor`) and `user` (the person). Two module-loopbacks
make the room: `spk.monitor → micsrc`, delayed (--room-delay-ms, default 80) and attenuated
(--room-volume, default 40 %), so the app hears its own replies; `user.monitor → micsrc`, so it
hears the questions. espeak-ng says the questions (en-us) and the replies (en-gb, several
sentences each). Per question: the user speaks, the listener must end the turn, the app
replies through `spk`; its own voice must start no turn (and should pause none). Then
barge-in: "Stop, what is the capital of Italy?" over a long reply must stop it; a cough-like
noise burst, and the backchannels "Yeah.", "Mm-hm." and "Okay.", must not (they may pause it
for a moment: the pause and its length are reported).

Figures (JSON with --json, a summary on stdout): echo return loss enhancement per reply (dB,
median), the residual's VAD windows over threshold (cleaned vs raw microphone), turns started
by the app's own voice, end of the user's last word → end of turn decided (median, p90), for the
end-of-turn model and, on the same cleaned audio, for silence-only endpointing (1000 ms); the
barge-in's stop time on the speaker recording; idle CPU of this process in hands-free
(nobody speaking, nothing playing). This measures the listening front end, not STT/LLM/TTS:
the push-to-talk comparison (release → first sound) needs the app wired (docs/hands-free.md).

    python scripts/echo_rig.py [--questions 6] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.desktop_env import MonitorRecorder, missing, pulseaudio  # noqa: E402

QUESTIONS = [
    "What is the capital of France?",
    "How far away is the moon?",
    "Tell me a joke about cats.",
    "What should I cook for dinner tonight?",
    "How do I say thank you in Spanish?",
    "Why is the sky blue?",
    "What time zone is Tokyo in?",
    "Who wrote the novel Emma?",
    "How many legs does a spider have?",
    "What is the tallest mountain in Europe?",
    "Can you recommend a good book?",
    "What is the boiling point of water?",
]
REPLY = (
    "That is a good question. The short answer is that it depends on a few things. "
    "Let me explain the most important one first, and then we can go into the details."
)
LONG_REPLY = " ".join([REPLY] * 3)
BARGE_IN = "Stop, what is the capital of Italy?"
BACKCHANNELS = ["Yeah.", "Mm-hm.", "Okay."]
LOUD = 0.01


def espeak(text: str, voice: str, rate: int) -> np.ndarray:
    import soundfile as sf
    import soxr

    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        subprocess.run(["espeak-ng", "-v", voice, "-w", f.name, text], check=True,
                       capture_output=True)
        audio, sr = sf.read(f.name, dtype="float32")
    return soxr.resample(audio, sr, rate).astype(np.float32) if sr != rate else audio


def play_user(env: dict, audio16: np.ndarray) -> None:
    """Say `audio16` into the room (blocks until played)."""
    import soundfile as sf

    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        sf.write(f.name, audio16, 16000, subtype="PCM_16")
        subprocess.run(["paplay", "--device=user", f.name], env=env, check=True)


def load_room(env: dict, delay_ms: int, volume: int) -> None:
    def pactl(*args: str) -> str:
        return subprocess.run(["pactl", *args], env=env, check=True, capture_output=True,
                              text=True).stdout

    # adjust_time=0: the loopback keeps its delay, as a room does (by default it re-tunes its
    # latency by resampling, and under load moved the echo by tens of ms at a time)
    room = pactl("load-module", "module-loopback", "source=spk.monitor", "sink=micsrc",
                 f"latency_msec={delay_ms}", "adjust_time=0").strip()
    pactl("load-module", "module-loopback", "source=user.monitor", "sink=micsrc",
          "latency_msec=10")
    for block in pactl("list", "sink-inputs").split("Sink Input #")[1:]:
        if re.search(rf"Owner Module: {room}\b", block):
            pactl("set-sink-input-volume", block.split()[0], f"{volume}%")


class RecordingEcho:
    """The echo canceller, keeping (captured_at, raw, cleaned) of every block, and feeding the
    cleaned audio to a silence-only `shadow` listener for the baseline."""

    def __init__(self, inner):
        self.inner = inner
        self.blocks: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.shadow = None
        self.shadow_events: list = []

    def reference(self, pcm, rate, played_at):
        self.inner.reference(pcm, rate, played_at)

    @property
    def last_input(self):
        return self.inner.last_input

    @property
    def last_reference_power(self):
        return self.inner.last_reference_power

    def playing_recently(self, now, within_s=0.3):
        return self.inner.playing_recently(now, within_s)

    def clean(self, mic, captured_at):
        cleaned = self.inner.clean(mic, captured_at)
        self.blocks.append((captured_at, self.inner.last_input.copy(), cleaned))
        if self.shadow is not None:
            self.shadow.replying = self.listener_replying()
            self.shadow_events += self.shadow.process(cleaned, captured_at)
        return cleaned

    listener_replying = staticmethod(lambda: False)

    def span(self, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
        raw = [r for t, r, _ in self.blocks if t0 <= t <= t1]
        clean = [c for t, _, c in self.blocks if t0 <= t <= t1]
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.float32)  # noqa
        return cat(raw), cat(clean)


def last_loud(rec: MonitorRecorder, t0: float, t1: float) -> float | None:
    times, pcm = rec.samples(t0, t1)
    loud = np.flatnonzero(np.abs(pcm) > LOUD)
    return float(times[loud[-1]]) if loud.size else None


def first_loud(rec: MonitorRecorder, t0: float, t1: float) -> float | None:
    times, pcm = rec.samples(t0, t1)
    loud = np.flatnonzero(np.abs(pcm) > LOUD)
    return float(times[loud[0]]) if loud.size else None


def wait_for(events: queue.Queue, kinds: set, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            event = events.get(timeout=0.05)
        except queue.Empty:
            continue
        if event.kind in kinds:
            return event
    return None


def pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def run(args, env: dict) -> dict:
    import psutil

    from s2s_desktop.audio.echo import EchoCanceller, erle_db
    from s2s_desktop.engines.turn.smart_turn import SmartTurn
    from s2s_desktop.engines.vad.silero_onnx import SileroOnnxVAD
    from s2s_desktop.engines.vad.silero_stream import SileroStream
    from s2s_desktop.hands_free.listener import HandsFreeEventKind as Kind
    from s2s_desktop.hands_free.listener import HandsFreeListener, TurnTaking
    from s2s_desktop.hands_free.session import (
        EchoReferenceSpeaker,
        HandsFreeSession,
        StreamingMicrophone,
    )

    class VADSettings:
        threshold, min_speech_ms, min_silence_ms = 0.5, 150, 300

    vad = SileroOnnxVAD(VADSettings())
    vad.load()
    turn = SmartTurn()
    turn.load()
    turn.warmup()
    rate = 22050
    replies = [espeak(REPLY, "en-gb", rate), espeak(LONG_REPLY, "en-gb", rate)]
    questions = [espeak(q, "en-us", 16000) for q in QUESTIONS[: args.questions]]

    echo = RecordingEcho(EchoCanceller(origin=time.monotonic()))
    listener = HandsFreeListener(SileroStream(vad), turn, echo, TurnTaking())
    echo.listener_replying = lambda: listener.replying
    speaker = EchoReferenceSpeaker()
    speaker.on_played = echo.reference
    events: queue.Queue = queue.Queue()
    log: list = []

    def on_event(event):
        log.append(event)
        if event.kind is Kind.BARGE_IN:
            speaker.flush()  # what the app does: silence at once
        events.put(event)

    mic = StreamingMicrophone(keep_open=True)
    session = HandsFreeSession(listener, mic, on_event)
    session.player = speaker  # as the app's session: a voice over the reply pauses it
    session.start()
    result: dict = {"room_delay_ms": args.room_delay_ms, "room_volume_pct": args.room_volume}
    user_rec = spk_rec = None
    try:
        # idle: nobody speaks, nothing plays (the app's speaker stream is closed at idle), and
        # none of the rig's own recorders run yet
        time.sleep(1.0)  # the first open's slow start, out of the figure
        me = psutil.Process()
        c0, t0 = sum(me.cpu_times()[:2]), time.monotonic()
        time.sleep(args.idle_s)
        idle = (sum(me.cpu_times()[:2]) - c0) / (time.monotonic() - t0) * 100
        result["idle_cpu_pct_of_one_core"] = round(idle, 2)
        user_rec = MonitorRecorder(env, "user.monitor")
        spk_rec = MonitorRecorder(env, "spk.monitor")
        speaker.open(rate)

        echo.shadow = HandsFreeListener(SileroStream(vad), None, None,
                                        TurnTaking(use_turn_model=False))
        latencies, silence_only, own_voice, answered, erles = [], [], 0, 0, []
        reply_spans, own_voice_at, own_pauses = [], [], 0
        for i, q in enumerate(questions):
            while not events.empty():
                events.get()
            shadow_seen = len(echo.shadow_events)
            said_at = time.monotonic()
            play_user(env, q)
            ended = wait_for(events, {Kind.TURN_ENDED}, 6.0)
            word_end = last_loud(user_rec, said_at, time.monotonic())
            if ended is None or word_end is None:
                print(f"question {i + 1}: no end of turn", file=sys.stderr)
                continue
            answered += 1
            latencies.append(ended.decided_at - word_end)
            time.sleep(1.2)  # the silence-only shadow's turn ends meanwhile
            shadow = [e for e in echo.shadow_events[shadow_seen:] if e.kind is Kind.TURN_ENDED]
            if shadow:
                silence_only.append(shadow[-1].decided_at - word_end)
            # the reply, through the room
            session.set_replying(True)
            start = time.monotonic()
            speaker.play(replies[0], rate, turn=i + 1)
            speaker.drain(i + 1, threading.Event())
            session.set_replying(False)
            end = time.monotonic()
            time.sleep(1.0)
            reply_spans.append((start, end))
            started = [e for e in log if start <= e.at <= end + 1.0
                       and e.kind in (Kind.SPEECH_STARTED, Kind.BARGE_IN)]
            own_voice += len(started)
            own_pauses += sum(1 for e in log if start <= e.at <= end + 1.0
                              and e.kind is Kind.REPLY_PAUSED)
            own_voice_at += [round(e.at - start, 2) for e in started]
            raw, clean = echo.span(start + 0.3, end)
            erles.append(erle_db(raw, clean))
        result.update({
            "questions": len(questions), "turns_ended": answered,
            "turns_started_by_own_voice": own_voice,
            "own_voice_starts_s_into_reply": own_voice_at,
            "replies_paused_by_own_voice": own_pauses,
            "erle_db_per_reply": [round(e, 1) for e in erles],
            "erle_db_median": round(statistics.median(erles), 1) if erles else None,
            "end_of_turn_s_median": pct(latencies, 50), "end_of_turn_s_p90": pct(latencies, 90),
            "silence_only_s_median": pct(silence_only, 50),
            "silence_only_s_p90": pct(silence_only, 90),
        })
        raw = np.concatenate([echo.span(a + 0.3, b)[0] for a, b in reply_spans])
        clean = np.concatenate([echo.span(a + 0.3, b)[1] for a, b in reply_spans])
        result["vad_windows_over_threshold_raw_pct"] = round(
            float(np.mean(vad.probabilities(raw) >= 0.5)) * 100, 1)
        result["vad_windows_over_threshold_cleaned_pct"] = round(
            float(np.mean(vad.probabilities(clean) >= 0.5)) * 100, 1)
        echo.shadow = None
        result.update(barge_in(env, session, speaker, events, log, user_rec, spk_rec,
                               replies[1], rate, Kind, args.barge_ins))
    finally:
        session.stop()
        speaker.close()
        for recorder in (user_rec, spk_rec):
            if recorder is not None:
                recorder.stop()
    result["mic_closed_after"] = not mic.is_open
    result["speaker_underruns"] = speaker.underruns
    result["load_average_1min_at_end"] = round(os.getloadavg()[0], 1)
    result["listener_max_behind_s"] = round(session.max_behind_s, 3)
    return result


def barge_in(env, session, speaker, events, log, user_rec, spk_rec, reply, rate, Kind,
             trials) -> dict:
    out = {}
    # a cough-like noise burst, then backchannels, over a reply: none may stop it
    rng = np.random.default_rng(3)
    burst = (rng.standard_normal(2880) * 0.3 * np.hanning(2880)).astype(np.float32)
    sounds = [("cough", burst)] + [(w, espeak(w, "en-us", 16000)) for w in BACKCHANNELS]
    out["backchannels"] = {}
    for k, (name, sound) in enumerate(sounds):
        session.set_replying(True)
        start = time.monotonic()
        speaker.play(reply[: rate * 5], rate, turn=100 + k)
        time.sleep(1.5)
        said_at = time.monotonic()
        play_user(env, np.concatenate([sound, np.zeros(1600, np.float32)]))
        speaker.drain(100 + k, threading.Event())
        session.set_replying(False)
        seen = [e for e in log if e.at >= start]
        paused = [e.at for e in seen if e.kind is Kind.REPLY_PAUSED]
        resumed = [e.at for e in seen if e.kind is Kind.REPLY_RESUMED]
        out["backchannels"][name] = {
            "stopped_reply": any(e.kind is Kind.BARGE_IN for e in seen),
            "paused": len(paused),
            "paused_s": round(resumed[0] - paused[0], 2) if paused and resumed else None,
            # before 0: the app's own voice paused it (the sound is played at 0)
            "paused_at_s": [round(t - said_at, 2) for t in paused],
        }
        time.sleep(1.0)
    out["cough_stopped_reply"] = out["backchannels"]["cough"]["stopped_reply"]
    # "Stop, what is the capital of Italy?" over a long reply, `trials` times
    stop_q = espeak(BARGE_IN, "en-us", 16000)
    tries = [stop_trial(env, session, speaker, events, log, user_rec, spk_rec, reply, rate,
                        Kind, stop_q, 101 + k) for k in range(trials)]
    out["barge_in_stopped_reply"] = all(t["stopped"] for t in tries)
    # a barge-in before the user spoke was the app's own voice
    out["barge_in_before_user_spoke"] = any(t["before_user_spoke"] for t in tries)
    out["barge_in_question_turn_ended"] = all(t["turn_ended"] for t in tries)
    for key in ("stop_s", "heard_s", "paused_s", "decided_s"):
        values = [t[key] for t in tries if t.get(key) is not None]
        out[f"barge_in_{key}_after_speech_start"] = values
    return out


def stop_trial(env, session, speaker, events, log, user_rec, spk_rec, reply, rate, Kind, stop_q,
               turn) -> dict:
    """One spoken barge-in: when the reply went silent on the speaker recording (stop_s), the
    audio time the listener heard enough to pause it (heard_s) and when it decided that
    (paused_s: the listener may run behind on a loaded machine), and the barge-in (decided_s),
    all after the first sound of the user's speech."""
    while not events.empty():
        events.get()
    session.set_replying(True)
    speaker.play(reply, rate, turn=turn)
    time.sleep(2.5)
    said_at = time.monotonic()
    user = threading.Thread(target=play_user, args=(env, stop_q), daemon=True)
    user.start()
    barged = wait_for(events, {Kind.BARGE_IN}, 5.0)
    paused = [e for e in log if e.at >= said_at and e.kind is Kind.REPLY_PAUSED]
    session.set_replying(False)
    ended = wait_for(events, {Kind.TURN_ENDED}, 8.0)
    user.join(10.0)
    time.sleep(0.5)
    onset = first_loud(user_rec, said_at, time.monotonic())
    out = {"stopped": barged is not None, "turn_ended": ended is not None,
           "before_user_spoke": bool(barged and onset and barged.at < onset)}
    if barged is not None and onset is not None:
        times, pcm = spk_rec.samples(onset, time.monotonic())
        loud = np.flatnonzero(np.abs(pcm) > LOUD)
        silent_from = float(times[loud[-1]]) if loud.size else onset
        out["stop_s"] = round(silent_from - onset, 3)
        out["decided_s"] = round(barged.decided_at - onset, 3)
        if paused:
            out["heard_s"] = round(paused[0].at - onset, 3)
            out["paused_s"] = round(paused[0].decided_at - onset, 3)
    speaker.flush()
    time.sleep(1.0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--room-delay-ms", type=int, default=80)
    ap.add_argument("--room-volume", type=int, default=40, help="echo level, %% of the reply")
    ap.add_argument("--idle-s", type=float, default=20.0)
    ap.add_argument("--barge-ins", type=int, default=1, help="spoken barge-ins to time")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    tool = missing("pulseaudio", "pactl", "paplay", "parec", "espeak-ng")
    if tool:
        raise SystemExit(f"{tool} is not installed: apt-get install pulseaudio pulseaudio-utils "
                         "espeak-ng libportaudio2")
    root = Path(tempfile.mkdtemp(prefix="s2s-echo-rig-"))
    with pulseaudio(root / "pulse", sinks=("spk", "micsrc", "user")) as pulse_env:
        env = dict(os.environ, **pulse_env)
        load_room(env, args.room_delay_ms, args.room_volume)
        # sounddevice reads these when PortAudio starts: set before its first import
        os.environ.update(pulse_env, PULSE_SOURCE="micsrc.monitor", PULSE_SINK="spk")
        result = run(args, env)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
