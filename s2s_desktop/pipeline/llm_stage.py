"""LLM stage: streams the reply and cuts it into speakable Sentences as it comes, so TTS
starts on the first clause while the LLM keeps writing.

Between turns it has the engine evaluate the next prompt's known start (system prompt and
history) so at release only the new question is evaluated; a reply that starts to loop is
ended by the LoopGuard before the loop is spoken."""

from __future__ import annotations

import logging

from ..assistant.earcons import Earcon, EarconPlayer
from ..engines.base import LLMOptions
from ..engines.llm.history import build_messages, prefix_messages, window
from ..languages import DEFAULT_LANGUAGE, local_answer_note, with_reply_language
from ..tools.rounds import (
    ToolAsking,
    ToolFinished,
    ToolRounds,
    ToolSlow,
    ToolStarting,
    with_data_rule,
)
from ..tools.spec import CallOutcome
from ..tools.toolbox import AskUser, ToolBox
from .chunker import SentenceChunker
from .messages import Prime, ReplyDone, Sentence, SpeechChunk, Transcript
from .repetition import LoopGuard
from .stage import EngineStage
from .turns import AnsweredBy, Conversation

log = logging.getLogger(__name__)

FIRST_AUDIO_WAIT_S = 5.0
CHECKING = "Let me check. "  # said when a call begins, or a tool runs past SLOW_S
FLUSH = object()  # in the reply stream: a call begins, the words before it are said now
EARCON = object()  # in the reply stream: the "checking" earcon plays (tools.checking_cue)


