"""The words hands-free listening needs, from the app's own speech-to-text, without a second
user of the STT engine (engines are not thread-safe; the STT stage's thread is its only user):
- a turn's words at a pause: the live transcript the pipeline already computes while the
  user speaks (the pause's key_up sends the speech so far), once it covers the speech. No
  extra transcription, and no wait the answer would not have had: the final transcript
  reuses that same result;
- the words of a voice over a paused reply (a short clip: "Stop." or "yeah"): transcribed on
  the STT stage's thread (`hear_answer`, as a spoken answer to a tool's question), the
  listener waiting for it. The reply is held meanwhile, so no first sound waits on it.
Qt-free; the pipeline is duck-typed (hear_answer, live_words)."""

from __future__ import annotations

import logging
import threading

import numpy as np

log = logging.getLogger(__name__)

# a voice over a reply is held to ~1.5 s before it is judged; its transcription takes a
# fraction of that. Past this the words are not known: the speech counts as a backchannel
HEAR_WAIT_S = 3.0


class PipelineWords:
    def __init__(self, pipeline, wait_s: float = HEAR_WAIT_S):
        self.pipeline = pipeline
        self.wait_s = wait_s

    def transcript(self, audio: np.ndarray) -> str:
        """The words of a short clip (16 kHz mono), "" if STT did not answer in time."""
        done = threading.Event()
        heard: list[str] = []

        def reply(text: str) -> None:
            heard.append(text)
            done.set()

        self.pipeline.hear_answer(np.asarray(audio, np.float32), reply)
        if not done.wait(self.wait_s):
            log.warning("hands-free: no words for the voice over the reply in %.1f s", self.wait_s)
            return ""
        return heard[0]

    def so_far(self, samples: int) -> str | None:
        """The live turn's words once its live transcript heard `samples` samples; None: not yet."""
        return self.pipeline.live_words(samples)
