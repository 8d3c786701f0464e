"""VAD stage: trims silence from the recording; no speech ⇒ the turn ends, no LLM call.

Live turns arrive as AudioChunks while the key is held: every LIVE_STEP_S of new audio the
VAD re-reads the recording and, when the speech heard so far changed, sends it on as a
Partial so STT can transcribe in the background. When the key goes up (KeyUp, before the
release grace has made it final) the speech so far goes on at once: it is most likely the
whole question, and STT need not wait out the grace. At release only the final check is left.
"""

from __future__ import annotations

import numpy as np

from ..audio_format import SAMPLE_RATE
from ..engines.base import VADOptions
from ..engines.vad.trim import padded_regions
from ..states import TurnReason
from .messages import (
    AudioChunk,
    KeyUp,
    ListenEnd,
    Partial,
    TurnEnded,
    Utterance,
    heard_already,
)
from .stage import EngineStage

LIVE_STEP_S = 0.25  # how often the VAD re-reads the growing recording
PARTIAL_EVERY_S = 1.0  # a background transcription at most this often while speech goes on


def _speech(audio: np.ndarray, regions) -> np.ndarray:
    """Only the speech: the (padded, merged) regions joined in order."""
    return np.concatenate([audio[a:b] for a, b in regions])


class _Recording:
    def __init__(self):
        self.parts: list[np.ndarray] = []
        self.samples = 0
        self.checked_at = 0
        self.sent_regions: tuple = ()
        self.sent_at_pause: Partial | None = None  # the last partial, if sent at a pause or key up
        self.sent_at = 0

    def audio(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else np.zeros(0, np.float32)


class VADStage(EngineStage):
    name = "vad"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._live: dict[int, _Recording] = {}

    def _regions(self, audio: np.ndarray) -> tuple[tuple[int, int], ...]:
        section = self.section()
        pad = int(section.pad_ms * SAMPLE_RATE / 1000)
        segments = self.engine.speech(audio, VADOptions.of(section))
        return tuple((r.start, r.end) for r in padded_regions(segments, len(audio), pad))

    def process(self, msg):
        if isinstance(msg, AudioChunk):
            yield from self._listen(msg)
        elif isinstance(msg, KeyUp):
            rec = self._live.get(msg.turn)
            if rec is not None and self.settings.stt.live:
                yield from self._partial(msg.turn, rec, now=True)
        elif isinstance(msg, ListenEnd):
            rec = self._live.pop(msg.turn, None) or _Recording()
            # older live turns can no longer finish: forget them
            for turn in [t for t in self._live if t < msg.turn]:
                del self._live[turn]
            yield from self._final(msg.turn, rec.audio(), msg.created)
        else:
            yield from self._final(msg.turn, msg.audio, msg.created, msg.source)

    def _listen(self, msg: AudioChunk):
        rec = self._live.setdefault(msg.turn, _Recording())
        rec.parts.append(np.asarray(msg.pcm, dtype=np.float32).reshape(-1))
        rec.samples += len(rec.parts[-1])
        if not self.settings.stt.live or rec.samples - rec.checked_at < LIVE_STEP_S * SAMPLE_RATE:
            return
        yield from self._partial(msg.turn, rec)

    def _partial(self, turn: int, rec: _Recording, now: bool = False):
        rec.checked_at = rec.samples
        audio = rec.audio()
        regions = self._regions(audio)
        paused = bool(regions) and regions[-1][1] < len(audio)  # quiet for a pad's length
        due = rec.samples - rec.sent_at >= PARTIAL_EVERY_S * SAMPLE_RATE
        # while speech goes on, partials now and then (for the live text); once it pauses,
        # or the key goes up, at once: that one is likely to be the whole question. Silence
        # after such a one (its region's padding growing) is no new speech: it stands, and
        # the final reuses it (hands-free asks for the words 64 ms into a pause)
        new_speech = rec.sent_at_pause is None or not heard_already(rec.sent_at_pause, regions)
        if regions and regions != rec.sent_regions and new_speech and (paused or due or now):
            partial = Partial(
                turn, audio=_speech(audio, regions), regions=regions, covered=len(audio)
            )
            rec.sent_regions, rec.sent_at = regions, rec.samples
            rec.sent_at_pause = partial if (paused or now) else None
            yield partial

    def _final(self, turn: int, audio: np.ndarray, released: float, source: str = ""):
        self.book.mark(turn, "released", released)
        self.book.mark(turn, "vad_start")
        regions = self._regions(audio)
        self.book.mark(turn, "vad_end")
        if not regions:
            yield TurnEnded(turn, reason=TurnReason.NO_SPEECH)
            return
        yield Utterance(
            turn, audio=_speech(audio, regions), source=source, regions=regions, created=released
        )