class LLMStage(EngineStage):
    name = "llm"

    def __init__(self, *args, conversation: Conversation, local=None,
                 tools: ToolBox | None = None, ask_tool: AskUser | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.conversation = conversation
        self.local = local  # assistant.local_commands.LocalCommands: answers before the LLM
        self.tools = tools  # offered to a model that calls tools (tools.enabled)
        self.ask_tool = ask_tool  # the user's yes/no before a writing tool; None: nobody

    def _local_intent(self, msg) -> bool:
        return (
            self.local is not None
            and self.settings.assistant.local_commands
            and isinstance(msg, Transcript)
            and self.local.matcher.match(msg.text) is not None
        )

    def needs_engine(self, msg) -> bool:
        return not self._local_intent(msg)  # the time or a timer works while the LLM loads

    def load_engine(self) -> None:
        super().load_engine()
        self.prime()  # a conversation kept from before (history on disk) starts warm too

    def prime(self, exchanges: list[tuple[str, str]] | None = None, question: str = "") -> None:
        """Evaluate the next prompt's known start (and the `question`'s settled words, from
        the live transcript); a question (any message but another Prime) in the inbox ends it
        early (what was evaluated stays cached), so it is not held up."""
        if self.engine is None:
            return
        cfg = self.section()
        if exchanges is None:
            exchanges = self.conversation.exchanges()
        history = window(exchanges, cfg.history_turns)
        prefix = prefix_messages(cfg.system_prompt, history)
        if self._offer_tools():  # the tool list is part of the cached prefix
            prefix = with_data_rule(prefix)
        self.engine.prime(prefix, self._work_waiting, question)

    def _work_waiting(self) -> bool:
        return self.inbox.waiting(lambda m: not isinstance(m, Prime))

    def process(self, msg: Transcript):
        if self._local_intent(msg):
            yield from self._answer_locally(msg)
            return
        self.book.update(msg.turn, answered_by=AnsweredBy.LLM.value)
        cfg = self.section()
        exchanges = self.conversation.exchanges()
        # the reply in the question's language (no change for English: the cache holds)
        system = with_reply_language(cfg.system_prompt, msg.language)
        messages = build_messages(system, exchanges, msg.text, cfg.history_turns)
        earlier = [reply for _, reply in window(exchanges, cfg.history_turns)]
        ctx = self.clock.context(msg.turn)
        stop = ctx.stop
        chunker = SentenceChunker()
        reply, tokens, index = "", 0, 0
        self.book.mark(msg.turn, "llm_start")
        try:
            while True:
                copied, guard = False, LoopGuard(earlier)
                for delta in self._reply_stream(msg.turn, messages, stop, LLMOptions.of(cfg)):
                    if stop.is_set():
                        break
                    if delta is FLUSH:
                        for piece in chunker.flush():
                            index = yield from self._sentence(msg.turn, piece, index,
                                                              msg.language)
                        continue
                    if delta is EARCON:
                        yield from self._earcon(msg.turn)
                        continue
                    if not delta:
                        continue
                    tokens += 1
                    self.engine.set_threads(ctx.cores.llm_threads(cfg.threads))
                    if tokens == 1:
                        self.book.mark(msg.turn, "llm_first_token")
                        self._record_prompt_tokens(msg.turn)
                    end = guard.cut(reply + delta)
                    if end is not None:  # a loop: what is not spoken yet is taken back
                        log.info("turn %s: the reply began to repeat itself", msg.turn)
                        taken = chunker.retract(max(0, len(reply) - end))
                        reply = reply[: len(reply) - taken]  # the reply as far as it was said
                        copied = not reply.strip() and index == 0
                        break
                    reply += delta
                    self.events.reply_delta.emit(msg.turn, delta)
                    for piece in chunker.feed(delta):
                        index = yield from self._sentence(msg.turn, piece, index, msg.language)
                else:  # the reply ended: its last word counts now
                    copied = index == 0 and guard.cut(reply, final=True) == 0
                if not (copied and len(messages) > 2) or stop.is_set():
                    break
                # an earlier reply again, word for word: the history misleads this model, so
                # the question is answered on its own (the system prompt's cache still holds);
                # that answer stands even if it is the earlier one (an answer, not silence)
                messages = build_messages(system, [], msg.text, 0)
                chunker, reply, earlier = SentenceChunker(), "", []
            if stop.is_set():
                return
            for piece in chunker.flush():
                index = yield from self._sentence(msg.turn, piece, index, msg.language)
        finally:
            self.engine.set_threads(0)  # the next turn's first tokens get every core
            self.book.mark(msg.turn, "llm_end")
            self.book.update(msg.turn, reply=reply.strip(), tokens=tokens)
        yield ReplyDone(msg.turn, text=reply.strip())
        # while the reply plays: the next prompt's start, this exchange included (if the
        # reply is cut off, the turn's close evaluates what differs once more)
        self.prime([*exchanges, (msg.text, reply.strip())])

    def _offer_tools(self) -> bool:
        """List the tools switched on to a model that calls tools; True when there are any."""
        cfg = self.settings.tools
        offer = (self.tools is not None and cfg.enabled and self.engine.can_call_tools())
        if offer:
            self.tools.disabled = set(cfg.disabled)
            self.tools.time_limit_s = cfg.time_limit_s
        tools = [t.spec.schema() for t in self.tools.offered()] if offer else []
        if tools != self.engine.offered_tools:
            self.engine.offered_tools = tools
        return bool(tools)

    def _reply_stream(self, turn: int, messages: list[dict], stop, options: LLMOptions):
        """The reply's text deltas: the engine's own stream, or through the tool rounds when
        tools are offered (their calls recorded, "Let me check." said for a slow one)."""
        if not self._offer_tools():
            yield from self.engine.stream(messages, stop, options)
            return
        self.tools.refresh()  # a server that failed is started again, for the turns after
        # booked as each call starts and ends: Stop may close the turn while a call runs
        def record(calls: list[dict]) -> None:
            used = any(c["outcome"] == CallOutcome.OK for c in calls)
            self.book.update(turn, tool_calls=calls,
                             answered_by=(AnsweredBy.TOOL if used else AnsweredBy.LLM).value)

        rounds = ToolRounds(self.tools, ask=self.ask_tool,
                            allow_writing=self.settings.tools.allow_writing, on_record=record)
        self.last_tool_rounds = rounds  # its per-round profile, for scripts/measure_tool_turn
        said, answered = False, False  # anything yet; words since the last call ended
        for item in rounds.stream(self.engine, with_data_rule(messages), stop, options):
            if isinstance(item, str):
                if item.strip():
                    said = answered = True
                yield item
            elif isinstance(item, ToolStarting | ToolSlow):
                if said:  # the model's own words before the call: said now, not held
                    yield FLUSH
                else:  # once a turn, before any word: never inside a sentence
                    said = True
                    yield from self._checking_cue()
            elif isinstance(item, ToolAsking):  # said while the app waits for yes or no
                said = True
                yield f" {item.question} "
            elif isinstance(item, ToolFinished):
                answered = False
                self.events.tool_call.emit(turn, item.result.to_dict())
                log.info("turn %s: tool %s %s in %.0f ms", turn, item.result.call.name,
                         item.result.outcome, item.result.ms)
        if rounds.results and not answered and not stop.is_set():
            yield rounds.fallback_answer()  # no words after the calls: say the result

    def _checking_cue(self):
        """The cue a tool turn gives before its answer: the earcon where chosen (and earcons
        are on), else the phrase."""
        if self.settings.tools.checking_cue == "earcon" and self._earcon_samples() is not None:
            yield EARCON
        else:
            yield CHECKING

    def _earcon_samples(self):
        return EarconPlayer(None, lambda: self.settings.audio).samples(Earcon.CHECKING)

    def _earcon(self, turn: int):
        made = self._earcon_samples()
        if made is not None:  # a chime of the turn (sentence -1): not part of what was said
            yield SpeechChunk(turn, pcm=made[0], sample_rate=made[1], sentence=-1)

    def _record_prompt_tokens(self, turn: int) -> None:
        evaluated = getattr(self.engine, "last_stats", {}).get("prompt_tokens_evaluated")
        if evaluated is not None:
            self.book.update(turn, prompt_tokens_evaluated_at_release=evaluated)

    def _answer_locally(self, msg: Transcript):
        answer = self.local.answer(msg.text)
        text = answer.text if answer is not None else ""
        note = local_answer_note(msg.language)  # its phrases and answers are English
        text = f"{text} {note}" if text and note else text
        self.book.update(msg.turn, reply=text, answered_by=AnsweredBy.LOCAL.value)
        if text:
            self.events.reply_delta.emit(msg.turn, text)
        chunker, index = SentenceChunker(), 0
        for piece in [*chunker.feed(text), *chunker.flush()]:
            index = yield from self._sentence(msg.turn, piece, index, DEFAULT_LANGUAGE)
        yield ReplyDone(msg.turn, text=text)

    def _sentence(self, turn: int, piece: str, index: int, language: str | None):
        if index == 0:
            self.book.mark(turn, "first_sentence")
        self.events.sentence.emit(turn, piece)
        yield Sentence(turn, text=piece, index=index, language=language)
        if index == 0 and self.section().pause_for_first_audio:
            # hand the cores to TTS until the first sound exists, then keep writing
            self.clock.context(turn).first_audio.wait(FIRST_AUDIO_WAIT_S)
        return index + 1
