"""Hands-free turn taking, Qt-free and thread-free: microphone blocks in, turn events out.

Each block passes the echo canceller (what the app plays is taken out), then silero VAD, one
probability per 32 ms window, on the cleaned signal:
- waiting, speech for `start_ms` opens a turn (with `preroll_ms` of audio from before it);
- while the app speaks (its reply or an earcon, or its echo's tail), only speech that is
  confident (`barge_in_threshold`), lasts `barge_in_ms`, and that the canceller left mostly
  in place (the block lost less than `barge_in_max_loss_db`: the app's own echo loses 15-45
  dB, a voice in the room little), while the canceller is cancelling at all, opens one, as a
  barge-in: a cough (a noise burst the VAD scores low) does not (a voiced "yeah" does:
  docs/hands-free.md);
- in a turn, once the speaker has been silent for `check_after_ms`, the end-of-turn model
  decides whether they finished or only paused, and the words so far (`transcript`, the live
  transcript where the app has one) can overrule a "finished" that stops on "of" or "the";
  a pause ends the turn anyway after `max_pause_ms`. Without the model
  (`use_turn_model=False`) that silence alone ends it;
- nothing said (and nothing played) for `timeout_s`: the mode times out.
`HandsFreeSession` (hands_free_session.py) runs this on a thread beside a real microphone.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ..audio_format import SAMPLE_RATE
from ..engines.turn.smart_turn import FINISHED
from ..engines.turn.unfinished_text import ends_unfinished
from ..engines.vad.silero_onnx import WINDOW

log = logging.getLogger(__name__)

WINDOW_S = WINDOW / SAMPLE_RATE  # 32 ms
# what a silence-only endpointer needs not to cut a mid-sentence pause: the baseline
# hands-free peers use (HF speech-to-speech), measured against in scripts/echo_rig.py
SILENCE_ONLY_MS = 1000
REANCHOR_S = 0.1  # a block this far from where the last one ended: the clock follows it
# mean square below this (-40 dBFS) is a pause in the reply, not echo to judge the canceller by
ECHO_FLOOR = 1e-4
LOSS_HISTORY = 32  # blocks (~2 s of 64 ms blocks) the canceller's health is judged on


class HandsFreeEventKind(StrEnum):
    SPEECH_STARTED = "speech started"
    BARGE_IN = "barge-in"  # speech over the app's own voice: stop the reply, a turn began
    TURN_ENDED = "turn ended"  # `audio` is the turn's speech, ready for STT
    TIMED_OUT = "timed out"  # nothing said for timeout_s: the mode ends
    NOTICE = "notice"  # something the user should know (`message`); listening goes on
    STOPPED = "stopped"  # the mode ended on an error (`message` says what to do)


@dataclass(frozen=True)
class HandsFreeEvent:
    kind: HandsFreeEventKind
    at: float  # monotonic time of the audio that decided it (end of its last window)
    decided_at: float  # monotonic time the listener decided it (after the model ran)
    audio: np.ndarray | None = None  # TURN_ENDED: 16 kHz cleaned audio of the turn
    speech_ended_at: float | None = None  # TURN_ENDED: end of the last speech window
    turn_probability: float | None = None  # TURN_ENDED by the model: its verdict
    message: str = ""


@dataclass(frozen=True)
class TurnTaking:
    threshold: float = 0.5  # VAD probability that counts as speech
    start_ms: int = 96  # speech this long opens a turn (3 windows)
    preroll_ms: int = 300  # audio from before the speech start kept in the turn
    check_after_ms: int = 160  # silence before the end-of-turn model is asked
    recheck_ms: int = 320  # asked again after this much more silence
    max_pause_ms: int = 1600  # silence that ends a turn whatever the model says
    barge_in_ms: int = 224  # speech over the reply this long interrupts it (7 windows)
    barge_in_threshold: float = 0.8  # and this sure: a cough scores lower
    barge_in_max_loss_db: float = 12.0  # and the canceller took less than this out of it
    # the canceller re-finds the room when the app starts speaking after a silence: in that
    # first second its echo can pass as speech, so a barge-in needs twice as long
    reply_start_s: float = 1.0
    # while the app speaks, the median loss of the last ~2 s of loud blocks says whether the
    # canceller is cancelling; below this its output is mostly echo: no barge-in by voice
    # (the talk key still interrupts) until it recovers
    canceller_working_db: float = 15.0
    echo_tail_s: float = 0.5  # after the app's last sound, its echo may still arrive
    max_turn_s: float = 60.0
    timeout_s: float = 120.0
    use_turn_model: bool = True

    def windows(self, ms: float) -> int:
        return max(1, int(round(ms / 1000 / WINDOW_S)))


class HandsFreeListener:
    """Feed it microphone blocks (`process`), tell it when the app replies (`replying`)."""

    def __init__(
        self,
        vad_stream,
        turn_model=None,
        echo=None,
        tuning: TurnTaking | None = None,
        clock: Callable[[], float] = time.monotonic,
        transcript: Callable[[np.ndarray], str] | None = None,
    ):
        self.vad = vad_stream  # SileroStream: push(audio) -> probabilities per window
        self.turn_model = turn_model  # SmartTurn: probability(audio) -> float
        self.echo = echo  # EchoCanceller, or None (headphones: nothing to cancel)
        self.tuning = tuning or TurnTaking()
        self.clock = clock
        self.transcript = transcript  # the turn's words so far, given its audio
        self.replying = False  # the app says it is speaking a reply
        self.voice_barge_in = True  # off while the echo reference is missing
        self.on_speech_audio: Callable[[np.ndarray], None] | None = None  # live transcript
        # a pause the end-of-turn model is asked about: the app transcribes the speech so far
        # meanwhile (as at a key's release), so a turn it ends has its words ready
        self.on_pause: Callable[[], None] | None = None
        self._t0: float | None = None  # capture time of sample 0
        self._buf = np.zeros(0, np.float32)  # cleaned audio, from sample _buf_start on
        self._buf_start = 0
        self._done = 0  # samples the VAD has judged
        self._received = 0  # microphone samples received
        self._in_turn = False
        self._turn_start = 0
        self._run = 0  # consecutive speech windows while waiting
        self._silence = 0  # silent windows since the last speech in a turn
        self._checked_at = -1  # silence (windows) at the last model call in this pause
        self._last_speech_end = 0
        self._last_activity: float | None = None
        self._timed_out = False
        self._loss_db = 0.0  # how much the canceller took out of the last block
        self._speaking_since: float | None = None  # the app's sound began (after silence)
        self._losses: collections.deque[float] = collections.deque(maxlen=LOSS_HISTORY)

    @property
    def in_turn(self) -> bool:
        return self._in_turn

    def process(self, block: np.ndarray, captured_at: float) -> list[HandsFreeEvent]:
        """A 16 kHz microphone block whose first sample was captured at `captured_at`."""
        block = np.asarray(block, np.float32).reshape(-1)
        if self._t0 is None:
            self._t0 = captured_at
            self._last_activity = captured_at
        elif abs(captured_at - self._time(self._received)) > REANCHOR_S:
            self._t0 += captured_at - self._time(self._received)  # blocks were lost: a gap
        self._received += len(block)
        cleaned = self.echo.clean(block, captured_at) if self.echo is not None else block
        if self.echo is not None and len(cleaned):
            raw = self.echo.last_input  # the same stretch of microphone audio
            raw_energy = float(np.dot(raw, raw)) + 1e-9
            self._loss_db = 10 * np.log10(raw_energy / (float(np.dot(cleaned, cleaned)) + 1e-9))
            if self._app_speaking(captured_at) and raw_energy > ECHO_FLOOR * len(raw):
                self._losses.append(self._loss_db)
        self._buf = np.concatenate([self._buf, cleaned])
        if self._in_turn and self.on_speech_audio is not None and cleaned.size:
            self.on_speech_audio(cleaned)
        events: list[HandsFreeEvent] = []
        for p in self.vad.push(cleaned):
            self._done += WINDOW
            event = self._window(float(p))
            if event is not None:
                events.append(event)
        if not self._in_turn:  # keep only what a turn opening now could need
            keep = int((self.tuning.preroll_ms + 2 * self.tuning.barge_in_ms) / 1000 * SAMPLE_RATE)
            keep += 2 * WINDOW
            drop = len(self._buf) - keep
            if drop > 0:
                self._buf, self._buf_start = self._buf[drop:], self._buf_start + drop
        return events

    def _time(self, sample: int) -> float:
        return (self._t0 or 0.0) + sample / SAMPLE_RATE

    def _audio(self, start: int, end: int) -> np.ndarray:
        a, b = max(0, start - self._buf_start), max(0, end - self._buf_start)
        return self._buf[a:b].copy()

    def _app_speaking(self, t: float) -> bool:
        return self.replying or (
            self.echo is not None and self.echo.playing_recently(t, self.tuning.echo_tail_s)
        )

    def _window(self, p: float) -> HandsFreeEvent | None:
        tune = self.tuning
        now = self._time(self._done)
        if not self._in_turn:
            speaking = self._app_speaking(now)
            if speaking:
                self._last_activity = now
                if self._speaking_since is None:
                    self._speaking_since = now
            else:
                self._speaking_since = None
            if speaking:
                starting = now - (self._speaking_since or now) < tune.reply_start_s
                needed = tune.windows(tune.barge_in_ms * (2 if starting else 1))
                heard = (p >= tune.barge_in_threshold and self._loss_db < tune.barge_in_max_loss_db
                         and self._canceller_working())
            else:
                needed, heard = tune.windows(tune.start_ms), p >= tune.threshold
            self._run = self._run + 1 if heard else 0
            if self._run >= needed and (self.voice_barge_in or not speaking):
                return self._open(now, barge_in=speaking)
            if not self._timed_out and now - (self._last_activity or now) >= tune.timeout_s:
                self._timed_out = True
                return self._event(HandsFreeEventKind.TIMED_OUT, now)
            return None
        if p >= tune.threshold:
            self._silence, self._checked_at = 0, -1
            self._last_speech_end = self._done
            return None
        self._silence += 1
        silence_ms = self._silence * WINDOW_S * 1000
        length_s = (self._done - self._turn_start) / SAMPLE_RATE
        if silence_ms >= (tune.max_pause_ms if tune.use_turn_model else SILENCE_ONLY_MS) or (
            length_s >= tune.max_turn_s
        ):
            return self._close(now, None)
        if tune.use_turn_model and self.turn_model is not None and silence_ms >= (
            tune.check_after_ms
        ) and (self._checked_at < 0 or self._silence - self._checked_at >= tune.windows(
            tune.recheck_ms
        )):
            self._checked_at = self._silence
            if self.on_pause is not None:
                self.on_pause()
            probability = self.turn_model.probability(self._audio(self._turn_start, self._done))
            log.debug("end-of-turn model: %.2f after %.0f ms of silence", probability, silence_ms)
            if probability > FINISHED and not self._words_go_on():
                return self._close(now, probability)
        return None

    def _canceller_working(self) -> bool:
        """Too few blocks to judge (the reply's start, or no canceller): yes."""
        if self.echo is None or len(self._losses) < LOSS_HISTORY // 5:
            return True
        return float(np.median(self._losses)) >= self.tuning.canceller_working_db

    def _words_go_on(self) -> bool:
        if self.transcript is None:
            return False
        text = self.transcript(self._audio(self._turn_start, self._done))
        if ends_unfinished(text):
            log.debug("end-of-turn: the words go on (%r): waiting", text[-40:])
            return True
        return False

    def _open(self, now: float, barge_in: bool) -> HandsFreeEvent:
        tune = self.tuning
        speech_from = self._done - self._run * WINDOW
        preroll = int(tune.preroll_ms / 1000 * SAMPLE_RATE)
        self._turn_start = max(self._buf_start, speech_from - preroll)
        self._in_turn, self._run = True, 0
        self._silence, self._checked_at = 0, -1
        self._last_speech_end = self._done
        if self.on_speech_audio is not None:
            self.on_speech_audio(self._audio(self._turn_start, self._buf_start + len(self._buf)))
        kind = HandsFreeEventKind.BARGE_IN if barge_in else HandsFreeEventKind.SPEECH_STARTED
        return self._event(kind, now)

    def _close(self, now: float, probability: float | None) -> HandsFreeEvent:
        audio = self._audio(self._turn_start, self._done)
        self._in_turn, self._run = False, 0
        self._last_activity = now
        return self._event(
            HandsFreeEventKind.TURN_ENDED, now, audio=audio,
            speech_ended_at=self._time(self._last_speech_end), turn_probability=probability,
        )

    def _event(self, kind: HandsFreeEventKind, at: float, **fields) -> HandsFreeEvent:
        return HandsFreeEvent(kind, at, self.clock(), **fields)

    def notice(self, message: str) -> HandsFreeEvent:
        return self._event(HandsFreeEventKind.NOTICE, self.clock(), message=message)
