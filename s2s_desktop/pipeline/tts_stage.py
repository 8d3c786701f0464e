"""TTS stage: each Sentence → SpeechChunks as the engine makes them. The reply's first chunk
starts at its first sound: the voice's own lead-in silence would be heard as latency. A reply
in another language than the voice's is spoken by a voice of that language, or not at all
(`voices.py`)."""

from __future__ import annotations

from ..audio.silence import trim_leading_silence
from .messages import ReplyDone, Sentence, SpeechChunk
from .stage import EngineStage
from .voices import VoiceRouter


class TTSStage(EngineStage):
    name = "tts"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.voices = VoiceRouter(lambda choice: self.events.voice_missing.emit(
            choice.notice(), choice.language, choice.voice.id if choice.voice else "",
            choice.offer()))

    def load_engine(self) -> None:
        self.voices.reset()  # the voice or its settings may have changed
        super().load_engine()

    def unload_engine(self) -> None:
        self.voices.reset()
        super().unload_engine()

    def handle(self, msg) -> None:
        try:
            super().handle(msg)
        finally:  # whatever happened, the LLM must not wait for a first sound that won't come
            if isinstance(msg, Sentence) and msg.index == 0:
                self.clock.context(msg.turn).first_audio.set()

    def needs_engine(self, msg) -> bool:
        return not isinstance(msg, ReplyDone | SpeechChunk)

    def process(self, msg):
        if isinstance(msg, ReplyDone | SpeechChunk):  # a chime made upstream passes as it is
            yield msg
            return
        assert isinstance(msg, Sentence)
        engine = self.voices.engine_for(msg.language, self.engine, self.section(),
                                        self.engine.device)
        if engine is None:
            return  # no voice speaks this language: the reply is shown (a notice says why)
        ctx = self.clock.context(msg.turn)
        if msg.index == 0:
            self.book.mark(msg.turn, "tts_first_start")
        with ctx.cores.synthesizing(engine.device == "cpu"):
            yield from self._chunks(engine, msg, ctx)

    def _chunks(self, engine, msg, ctx):
        stop = ctx.stop
        first = True
        for pcm in engine.synthesize(msg.text, stop, self.section().speed):
            if stop.is_set():
                return
            if pcm is None or len(pcm) == 0:
                continue
            if msg.index == 0 and first:
                pcm = trim_leading_silence(pcm, engine.sample_rate)
                self.book.mark(msg.turn, "tts_first_chunk")
                ctx.first_audio.set()
            yield SpeechChunk(msg.turn, pcm=pcm, sample_rate=engine.sample_rate,
                              sentence=msg.index, first_of_sentence=first, text=msg.text)
            first = False
