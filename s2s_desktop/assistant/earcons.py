"""Earcons: the app's own short sounds (resources/earcons/, made by scripts/make_earcons.py)
when listening starts and stops, when a turn fails, when a timer is due, and when a tool
turn begins a call (`tools.checking_cue`). Played through the assistant's own output (the
AudioSink), at `audio.earcon_volume`, unless `audio.earcons` is off."""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum
from functools import lru_cache

import numpy as np

from ..audio.sink import AudioSink
from ..resources_path import resources_dir

EARCON_TURN = 0  # turns count from 1: the sink keeps earcons apart from replies
HEARD_MARGIN_S = 0.08  # the device's own delay after the last sample is handed over


class Earcon(StrEnum):
    LISTEN_START = "listen-start"
    LISTEN_STOP = "listen-stop"
    ERROR = "error"
    TIMER = "timer"
    CHECKING = "checking"  # a tool turn: the assistant is looking something up


@lru_cache(maxsize=8)
def sound(earcon: Earcon) -> tuple[np.ndarray, int]:
    """(mono float32 samples, sample rate) of one earcon."""
    import soundfile as sf

    pcm, rate = sf.read(str(resources_dir() / "earcons" / f"{earcon.value}.wav"), dtype="float32")
    pcm.setflags(write=False)
    return pcm, int(rate)


class EarconPlayer:
    """Plays earcons on the sink; `play` says until when the microphone may hear it."""

    def __init__(self, sink: AudioSink, audio_settings: Callable[[], object]):
        self.sink = sink
        self.audio = audio_settings  # -> AudioSettings now: earcons (on/off), earcon_volume

    def samples(self, earcon: Earcon) -> tuple[np.ndarray, int] | None:
        """The earcon at the set volume, or None when earcons are off."""
        audio = self.audio()
        volume = max(0.0, min(1.0, float(audio.earcon_volume)))
        if not audio.earcons or volume == 0.0:
            return None
        pcm, rate = sound(earcon)
        return (pcm * volume).astype(np.float32), rate

    def play(self, earcon: Earcon) -> float:
        """Start the sound; the time.monotonic() by which it has been heard (0.0: none)."""
        made = self.samples(earcon)
        if made is None:
            return 0.0
        pcm, rate = made
        ahead = getattr(self.sink, "queued_seconds", lambda: 0.0)()
        self.sink.play(pcm, rate, EARCON_TURN)
        return time.monotonic() + ahead + len(pcm) / rate + HEARD_MARGIN_S
