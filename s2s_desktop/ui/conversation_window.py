"""The conversation: what the user said, the reply streaming in, each turn's latency; copy and
clear (which forgets the saved history too). History from earlier runs is shown at start. The
view follows the newest turn unless the user scrolled up to read; the running turn says
listening / thinking / speaking as the app does."""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QGuiApplication,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
)
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..history import Exchange, History
from ..pipeline.turns import FinishedTurn
from ..states import AppState, TurnReason
from .ask_bar import AskBar
from .icons import state_icon


@dataclass
class Entry:
    user: str = ""
    assistant: str = ""
    reason: str = ""  # "" while the turn runs
    timings_ms: dict = field(default_factory=dict)
    when: float = field(default_factory=time.time)
    error: str = ""
    stt_while_speaking: bool = False
    tool_calls: list = field(default_factory=list)  # ToolResult.to_dict() each


def tool_call_line(call: dict) -> str:
    """One tool call as the window shows it: name, arguments, result or why not."""
    args = ", ".join(f"{k}={v!r}" for k, v in (call.get("arguments") or {}).items())
    told = call.get("result", call.get("error", ""))
    return f"tool {call.get('name')}({args}) → {call.get('outcome')}: {told}"


RUNNING_WORDS = {
    AppState.LISTENING: "listening…",
    AppState.THINKING: "thinking…",
    AppState.SPEAKING: "speaking…",
}


def latency_line(t: dict, stt_while_speaking: bool = False) -> str:
    """First audio after release, then what each stage took after the release."""
    parts = []
    if t.get("release_to_first_audio") is not None:
        parts.append(f"first audio {t['release_to_first_audio']:.0f} ms after release")
    if stt_while_speaking:  # the live transcript was ready at release: no STT time was left
        parts.append("speech-to-text done while you spoke")
    elif t.get("stt") is not None:
        parts.append(f"speech-to-text {t['stt']:.0f} ms")
    for key, label in (("llm_first_token", "first token"), ("tts_first_chunk", "voice")):
        if t.get(key) is not None:
            parts.append(f"{label} {t[key]:.0f} ms")
    if t.get("total") is not None:
        parts.append(f"total {t['total'] / 1000:.1f} s")
    return " · ".join(parts)


