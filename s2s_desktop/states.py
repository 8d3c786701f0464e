"""The closed sets the app passes around, as StrEnums (each member equals, and serialises as,
its plain string, so JSON, history and IPC replies read the same), and how each app state
looks: the word and the icon the tray, the floating window and the actions show."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AppState(StrEnum):
    LOADING = "loading"
    IDLE = "idle"
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"
    ERROR = "error"

    # the groupings, defined once (transitions.py, the controller, the app and the UI read them)
    @property
    def busy(self) -> bool:
        """A turn runs: recording, or a reply on its way."""
        return self in (AppState.LISTENING, AppState.THINKING, AppState.SPEAKING)

    @property
    def answering(self) -> bool:
        """A reply is being written or spoken (Stop Speaking stops it)."""
        return self in (AppState.THINKING, AppState.SPEAKING)

    @property
    def resting(self) -> bool:
        """Between turns with the models loaded: ready, or showing a problem."""
        return self in (AppState.IDLE, AppState.ERROR)


class Stage(StrEnum):
    """The pipeline's engine stages, in the order audio flows through them; each is also the
    name of its settings section (`settings.vad`, …)."""

    VAD = "vad"
    STT = "stt"
    LLM = "llm"
    TTS = "tts"


STAGES = tuple(Stage)
MODEL_STAGES = (Stage.STT, Stage.LLM, Stage.TTS)  # the stages whose model the user chooses


class StageState(StrEnum):
    LOADING = "loading"
    READY = "ready"
    RELOADING = "reloading"
    FAILED = "failed"
    UNLOADED = "unloaded"  # idle past ui.unload_after_minutes: loaded again on the next turn


class TurnReason(StrEnum):
    OK = "ok"
    NO_SPEECH = "no speech"
    INTERRUPTED = "interrupted"
    TOO_SHORT = "too short"  # a tap: the press was shorter than audio.min_press_ms
    ERROR = "error"
    UNANSWERED = "unanswered"  # the app stopped mid-turn (read back from history)
    NEW_CONVERSATION = "new conversation"  # a history marker: the assistant forgot before


@dataclass(frozen=True)
class StateLook:
    label: str  # the word for the state
    icon: str  # resources/icons/<icon>-<size>.png


LOOKS = {
    AppState.LOADING: StateLook("Loading models", "loading"),
    AppState.IDLE: StateLook("Ready", "idle"),
    AppState.LISTENING: StateLook("Listening", "listening"),
    AppState.THINKING: StateLook("Thinking", "thinking"),
    AppState.SPEAKING: StateLook("Speaking", "speaking"),
    AppState.ERROR: StateLook("Problem", "error"),
}
# the detail line while a turn waits for the user's yes or no before a writing tool
ASKING_DETAIL = "Waiting for your answer"
# between turns in hands-free conversation the microphone is open, waiting for a voice
HANDS_FREE_LOOK = StateLook("Hands-free", "hands-free")


def look(state: str, hands_free: bool = False) -> StateLook:
    """How `state` looks; ready in hands-free conversation looks like HANDS_FREE_LOOK."""
    if hands_free and state == AppState.IDLE:
        return HANDS_FREE_LOOK
    return LOOKS.get(state, LOOKS[AppState.IDLE])
