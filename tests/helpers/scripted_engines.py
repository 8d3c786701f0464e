"""Deterministic engines for testing the pipeline's mechanics (turns, barge-in, errors,
shutdown) fast. Real-model behaviour is tested in test_e2e_starter.py.

Settings drive them: stt.model is the text "heard"; llm.model is the reply (spoken word by
word, one every llm.temperature seconds, at most llm.max_new_tokens words); tts.speed scales
the tone chunk length. The live ones arrive per call, as with every engine."""

from __future__ import annotations

import time

import numpy as np

from s2s_desktop.engines.base import (
    LLMEngine,
    SpeechSegment,
    STTEngine,
    STTResult,
    TTSEngine,
    VADEngine,
)
from s2s_desktop.errors import ModelNotFound


class EnergyVAD(VADEngine):
    name = "energy"
    devices = ("cpu",)

    def load(self):
        self.loaded = True

    def speech(self, audio, options):
        # speech = 10 ms frames louder than 0.01 RMS, joined into one region
        frames = len(audio) // 160
        if frames == 0:
            return []
        rms = np.sqrt((audio[: frames * 160].reshape(frames, 160) ** 2).mean(axis=1))
        loud = np.flatnonzero(rms > 0.01)
        if loud.size == 0:
            return []
        return [SpeechSegment(int(loud[0]) * 160, int(loud[-1] + 1) * 160)]


class FixedTextSTT(STTEngine):
    name = "fixed-text"
    devices = ("cpu",)

    def load(self):
        if self.settings.model == "missing":
            raise ModelNotFound("stt model not found at missing: check stt.model")
        self.loaded = True
        self.calls: list[int] = []  # samples of each transcription request

    def transcribe(self, audio, language, options):
        self.calls.append(len(audio))
        time.sleep(0.02)
        return STTResult(self.settings.model, "en")


class WordByWordLLM(LLMEngine):
    name = "word-by-word"
    devices = ("cpu",)

    def load(self):
        self.loaded = True
        self.seen: list[list[dict]] = []
        self.primed: list[str] = []  # the question's first words of each prime ("" between turns)

    def prime(self, messages, should_stop, question=""):
        self.primed.append(question)
        return 0

    def stream(self, messages, stop, options):
        self.seen.append(messages)
        if self.settings.model == "fail":
            raise RuntimeError("boom")
        for i, word in enumerate(self.settings.model.split(" ")):
            if stop.is_set() or i >= options.max_new_tokens:
                return
            time.sleep(options.temperature)
            yield (" " if i else "") + word


class ToneTTS(TTSEngine):
    name = "tone"
    devices = ("cpu",)
    sample_rate = 16000

    def load(self):
        self.loaded = True

    def synthesize(self, text, stop, speed):
        n = int(0.05 * self.sample_rate * speed)
        t = np.arange(n) / self.sample_rate
        for _ in text.split():
            if stop is not None and stop.is_set():
                return
            time.sleep(0.01)
            yield (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


BACKENDS = {
    "vad": ("energy", EnergyVAD),
    "stt": ("fixed-text", FixedTextSTT),
    "llm": ("word-by-word", WordByWordLLM),
    "tts": ("tone", ToneTTS),
}


def install(monkeypatch) -> None:
    """Register these engines in the registry for one test."""
    from s2s_desktop.engines import registry

    for stage, (name, cls) in BACKENDS.items():
        monkeypatch.setitem(registry.BACKENDS[stage], name,
                            f"{cls.__module__}:{cls.__name__}")


def settings(reply: str = "Paris is the capital. It is lovely.", heard: str = "Hello there",
             word_delay: float = 0.0):
    from s2s_desktop.config import Settings

    s = Settings()
    s.device = "cpu"
    s.vad.backend, s.stt.backend, s.llm.backend, s.tts.backend = (
        "energy", "fixed-text", "word-by-word", "tone")
    s.stt.model, s.llm.model, s.llm.temperature = heard, reply, word_delay
    return s
