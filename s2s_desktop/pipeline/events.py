"""The pipeline's news channel: Qt signals the UI (or the CLI, with direct connections) hears.
Queues carry data between stages; these signals carry news out of them."""

from PySide6.QtCore import QObject, Signal


class PipelineEvents(QObject):
    stage_state = Signal(str, str, str)  # stage, state (loading|ready|failed|reloading), detail
    transcript = Signal(int, str)  # turn, text
    partial_transcript = Signal(int, str)  # turn, text heard so far while the key is held
    reply_delta = Signal(int, str)  # turn, raw LLM text delta
    tool_call = Signal(int, dict)  # turn, a finished call: ToolResult.to_dict()
    sentence = Signal(int, str)  # turn, speakable piece sent to TTS
    first_audio = Signal(int)  # turn: first sample handed to the output
    turn_finished = Signal(object)  # a FinishedTurn (turns.py)
    error = Signal(str, str)  # stage, message (one clear line)
    notice = Signal(str)  # something the user should know (CPU fallback, …)
    # a reply language no installed voice speaks: the notice, the language, and a catalog voice
    # to offer (its id and the offer's label, "Download Piper …"; "" when the catalog has none)
    voice_missing = Signal(str, str, str, str)
