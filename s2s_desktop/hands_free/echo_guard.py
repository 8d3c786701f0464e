"""Is a microphone block the user, or the app's own echo? Two tests the listener trusts a voice
over a reply on, both independent of the VAD (which hears the echo as speech whenever the
canceller lets it through):
- the guard: the block is well above what the echo could be, the room's coupling (learnt from
  blocks the VAD heard no voice in: the echo alone, whatever the canceller made of it) times
  the loudest reference that could echo in it;
- the canceller is working: it took `working_db` or more out of the echo alone lately, so a
  voice it leaves standing is not the echo."""

from __future__ import annotations

import collections

import numpy as np

# reference louder than this (mean square of its loudest 10 ms, -50 dBFS) can echo audibly
REFERENCE_FLOOR = 1e-5
# mean square below this (-40 dBFS) is a pause in the echo, not echo to judge the canceller by
ECHO_FLOOR = 1e-4
LOSS_HISTORY = 16  # echo-alone blocks (~1 s) the canceller's health is judged on
COUPLING_HISTORY = 256  # blocks (~16 s of 64 ms blocks, across replies) the room is learnt on
COUPLING_MIN = 8  # blocks needed before the room is known (until then no barge-in by voice)
# the coupling is the median of microphone / reference power over echo-alone blocks: the
# median, as some of the user's softer speech gets in (the VAD misses it in double talk)
COUPLING_QUANTILE = 0.5


class EchoGuard:
    def __init__(self, margin_db: float, working_db: float):
        self.margin = 10 ** (margin_db / 10)
        self.working_db = working_db
        self.louder_than_echo = True  # the last block passed the guard
        self._ratio: float | None = None  # the last block's microphone / reference power
        self._couplings: collections.deque[float] = collections.deque(maxlen=COUPLING_HISTORY)
        self._losses: collections.deque[float] = collections.deque(maxlen=LOSS_HISTORY)

    def judge(self, raw: np.ndarray, cleaned: np.ndarray, reference_power: float,
              learning: bool) -> bool:
        """A block: the microphone's audio, the canceller's output for it, and the loudest
        reference that could echo in it. `learning`: the block may be the echo alone (no
        pause, no turn). Says whether it passes the guard."""
        raw_energy = float(np.dot(raw, raw)) + 1e-9
        mic_power = raw_energy / max(1, len(raw))
        ref = reference_power
        self._ratio = mic_power / ref if ref > REFERENCE_FLOOR else None
        if self._ratio is None:
            self.louder_than_echo = True  # nothing played that could echo
        elif len(self._couplings) < COUPLING_MIN:
            self.louder_than_echo = False  # the room is not known yet
        else:
            coupling = float(np.quantile(self._couplings, COUPLING_QUANTILE))
            self.louder_than_echo = mic_power >= coupling * ref * self.margin
        if learning and self._ratio is not None and not self.louder_than_echo and (
                mic_power > ECHO_FLOOR):
            loss = raw_energy / (float(np.dot(cleaned, cleaned)) + 1e-9)
            self._losses.append(10 * np.log10(loss))
        return self.louder_than_echo

    def heard_no_voice(self) -> None:
        """The VAD heard no voice in the last judged block: it was the room's echo alone."""
        if self._ratio is not None:
            self._couplings.append(self._ratio)

    def canceller_working(self) -> bool:
        losses = self._losses
        return len(losses) >= LOSS_HISTORY // 3 and float(np.median(losses)) >= self.working_db