class ConversationWindow(QWidget):
    cleared = Signal()
    new_conversation_requested = Signal()

    def __init__(
        self,
        history: History | None = None,
        conversation=None,
        earlier: list[Exchange] | None = None,
        parent=None,
    ):
        super().__init__(parent)
        self.setWindowTitle("Conversation")  # Qt appends the app name
        self.setWindowIcon(state_icon(AppState.IDLE))
        self.resize(520, 600)
        self.history = history
        self.conversation = conversation
        self.entries: dict[object, Entry] = {}
        for i, ex in enumerate(earlier or []):
            self.entries[("h", i)] = Entry(
                ex.user,
                ex.assistant,
                ex.reason or TurnReason.OK,
                ex.timings_ms,
                ex.time,
                ex.error,
                ex.stt_while_speaking,
                list(ex.tool_calls),
            )
        self.state = AppState.IDLE  # the app's state: what the running turn says
        self.detail = ""  # what the app says about that state (an error, the progress)
        self.follow = True  # keep the newest turn in view until the user scrolls up
        # the leading finished entries already drawn, and where the view's text after them
        # starts: a render redraws only the rest (a whole redraw of a long history on every
        # streamed word took the GUI thread 85-240 ms a time at 500 exchanges)
        self._drawn: list = []
        self._tail_at = 0

        self.view = QTextBrowser()
        self.view.setOpenLinks(False)
        bar = self.view.verticalScrollBar()
        bar.actionTriggered.connect(self._scrolled)  # the user's wheel, drag, keys
        bar.rangeChanged.connect(lambda _lo, _hi: self._keep_newest())
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the conversation (or the selected text)")
        self.copy_button.clicked.connect(self.copy)
        self.new_button = QPushButton("New Conversation")
        self.new_button.setToolTip(
            "Start over: the assistant forgets the earlier questions (they stay shown here)"
        )
        self.new_button.clicked.connect(self.new_conversation_requested)
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Forget the whole conversation, saved history included")
        self.clear_button.clicked.connect(lambda: self.clear(confirm=True))
        self.offer_button = QToolButton()  # "Download <voice>…", while a reply needs one
        self.offer_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.offer_button.hide()
        bar = QHBoxLayout()
        bar.addWidget(self.status, 1)
        bar.addWidget(self.offer_button)
        bar.addWidget(self.new_button)
        bar.addWidget(self.copy_button)
        bar.addWidget(self.clear_button)
        self.ask_bar = AskBar()  # type a question; Stop
        self.view.anchorClicked.connect(self._link_clicked)  # a message's "copy"
        layout = QVBoxLayout(self)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.ask_bar)
        layout.addLayout(bar)

        self._render_timer = QTimer(self, singleShot=True, interval=40)  # streaming coalesced
        self._render_timer.timeout.connect(self.render)
        self.render()

    # ------------------------------------------------------------------ pipeline news
    def on_transcript(self, turn: int, text: str) -> None:
        """The final transcript, or (while the key is held) what was heard so far."""
        entry = self.entries.get(turn)
        if entry is not None and entry.reason:
            return  # a late partial for a finished turn
        if text or entry is not None:
            self._entry(turn).user = text
            self._changed()

    def on_reply_delta(self, turn: int, delta: str) -> None:
        self._entry(turn).assistant += delta
        self._redraw_if_drawn(turn)
        self._changed()

    def on_turn_finished(self, rec: FinishedTurn) -> None:
        turn = rec.turn
        if rec.reason == TurnReason.NO_SPEECH or not rec.transcript.strip():
            if turn in self.entries and not self.entries[turn].assistant:
                del self.entries[turn]
                self._changed()
            return
        self._redraw_if_drawn(turn)
        entry = self._entry(turn)
        entry.user = rec.transcript
        entry.reason = rec.reason
        entry.error = rec.error
        entry.timings_ms = rec.timings_ms
        entry.stt_while_speaking = rec.stt_reused_partial
        entry.tool_calls = [dict(c) for c in rec.tool_calls]
        # an interrupted reply is kept as far as it was spoken; a turn that ended with no
        # reply written (an error) keeps what was streamed
        kept = rec.kept_reply()
        if kept or rec.reason == TurnReason.INTERRUPTED:
            entry.assistant = kept
        self._render_timer.stop()
        self.render()  # the turn is over: nothing more to coalesce
        if rec.error:
            self._show_detail()

    def show_state(self, state: str, detail: str, hotkey: dict | None = None) -> None:
        self.detail = detail
        self._show_detail()
        self.ask_bar.show_state(state)
        if state != self.state:
            self.state = state
            if any(not e.reason for e in self.entries.values()):
                self._changed()  # the running turn's words follow the state

    def _show_detail(self) -> None:
        newest = next(reversed(self.entries.values()), None)
        # a turn's error is written under its question: the status line does not repeat it
        said = newest is not None and newest.error == self.detail != ""
        self.status.setText("" if self.detail == "Ready" or said else self.detail)

    def show_notice(self, text: str, error: bool = False) -> None:
        self.status.setText(text)

    def add_offer(self, action: QAction) -> None:
        """A button for `action`, shown while the action is."""
        self.offer_button.setDefaultAction(action)
        action.changed.connect(lambda: self.offer_button.setVisible(action.isVisible()))
        self.offer_button.setVisible(action.isVisible())

    # ------------------------------------------------------------------ actions
    def mark_new_conversation(self) -> None:
        """A line where the assistant's memory starts over."""
        self.entries[("new", len(self.entries))] = Entry(reason=TurnReason.NEW_CONVERSATION)
        self.render()

    def text(self) -> str:
        """The conversation as plain text."""
        out = []
        for e in self.entries.values():
            if e.reason == TurnReason.NEW_CONVERSATION:
                out += ["— new conversation —", ""]
                continue
            out.append(f"You: {e.user}")
            if e.assistant or e.reason:
                out.append(
                    f"Assistant: {e.assistant}"
                    + (" [interrupted]" if e.reason == TurnReason.INTERRUPTED else "")
                )
            out.append("")
        return "\n".join(out).strip() + ("\n" if out else "")

    def copy(self) -> None:
        selected = self.view.textCursor().selectedText().replace("\u2029", "\n")
        QGuiApplication.clipboard().setText(selected or self.text())
        self.status.setText("Copied")

    def clear(self, confirm: bool = True) -> bool:
        if confirm and self.entries:
            answer = QMessageBox.question(
                self,
                "Clear the conversation?",
                "This forgets the whole conversation, including the saved history.",
            )
            if answer != QMessageBox.StandardButton.Yes:
                return False
        self.entries.clear()
        if self.history is not None:
            self.history.clear()
        if self.conversation is not None:
            self.conversation.clear()
        self.render()
        self.status.setText("Conversation cleared")
        self.cleared.emit()
        return True

    # ------------------------------------------------------------------ drawing
    def _entry(self, turn) -> Entry:
        if turn not in self.entries:
            self.entries[turn] = Entry()
        return self.entries[turn]

    def _changed(self) -> None:
        if not self._render_timer.isActive():
            self._render_timer.start()

    def _scrolled(self, _action: int) -> None:
        """The user scrolled: follow new turns only while at the bottom."""
        bar = self.view.verticalScrollBar()
        self.follow = bar.sliderPosition() >= bar.maximum() - 4

    def _keep_newest(self) -> None:
        if self.follow:
            bar = self.view.verticalScrollBar()
            bar.setValue(bar.maximum())

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._keep_newest()  # reopened (or restarted): the newest turn, unless scrolled up

    def _redraw_if_drawn(self, turn) -> None:
        """An entry already drawn as finished changed: the next render draws all again."""
        if turn in self._drawn:
            self._drawn = []

    def render(self) -> None:
        """Draw the entries after the leading finished ones already in the view."""
        bar = self.view.verticalScrollBar()
        kept = bar.value()
        items = list(self.entries.items())
        if [k for k, _ in items[: len(self._drawn)]] != self._drawn:  # cleared, or changed
            self._drawn, self._tail_at = [], 0
        if not self._drawn:
            self.view.clear()
        cursor = QTextCursor(self.view.document())
        cursor.setPosition(self._tail_at)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        if not items:
            self._insert(
                cursor,
                "<p style='color:gray'>Hold the hotkey (or choose Talk) and ask "
                "something. The conversation appears here.</p>",
            )
        for i in range(len(self._drawn), len(items)):
            key, e = items[i]
            same_error = bool(i and e.error == items[i - 1][1].error)
            self._insert(cursor, self._entry_html(e, self.state, i, same_error))
            if e.reason and len(self._drawn) == i:  # finished, after finished ones: it stays
                self._drawn.append(key)
                self._tail_at = cursor.position()
        bar.setValue(bar.maximum() if self.follow else kept)

    @staticmethod
    def _insert(cursor: QTextCursor, html_text: str) -> None:
        """`html_text` at the cursor, in blocks of its own, and a fresh block after it (a
        fragment's first block merges into the block at the cursor: it keeps its format)."""
        entry = QTextDocument()
        entry.setHtml(f"<html><body>{html_text}</body></html>")
        start = cursor.position()
        cursor.insertFragment(QTextDocumentFragment(entry))
        first = QTextCursor(cursor.document())
        first.setPosition(start)
        first.setBlockFormat(entry.firstBlock().blockFormat())
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())

    def _link_clicked(self, url) -> None:
        """'copy:INDEX:user|assistant' — one message to the clipboard."""
        kind, _, rest = url.toString().partition(":")
        index, _, who = rest.partition(":")
        entries = list(self.entries.values())
        if kind != "copy" or not index.isdigit() or int(index) >= len(entries):
            return
        entry = entries[int(index)]
        QGuiApplication.clipboard().setText(entry.user if who == "user" else entry.assistant)
        self.status.setText("Copied the question" if who == "user" else "Copied the answer")

    @staticmethod
    def _entry_html(
        e: Entry, state: str = AppState.THINKING, index: int | None = None, same_error=False
    ) -> str:
        def esc(text: str) -> str:
            return html.escape(text).replace("\n", "<br>")

        if e.reason == TurnReason.NEW_CONVERSATION:
            return "<p align='center' style='color:gray'>— new conversation —</p><hr>"

        def copy_link(who: str) -> str:  # one message's own copy action
            if index is None:
                return ""
            return f" <a href='copy:{index}:{who}' style='font-size:small'>copy</a>"

        when = time.strftime("%H:%M", time.localtime(e.when))
        parts = [
            f"<p><b>You</b> <span style='color:gray'>{when}</span>{copy_link('user')}<br>"
            f"{esc(e.user) or '<i>…</i>'}</p>"
        ]
        reply = esc(e.assistant.strip())
        if e.reason == "" and state == AppState.LISTENING and not reply:
            return parts[0].replace("<i>…</i>", "<i style='color:gray'>listening…</i>") + "<hr>"
        if e.reason == "":
            word = RUNNING_WORDS.get(state, "thinking…")
            reply = (reply + " ▍") if reply else f"<i style='color:gray'>{word}</i>"
        elif e.reason == TurnReason.UNANSWERED:
            reply = "<i style='color:gray'>(no reply: the app stopped before answering)</i>"
        elif e.reason == TurnReason.INTERRUPTED:
            reply += " <i style='color:gray'>(interrupted)</i>"
        elif e.reason == TurnReason.ERROR:  # the same error as the turn above: said once
            error = "failed again: the same error" if same_error else esc(e.error or "failed")
            reply += f" <span style='color:#c62828'>({error})</span>"
        for call in e.tool_calls:
            parts.append(f"<p style='color:gray; font-size:small'>{esc(tool_call_line(call))}</p>")
        answer_link = copy_link("assistant") if e.reason and e.assistant.strip() else ""
        parts.append(f"<p><b style='color:#1e7fd8'>Assistant</b>{answer_link}<br>{reply}</p>")
        line = latency_line(e.timings_ms, e.stt_while_speaking)
        if line:
            parts.append(f"<p style='color:gray; font-size:small'>{line}</p>")
        return "".join(parts) + "<hr>"

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape and AppState(self.state).answering:
            self.ask_bar.stop_requested.emit()  # Esc stops the voice first
        elif event.key() == Qt.Key.Key_Escape:
            self.hide()
        else:
            super().keyPressEvent(event)
