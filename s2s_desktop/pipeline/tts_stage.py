"""TTS stage: each Sentence → SpeechChunks as the engine makes them. The reply's first chunk
starts at its first sound: the voice's own lead-in silence would be heard as latency."""

from __future__ import annotations

from ..audio.silence import trim_leading_silence
from .cores import CoreShare
from .messages import ReplyDone, Sentence, SpeechChunk
from .stage import EngineStage


class TTSStage(EngineStage):
    name = "tts"

    def __init__(self, *args, cores: CoreShare | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.cores = cores or CoreShare()

    def handle(self, msg) -> None:
        try:
            super().handle(msg)
        finally:  # whatever happened, the LLM must not wait for a first sound that won't come
            if isinstance(msg, Sentence) and msg.index == 0:
                self.clock.first_audio_gate(msg.turn).set()

    def needs_engine(self, msg) -> bool:
        return not isinstance(msg, ReplyDone)

    def process(self, msg):
        if isinstance(msg, ReplyDone):
            yield msg
            return
        assert isinstance(msg, Sentence)
        stop = self.clock.stop_event(msg.turn)
        if msg.index == 0:
            self.book.mark(msg.turn, "tts_first_start")
        with self.cores.synthesizing(self.engine.device == "cpu"):
            yield from self._chunks(msg, stop)

    def _chunks(self, msg, stop):
        first = True
        for pcm in self.engine.synthesize(msg.text, stop, self.section().speed):
            if stop.is_set():
                return
            if pcm is None or len(pcm) == 0:
                continue
            if msg.index == 0 and first:
                pcm = trim_leading_silence(pcm, self.engine.sample_rate)
                self.book.mark(msg.turn, "tts_first_chunk")
                self.clock.first_audio_gate(msg.turn).set()
            yield SpeechChunk(msg.turn, pcm=pcm, sample_rate=self.engine.sample_rate,
                              sentence=msg.index, first_of_sentence=first, text=msg.text)
            first = False
