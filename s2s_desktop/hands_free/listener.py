"""Hands-free turn taking, Qt-free and thread-free: microphone blocks in, turn events out.

Each block passes the echo canceller (what the app plays is taken out), then silero VAD, one
probability per 32 ms window, on the cleaned signal:
- waiting, speech for `start_ms` opens a turn (with `preroll_ms` of audio from before it);
- while the app speaks a reply, speech for `pause_ms` (one window of it confident:
  `barge_in_threshold`; where the block is well above the echo, the raw microphone's VAD
  counts too: the canceller's double-talk suppression hides the first word) and louder
  than the app's own echo could be (the echo guard, echo_guard.py: the microphone over
  `echo_margin_db` above the loudest reference of the last 0.5 s times the room's coupling,
  learnt from the replies; or, for a voice quieter than that, the canceller is working:
  `canceller_working_db`) PAUSES the reply
  (REPLY_PAUSED: the session holds the speaker). Then it listens with the reply silent: speech
  that goes on to `commit_ms` is a barge-in (BARGE_IN: the turn starts from the speech's
  onset; the reply is dropped); speech that stops before that is a backchannel ("yeah",
  "mm-hm", a cough) and the reply resumes (REPLY_RESUMED), unless its words (`transcript`)
  are more than backchannel words ("Stop."): a barge-in. The app's own echo cannot pass this,
  whatever the canceller does: it stops when the reply is paused. In an earcon or the
  reply's echo tail (`echo_tail_s`) a turn opens as when waiting, if the guard lets it;
- in a turn, after `words_after_ms` of silence the words so far are asked for (`on_pause`);
  once the speaker has been silent for `check_after_ms`, the end-of-turn model
  decides whether they finished or only paused, and the words so far (`words_so_far`: the
  app's live transcript once it covers the speech, a "finished" waiting `words_wait_ms` at most
  for it; else `transcript`) can overrule a "finished" that stops on "of" or "the";
  a pause ends the turn anyway after `max_pause_ms`. Without the model
  (`use_turn_model=False`) that silence alone ends it;
- nothing said (and nothing played) for `timeout_s`: the mode times out.
`HandsFreeSession` (hands_free_session.py) runs this on a thread beside a real microphone.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ..audio_format import SAMPLE_RATE
from ..engines.turn.smart_turn import FINISHED
from ..engines.turn.unfinished_text import ends_unfinished, is_backchannel
from ..engines.vad.silero_onnx import WINDOW
from .echo_guard import EchoGuard

log = logging.getLogger(__name__)

WINDOW_S = WINDOW / SAMPLE_RATE  # 32 ms
# what a silence-only endpointer needs not to cut a mid-sentence pause: the baseline
# hands-free peers use (HF speech-to-speech), measured against in scripts/echo_rig.py
SILENCE_ONLY_MS = 1000
REANCHOR_S = 0.1  # a block this far from where the last one ended: the clock follows it
# a pause silences the echo this soon (output buffer, room, a microphone block): speech that
# stops sooner stopped with the reply
ECHO_STOPS_MS = 200
# ...or speech that ends this soon after the reply's last sound was played (output latency,
# room, the VAD's hangover): on a loaded machine the echo outlasted ECHO_STOPS_MS, and the
# reply paused again every second ("Yeah." on the echo rig under load)
ECHO_ENDS_AFTER_SOUND_S = 0.3
NO_REFERENCE_S = 1.5  # replying with nothing played this long: the reference is missing


class HandsFreeEventKind(StrEnum):
    SPEECH_STARTED = "speech started"
    REPLY_PAUSED = "reply paused"  # a voice over the reply: hold it while listening on
    REPLY_RESUMED = "reply resumed"  # it was a backchannel: the reply goes on
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
    # TURN_ENDED: 16 kHz audio of the turn, as STT gets it: the raw microphone's where nothing
    # the app played could echo in it, else cleaned
    audio: np.ndarray | None = None
    speech_ended_at: float | None = None  # TURN_ENDED: end of the last speech window
    turn_probability: float | None = None  # TURN_ENDED by the model: its verdict
    message: str = ""


@dataclass(frozen=True)
class TurnTaking:
    threshold: float = 0.5  # VAD probability that counts as speech
    start_ms: int = 96  # speech this long opens a turn (3 windows)
    preroll_ms: int = 300  # audio from before the speech start kept in the turn
    check_after_ms: int = 160  # silence before the end-of-turn model is asked
    # silence after which the words so far are asked for (`on_pause`: STT starts), once per
    # pause: the transcription (~200 ms) then runs beside the wait and the model's call
    words_after_ms: int = 64
    recheck_ms: int = 160  # asked again after this much more silence
    max_pause_ms: int = 1600  # silence that ends a turn whatever the model says
    # a "finished" waits this long at most for the live words (`words_so_far`) to cover the
    # speech: the answer waits for that transcription anyway, it is the one the turn reuses
    words_wait_ms: int = 1000
    # speech over the app's voice this long pauses it (4 windows: the reply is silent ~0.25 s
    # after the user's first sound), if one window of it is this sure: in double talk the
    # canceller's suppression left "Stop," at 0.53-0.72 on the echo rig (a cough-like burst
    # reached 0.74 there: it may pause the reply, which then resumes)
    pause_ms: int = 128
    barge_in_threshold: float = 0.6
    # and the microphone was this far above the echo estimate (on the echo rig no block of
    # the echo alone came within 0.8 dB of it, the user's speech was ~30 dB above the median),
    echo_margin_db: float = 12.0
    # or the canceller took this much out of the echo alone lately (it is working)
    canceller_working_db: float = 15.0
    guard_only_s: float = 2.0  # after a pause by the echo, only the guard may pause the reply
    # then, with the reply paused: this much speech is a barge-in. espeak's "Mm-hm." is 770 ms
    # of voice; with the VAD's hangover and the echo still arriving after the pause it
    # counted 864-960 ms on a loaded machine (960 stopped the reply in CI). A question said
    # over the reply loses nothing by the wait: the reply is paused, the turn kept from onset
    commit_ms: int = 1280
    # ...and this much silence before that ends a backchannel: the reply resumes (on the rig
    # "Stop," left 320 ms of silence on the cleaned signal before "what is the capital")
    resume_after_ms: int = 480
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
        words_so_far: Callable[[int], str | None] | None = None,
    ):
        self.vad = vad_stream  # SileroStream: push(audio) -> probabilities per window
        self.turn_model = turn_model  # SmartTurn: probability(audio) -> float
        self.echo = echo  # EchoCanceller, or None (headphones: nothing to cancel)
        self.tuning = tuning or TurnTaking()
        self.clock = clock
        self.transcript = transcript  # the words of some audio (a voice over the reply)
        # the turn's words, once a live transcript heard its first n samples (None: not yet);
        # without it, `transcript` of the turn's audio
        self.words_so_far = words_so_far
        self._finished: float | None = None  # the model's "finished", the words not yet in
        self._finished_at = 0  # silence (windows) when it said so
        self.replying = False  # the app says it is speaking a reply
        self.voice_barge_in = True  # off while the echo reference is missing
        self.on_speech_audio: Callable[[np.ndarray], None] | None = None  # live transcript
        # a pause the end-of-turn model is asked about: the app transcribes the speech so far
        # meanwhile (as at a key's release), so a turn it ends has its words ready
        self.on_pause: Callable[[], None] | None = None
        self._t0: float | None = None  # capture time of sample 0
        self._buf = np.zeros(0, np.float32)  # cleaned audio, from sample _buf_start on
        self._raw = np.zeros(0, np.float32)  # the microphone's, the same samples
        # this turn's speech goes to STT as the raw microphone gave it: nothing the app played
        # could echo in it. The noise suppressor, warming up after digital silence, took ~9 dB
        # off the first 0.3 s of a question ("What is" heard as "But this is") and mangled
        # words ("of Australia": "almost really"); AEC is only needed where there is echo
        self._raw_turn = False
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
        self.guard = EchoGuard(self.tuning.echo_margin_db, self.tuning.canceller_working_db)
        self._guard_only_until = -1.0  # a pause just proved false: trust the guard alone
        self._run_peak = 0.0  # the highest VAD probability in the current run
        self._paused = False  # the reply is held: is it a barge-in or a backchannel?
        self._pause_from = 0  # sample where the speech that paused it began
        self._pause_speech = 0  # speech windows since then
        self._speech_while_paused = 0  # of which after the reply was paused
        self._raw_vad = None  # the VAD on the raw microphone while a reply plays

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
            # the same stretch of microphone audio, and what could echo in it
            self.guard.judge(self.echo.last_input, cleaned, self.echo.last_reference_power,
                             learning=not (self._paused or self._in_turn))
        echo_only = True
        raw_p = self._raw_voice(cleaned)
        raw = self.echo.last_input[: len(cleaned)] if self.echo is not None else cleaned
        self._buf = np.concatenate([self._buf, cleaned])
        self._raw = np.concatenate([self._raw, raw])
        if self._raw_turn and self._app_speaking(captured_at):
            self._raw_turn = False  # an earcon or a reply within the turn: its echo is in it
        if self._in_turn and self.on_speech_audio is not None and cleaned.size:
            self.on_speech_audio(raw if self._raw_turn else cleaned)
        events: list[HandsFreeEvent] = []
        for p in self.vad.push(cleaned):
            self._done += WINDOW
            echo_only = echo_only and p < self.tuning.threshold
            event = self._window(max(float(p), raw_p))
            if event is not None:
                events.append(event)
        if echo_only and self.echo is not None and not (self._paused or self._in_turn):
            self.guard.heard_no_voice()
        if not self._in_turn and not self._paused:  # keep what a turn opening now could need
            keep = int((self.tuning.preroll_ms + self.tuning.pause_ms) / 1000 * SAMPLE_RATE)
            keep += 2 * WINDOW
            drop = len(self._buf) - keep
            if drop > 0:
                self._buf, self._buf_start = self._buf[drop:], self._buf_start + drop
                self._raw = self._raw[drop:]
        return events

    def _raw_voice(self, cleaned: np.ndarray) -> float:
        """While a reply plays and waits to be paused: the VAD on the raw microphone, where the
        block is well above the echo (the user's voice then is most of it). In double talk
        the canceller's suppression takes much of the user's first word out of the cleaned
        signal (on the echo rig "Stop," often stayed under 0.5 there); this hears it. 0 else."""
        reset = getattr(self.vad, "reset", None)
        if not (self.replying and self.echo is not None and reset is not None) or self._paused:
            self._raw_vad = None
            return 0.0
        if self._raw_vad is None:
            self._raw_vad = copy.copy(self.vad)  # the same model, its own state
            self._raw_vad.reset()
        probs = self._raw_vad.push(self.echo.last_input[: len(cleaned)])
        if not self.guard.louder_than_echo or not len(probs):
            return 0.0
        return float(np.max(probs))

    def _time(self, sample: int) -> float:
        return (self._t0 or 0.0) + sample / SAMPLE_RATE

    def _audio(self, start: int, end: int, raw: bool = False) -> np.ndarray:
        a, b = max(0, start - self._buf_start), max(0, end - self._buf_start)
        return (self._raw if raw else self._buf)[a:b].copy()

    def _app_speaking(self, t: float) -> bool:
        return self.replying or (
            self.echo is not None and self.echo.playing_recently(t, self.tuning.echo_tail_s)
        )

    def _window(self, p: float) -> HandsFreeEvent | None:
        tune = self.tuning
        now = self._time(self._done)
        if self._paused:
            return self._while_paused(p, now)
        if not self._in_turn:
            if self._app_speaking(now):
                self._last_activity = now
            # a reply can be paused while the listener makes sure; an earcon or the reply's
            # echo tail has nothing to pause: there the guard alone keeps the echo out
            speaking = self.replying
            if speaking:
                needed = tune.windows(tune.pause_ms)
                trusted = self.guard.louder_than_echo or (
                    self.guard.canceller_working() and now >= self._guard_only_until)
                heard = p >= tune.threshold and trusted and not self._reference_missing(now)
            else:
                needed = tune.windows(tune.start_ms)
                heard = p >= tune.threshold and self.guard.louder_than_echo
            self._run = self._run + 1 if heard else 0
            self._run_peak = max(self._run_peak, p) if self._run > 1 else p
            if (self._run >= needed and speaking and self.voice_barge_in
                    and self._run_peak >= tune.barge_in_threshold):
                self._paused, self._pause_from = True, self._done - self._run * WINDOW
                self._pause_speech, self._silence, self._run = self._run, 0, 0
                self._speech_while_paused = 0
                return self._event(HandsFreeEventKind.REPLY_PAUSED, now)
            if self._run >= needed and not speaking:
                return self._open(now, barge_in=False, speech_from=self._done - self._run * WINDOW)
            if not self._timed_out and now - (self._last_activity or now) >= tune.timeout_s:
                self._timed_out = True
                return self._event(HandsFreeEventKind.TIMED_OUT, now)
            return None
        if p >= tune.threshold:
            self._silence, self._checked_at, self._finished = 0, -1, None
            self._last_speech_end = self._done
            return None
        self._silence += 1
        if self._finished is not None:  # "finished", said before the words were in
            goes_on = self._words_go_on()
            if goes_on is False or (goes_on is None and self._silence - self._finished_at
                                    >= tune.windows(tune.words_wait_ms)):
                return self._close(now, self._finished)
            if goes_on:
                self._finished = None
            else:
                return None
        silence_ms = self._silence * WINDOW_S * 1000
        if (tune.use_turn_model and self.on_pause is not None
                and self._silence == tune.windows(tune.words_after_ms)):
            self.on_pause()
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
            probability = self.turn_model.probability(self._audio(self._turn_start, self._done))
            log.debug("end-of-turn model: %.2f after %.0f ms of silence", probability, silence_ms)
            if probability > FINISHED:
                goes_on = self._words_go_on()
                if goes_on is None:
                    self._finished, self._finished_at = probability, self._silence
                elif not goes_on:
                    return self._close(now, probability)
        return None

    def _reference_missing(self, now: float) -> bool:
        """Replying, but nothing it played reached the canceller lately: the reply plays
        where pausing cannot silence it (the output device changed), its echo uncancelled."""
        return self.replying and self.echo is not None and not self.echo.playing_recently(
            now, NO_REFERENCE_S)

    def _while_paused(self, p: float, now: float) -> HandsFreeEvent | None:
        """The reply is held: speech that goes on is a barge-in, a short one a backchannel."""
        tune = self.tuning
        if p >= tune.threshold:
            self._pause_speech, self._silence = self._pause_speech + 1, 0
            self._speech_while_paused += 1
        else:
            self._silence += 1
        if self._pause_speech >= tune.windows(tune.commit_ms):
            log.debug("barge-in: %d ms of speech over the paused reply (%d ms since the pause)",
                      self._pause_speech * WINDOW_S * 1000,
                      (self._done - self._pause_from) / SAMPLE_RATE * 1000)
            return self._commit(now)
        if self._silence < tune.windows(tune.resume_after_ms):
            return None
        preroll = int(tune.preroll_ms / 1000 * SAMPLE_RATE)
        heard = self._audio(self._pause_from - preroll, self._done)
        text = self.transcript(heard) if self.transcript is not None else ""
        if not is_backchannel(text):
            log.debug("barge-in: %r is more than a backchannel", text[-40:])
            return self._commit(now)
        log.debug("a backchannel (%d ms of speech, %r): the reply resumes",
                  self._pause_speech * WINDOW_S * 1000, text[-40:])
        echo_like = self._stopped_with_the_reply()
        self._paused, self._silence = False, 0
        self._last_activity = now
        if echo_like:
            # it stopped with the reply: the app's own echo, leaking through the canceller.
            # For a while only the guard may pause it
            self._guard_only_until = now + tune.guard_only_s
        return self._event(HandsFreeEventKind.REPLY_RESUMED, now)

    def _stopped_with_the_reply(self) -> bool:
        if self._speech_while_paused < self.tuning.windows(ECHO_STOPS_MS):
            return True
        speech_end = self._time(self._done - self._silence * WINDOW)
        return self.echo is not None and self.echo.playing_recently(
            speech_end, ECHO_ENDS_AFTER_SOUND_S)

    def _commit(self, now: float) -> HandsFreeEvent:
        self._paused = False
        silence = self._silence
        event = self._open(now, barge_in=True, speech_from=self._pause_from)
        self._silence = silence  # the pause after the speech counts towards its end
        self._last_speech_end = self._done - silence * WINDOW
        return event

    def _words_go_on(self) -> bool | None:
        """Whether the turn's words so far stop on "of" or "the"; None: not known yet."""
        if self.words_so_far is not None:
            text = self.words_so_far(self._last_speech_end - self._turn_start)
        elif self.transcript is not None:
            text = self.transcript(self._audio(self._turn_start, self._done))
        else:
            return False
        if text is None:
            return None
        if ends_unfinished(text):
            log.debug("end-of-turn: the words go on (%r): waiting", text[-40:])
            return True
        return False

    def _open(self, now: float, barge_in: bool, speech_from: int) -> HandsFreeEvent:
        tune = self.tuning
        preroll = int(tune.preroll_ms / 1000 * SAMPLE_RATE)
        self._turn_start = max(self._buf_start, speech_from - preroll)
        self._in_turn, self._run = True, 0
        self._silence, self._checked_at, self._finished = 0, -1, None
        self._last_speech_end = self._done
        self._raw_turn = not barge_in and not self._app_speaking(self._time(self._turn_start))
        if self.on_speech_audio is not None:
            self.on_speech_audio(self._audio(self._turn_start, self._buf_start + len(self._buf),
                                             raw=self._raw_turn))
        kind = HandsFreeEventKind.BARGE_IN if barge_in else HandsFreeEventKind.SPEECH_STARTED
        return self._event(kind, now)

    def _close(self, now: float, probability: float | None) -> HandsFreeEvent:
        audio = self._audio(self._turn_start, self._done, raw=self._raw_turn)
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
