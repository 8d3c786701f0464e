"""LLM stage: streams the reply and cuts it into speakable Sentences as it comes, so TTS
starts on the first clause while the LLM keeps writing."""

from __future__ import annotations

from ..engines.llm.history import build_messages
from .chunker import SentenceChunker
from .messages import ReplyDone, Sentence, Transcript
from .stage import Stage
from .turns import Conversation

FIRST_AUDIO_WAIT_S = 5.0


class LLMStage(Stage):
    name = "llm"

    def __init__(self, *args, conversation: Conversation, **kwargs):
        super().__init__(*args, **kwargs)
        self.conversation = conversation

    def process(self, msg: Transcript):
        cfg = self.section()
        messages = build_messages(cfg.system_prompt, self.conversation.exchanges(), msg.text,
                                  cfg.history_turns)
        stop = self.clock.stop_event(msg.turn)
        chunker = SentenceChunker()
        reply, tokens, index = [], 0, 0
        self.book.mark(msg.turn, "llm_start")
        try:
            for delta in self.engine.stream(messages, stop):
                if stop.is_set():
                    break
                if not delta:
                    continue
                tokens += 1
                if tokens == 1:
                    self.book.mark(msg.turn, "llm_first_token")
                reply.append(delta)
                self.events.reply_delta.emit(msg.turn, delta)
                for piece in chunker.feed(delta):
                    index = yield from self._sentence(msg.turn, piece, index)
            if stop.is_set():
                return
            for piece in chunker.flush():
                index = yield from self._sentence(msg.turn, piece, index)
        finally:
            self.book.mark(msg.turn, "llm_end")
            self.book.update(msg.turn, reply="".join(reply).strip(), tokens=tokens)
        yield ReplyDone(msg.turn, text="".join(reply).strip())

    def _sentence(self, turn: int, piece: str, index: int):
        if index == 0:
            self.book.mark(turn, "first_sentence")
        self.events.sentence.emit(turn, piece)
        yield Sentence(turn, text=piece, index=index)
        if index == 0 and self.section().pause_for_first_audio:
            # hand the cores to TTS until the first sound exists, then keep writing
            self.clock.first_audio_gate(turn).wait(FIRST_AUDIO_WAIT_S)
        return index + 1
