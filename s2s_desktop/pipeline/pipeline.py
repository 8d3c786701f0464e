"""The pipeline builder: VAD → STT → LLM (+chunker) → TTS → player, one QThread each, chained
from one list (CHAIN). What flows back against the turn is named: the per-turn context
(turns.TurnContext: stop, first-audio gate, core share) and the player's TurnClosed message,
which the pipeline routes (Upstream).

One object the CLI and the app share. `submit()` starts a turn (and is barge-in if one is
running), `interrupt()` stops the current one, `reload()` restarts only the stages whose
settings changed, `shutdown()` joins every thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import numpy as np

from ..assistant.local_commands import LocalCommands
from ..assistant.timers import TimerBook
from ..audio.sink import AudioSink
from ..config import Settings, changed_stages, config_dir, data_dir
from ..states import STAGES, StageState, TurnReason
from ..tools.assistant_tools import assistant_toolbox
from ..tools.mcp_config import FILENAME as MCP_FILE
from ..tools.mcp_config import load_mcp_config
from ..tools.mcp_servers import McpServers
from .events import PipelineEvents
from .llm_stage import LLMStage
from .messages import (
    STOP,
    AudioChunk,
    HeardAnswer,
    KeyUp,
    ListenEnd,
    Prime,
    Reload,
    ReplyDone,
    Sentence,
    SpeechChunk,
    Transcript,
    TurnClosed,
    Unload,
    Utterance,
)
from .player_stage import PlayerStage
from .stt_stage import STTStage
from .tts_stage import TTSStage
from .turns import AnsweredBy, Conversation, TurnBook, TurnClock
from .vad_stage import VADStage

log = logging.getLogger(__name__)

STRAGGLER_WAIT_S = 60.0  # past shutdown's timeout, how long a busy stage may still take

# The stages in the turn's order: each one's outbox is the next one's inbox
CHAIN = (
    ("vad", VADStage),
    ("stt", STTStage),
    ("llm", LLMStage),
    ("tts", TTSStage),
    ("player", PlayerStage),
)


class Upstream:
    """The last stage's outbox: messages against the turn's direction, each kind routed by
    the pipeline (a closed turn: the conversation keeps it, the LLM evaluates ahead)."""

    def __init__(self, routes: dict[type, Callable]):
        self.routes = routes

    def put(self, msg) -> None:
        self.routes[type(msg)](msg)


class Pipeline:
    def __init__(
        self,
        settings: Settings,
        sink: AudioSink,
        conversation: Conversation | None = None,
        events: PipelineEvents | None = None,
    ):
        self.settings = settings
        self.sink = sink
        self.events = events or PipelineEvents()
        self.clock = TurnClock()
        self.book = TurnBook()
        self.conversation = conversation or Conversation()
        # the time, timers, "say that again": answered in the LLM stage before the LLM
        self.timers = TimerBook()
        self.local = LocalCommands(self.timers, last_reply=self.conversation.last_reply)
        # tools for models that call them; the user's MCP servers start with the pipeline
        self.tools = assistant_toolbox(self.timers, data_dir)
        mcp_configs, self.tool_problems = load_mcp_config(config_dir() / MCP_FILE)
        self.mcp = McpServers(mcp_configs, self.tools)
        own = {"llm": dict(conversation=self.conversation, local=self.local, tools=self.tools),
               "player": dict(sink=sink)}
        outbox = Upstream({TurnClosed: self._remember})
        built = {}
        for name, kind in reversed(CHAIN):
            built[name] = kind(settings, clock=self.clock, book=self.book, events=self.events,
                               outbox=outbox, **own.get(name, {}))
            outbox = built[name].inbox
        self.stages = {name: built[name] for name, _ in CHAIN}
        self.vad, self.stt, self.llm, self.tts, self.player = self.stages.values()
        self.started = False
        self._unloaded: set[str] = set()  # stages whose model was freed while idle
        self._forget_before = 0  # turns before this one belong to a forgotten conversation

    @property
    def ask_tool(self):
        """(tool, call, stop) → allowed: the app asks the user before a writing tool (from the
        LLM stage's thread; it blocks until the user answers or `stop` is set). None: nobody
        to ask, denied."""
        return self.llm.ask_tool

    @ask_tool.setter
    def ask_tool(self, ask) -> None:
        self.llm.ask_tool = ask

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> Pipeline:
        for stage in self.stages.values():
            stage.start()
        for problem in self.tool_problems:
            self.events.notice.emit(problem)
        self.mcp.start()  # in the background: never delays the first answer
        self.started = True
        return self

    def wait_ready(self, timeout_s: float | None = None) -> dict[str, str]:
        """Wait for every stage to finish loading; returns {stage: error} for those that failed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for stage in self.stages.values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            stage.ready.wait(left)
        return {name: s.load_error for name, s in self.stages.items() if s.load_error}

    def loaded(self) -> dict[str, str]:
        """What each model stage runs now ("" while loading or failed)."""
        return {
            n: (self.stages[n].engine.describe() if self.stages[n].engine else "") for n in STAGES
        }

    def shutdown(self, timeout_s: float = 1.0) -> bool:
        """Stop every stage and join them; True when all threads ended in time."""
        self.interrupt()
        self.timers.close()
        self.mcp.close()
        if not self.started:
            return True
        for stage in self.stages.values():
            stage.inbox.put_nowait(STOP)
        deadline = time.monotonic() + timeout_s
        ok = True
        for stage in self.stages.values():
            left_ms = max(1, int((deadline - time.monotonic()) * 1000))
            ok = stage.wait(left_ms) and ok
        if not ok:
            # a QThread destroyed while it runs aborts the process; a stage ends at its next
            # step (one token, one prompt batch), so a busy machine only needs more time
            log.warning("pipeline threads still busy after %.1f s; waiting for them", timeout_s)
            for stage in self.stages.values():
                stage.wait(int(STRAGGLER_WAIT_S * 1000))
        self.sink.close()
        self.started = False
        return ok

    # -- turns ------------------------------------------------------------------------------
    def submit(self, audio: np.ndarray, released_at: float | None = None, source: str = "") -> int:
        """Start a turn from a whole 16 kHz mono float32 recording (barge-in on any running
        turn)."""
        turn = self.begin_turn(source)
        released = released_at if released_at is not None else time.monotonic()
        self.vad.inbox.put(Utterance(turn, audio=audio, source=source, created=released))
        return turn

    def submit_text(self, text: str, source: str = "text") -> int:
        """A typed question: a turn that starts at the LLM stage (barge-in on any running
        turn); it is answered, spoken and recorded like a spoken one."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("the question is empty: type something to ask")
        turn = self.begin_turn(source)
        now = time.monotonic()
        self.book.mark(turn, "released", now)
        self.book.update(turn, transcript=text)
        self.events.transcript.emit(turn, text)
        self.llm.inbox.put(Transcript(turn, text=text, created=now))
        return turn

    def say(self, text: str, chime=None, source: str = "announcement") -> int:
        """Speak `text` (after the `chime`, (pcm, rate), if given) without the LLM: a due
        timer. Barge-in on a running reply, which is kept as far as spoken."""
        turn = self.begin_turn(source)
        now = time.monotonic()
        self.book.mark(turn, "released", now)
        self.book.update(turn, reply=text, answered_by=AnsweredBy.LOCAL.value)
        if chime is not None:
            pcm, rate = chime
            self.player.inbox.put(SpeechChunk(turn, pcm=pcm, sample_rate=rate, sentence=-1))
        self.tts.inbox.put(Sentence(turn, text=text, index=0, created=now))
        self.tts.inbox.put(ReplyDone(turn, text=text, created=now))
        return turn

    def unload_models(self) -> list[str]:
        """Free every loaded model (the app is idle); the next turn loads them again."""
        names = [n for n in STAGES if self.stages[n].engine is not None and n not in self._unloaded]
        for name in names:
            self.stages[name].inbox.put(Unload(-1))
        self._unloaded.update(names)
        return names

    def wake(self) -> bool:
        """Load the models freed while idle again (before the turn's own messages)."""
        if not self._unloaded:
            return False
        for name in sorted(self._unloaded):
            self._reload_stage(name)
        self._unloaded.clear()
        self.events.notice.emit("Loading the models again (they were freed while idle)…")
        return True

    def begin_turn(self, source: str = "") -> int:
        """Live turn: the key went down. Barge-in on any running turn; feed() the recording
        while the key is held (STT starts in the background), end_turn() at release."""
        self.wake()
        self.interrupt()
        turn = self.clock.new_turn()
        self.book.open(turn, source=source)
        return turn

    def feed(self, turn: int, pcm: np.ndarray) -> None:
        if not self.clock.is_stale(turn):
            self.vad.inbox.put(AudioChunk(turn, pcm=pcm))

    def key_up(self, turn: int) -> None:
        """The key went up and may still come back down (the release grace): transcribe the
        speech so far now, so the release grace is not waited for when it ends the turn."""
        if not self.clock.is_stale(turn):
            self.vad.inbox.put(KeyUp(turn))

    def end_turn(self, turn: int, released_at: float | None = None) -> None:
        """The key was released: what was fed is the whole recording."""
        if not self.clock.is_stale(turn):
            released = released_at if released_at is not None else time.monotonic()
            self.vad.inbox.put(ListenEnd(turn, created=released))

    def hush(self, turn: int, on: bool = True) -> None:
        """While on, `turn`'s audio is not played (what plays stops now); the turn goes on.
        The key held to answer a tool's question silences the question, which the
        microphone would hear under the answer."""
        self.player.hush(turn, on)

    def hear_answer(self, audio: np.ndarray, reply: Callable[[str], None]) -> None:
        """Transcribe a spoken answer to a tool's question (16 kHz mono float32) with the STT
        model, outside any turn: the turn that asked waits on. `reply(text)` runs in the STT
        stage's thread."""
        self.stt.inbox.put(HeardAnswer(-1, audio=audio, reply=reply))

    def live_words(self, samples: int) -> str | None:
        """The newest live turn's words, if its live transcript heard the first `samples`
        samples of its recording; None while it has not yet ("" when live STT is off: none
        will come). Any thread: no STT work, only the STT stage's last result."""
        if not self.settings.stt.live:
            return ""
        live = self.stt.live
        if live is None or live[0] != self.clock.current or live[1] < samples:
            return None
        return live[2]

    def interrupt(self, reason: TurnReason = TurnReason.INTERRUPTED) -> list[int]:
        """Barge-in: stop generation and playback of every running turn. When this returns no
        audio of those turns reaches the sink. Returns the turns it interrupted; they end
        with `reason` (a dropped tap says "too short")."""
        cancelled = self.book.unfinished()
        self.clock.cancel_all()
        self.player.flush()
        for turn in cancelled:
            self.player.close_turn(turn, reason)
        return cancelled

    def new_conversation(self) -> None:
        """Start over: stop the running turn, forget the exchanges the LLM sees, and let the
        LLM evaluate the bare system prompt while idle, so the next question starts warm."""
        self.interrupt()
        self._forget_before = self.clock.current + 1  # a turn closing just now stays out
        self.conversation.clear()
        self.llm.inbox.put(Prime(-1))

    def _remember(self, msg: TurnClosed) -> None:
        """Store the exchange the LLM will see next turn: as heard, if it was cut off. Then
        the LLM evaluates the next prompt's known part while the user thinks."""
        rec = msg.record
        if rec.turn < self._forget_before:
            return
        if rec.reason in (TurnReason.OK, TurnReason.INTERRUPTED):
            self.conversation.add(rec.transcript, rec.kept_reply())
        self.llm.inbox.put(Prime(rec.turn))

    # -- settings -----------------------------------------------------------------------------
    def reload(self, settings: Settings) -> list[str]:
        """Apply new settings: stages whose engine settings changed reload, in their own thread;
        prompt-level settings apply from the next turn. Returns the reloaded stages."""
        changed = changed_stages(self.settings, settings)
        self.settings = settings
        for name, stage in self.stages.items():
            if name in changed:
                self._reload_stage(name, announce=True)
            else:
                stage.settings = settings
        return changed

    def retry(self) -> list[str]:
        """Stages whose model failed to load try again with the same settings (a missing
        model was downloaded meanwhile). Returns the stages that retry."""
        failed = [n for n in STAGES if self.stages[n].load_error]
        for name in failed:
            self._reload_stage(name, announce=True)
        return failed

    def _reload_stage(self, name: str, announce: bool = False) -> None:
        if announce:
            backend = getattr(self.settings, name).backend
            self.events.stage_state.emit(name, StageState.RELOADING, backend)
        self.stages[name].ready.clear()
        self.stages[name].inbox.put(Reload(-1, settings=self.settings))
