"""The controller's hands-free effects (a mixin of AppController, Qt-free): the session that
owns the hands-free microphone is started and stopped as `transitions.transition` says, its
events become the machine's events, and a turn it hears is fed to the pipeline live."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..errors import S2SError
from ..states import AppState, TurnReason
from ..transitions import Event
from .listener import HandsFreeEvent, HandsFreeEventKind
from .turns import SOURCE, HandsFreeTurns

log = logging.getLogger(__name__)

DOUBLE_TAP_S = 0.4  # two presses of the talk key this close toggle hands-free
STILL_WORKS = "push-to-talk still works"
EVENTS = {
    HandsFreeEventKind.SPEECH_STARTED: Event.SPEECH_STARTED,
    HandsFreeEventKind.BARGE_IN: Event.VOICE_BARGE_IN,
    HandsFreeEventKind.TURN_ENDED: Event.TURN_ENDED,
    HandsFreeEventKind.TIMED_OUT: Event.HANDS_FREE_TIMED_OUT,
    HandsFreeEventKind.STOPPED: Event.HANDS_FREE_LOST,
}
HELD = (HandsFreeEventKind.REPLY_PAUSED, HandsFreeEventKind.REPLY_RESUMED)
# on_event -> a session with start() / stop() / set_replying() / listener (HandsFreeSession)
SessionFactory = Callable[[Callable[[HandsFreeEvent], None]], object]


class HandsFreeEffects:
    """Needs from its host: `_dispatch`, `_hint`, `_sound`, `pipeline`, `recorder`,
    `settings`, `situation`, `clock`, and a queued `hands_free_event` signal."""

    hands_free_factory: SessionFactory | None = None
    _session = None
    _voice: HandsFreeTurns | None = None
    _hands_free_problem = ""
    _replying = False
    _kept_microphone_closed = False

    # ------------------------------------------------------------------ inputs
    def set_hands_free(self, on: bool) -> None:
        self._dispatch(Event.HANDS_FREE_ON if on else Event.HANDS_FREE_OFF)

    def toggle_hands_free(self) -> None:
        self.set_hands_free(not self.situation.hands_free)

    def close_hands_free(self) -> None:
        """The app quits: its microphone closes (no earcon, no state to show any more)."""
        self._do_stop_hands_free()

    def _on_hands_free_event(self, session, event: HandsFreeEvent) -> None:
        """From the listener's thread, queued to this one."""
        if session is None or session is not self._session:
            return  # from a session already stopped
        if event.kind is HandsFreeEventKind.NOTICE:
            self._hint(event.message)
            return
        if event.kind in HELD:
            return  # the session paused or resumed the speaker itself: no state changes
        if event.kind is HandsFreeEventKind.STOPPED:
            self._hands_free_problem = event.message
        self._press = (SOURCE, event.at)  # a barge-in by voice is timed from the speech
        self._released_at = event.decided_at
        self._dispatch(EVENTS[event.kind])
        if event.kind is HandsFreeEventKind.TURN_ENDED and self._voice is not None:
            self._voice.finish()  # sent, or a turn the machine did not take: no more audio

    def _follow_reply(self) -> None:
        """The listener hears a reply differently (its echo): told when one starts or ends."""
        replying = self.situation.state is AppState.SPEAKING
        if self._session is not None and replying != self._replying:
            self._session.set_replying(replying)
        self._replying = replying

    # ------------------------------------------------------------------ effects
    def _do_start_hands_free(self) -> bool:
        box: list = []
        try:
            if self.hands_free_factory is None:
                raise S2SError("hands-free conversation is not available in this app")
            session = self.hands_free_factory(
                lambda event: self.hands_free_event.emit(box[0] if box else None, event)
            )
            box.append(session)
            self._voice = HandsFreeTurns(self.pipeline, session.listener, lambda e: None)
            self._close_kept_microphone()
            session.start()
        except (S2SError, ImportError, OSError) as exc:
            log.warning("hands-free did not start: %s", exc)
            self._voice = None
            self._reopen_kept_microphone()
            self._hands_free_problem = f"hands-free conversation is off: {exc}; {STILL_WORKS}"
            self._dispatch(Event.HANDS_FREE_LOST)
            return False
        self._session, self._replying = session, False
        self._follow_reply()
        log.info("hands-free: listening")
        return True

    def _do_stop_hands_free(self) -> None:
        session, self._session, self._voice = self._session, None, None
        if session is not None:
            session.stop()  # its microphone is closed when this returns
            log.info("hands-free: the microphone is closed")
        if not self.situation.hands_free_listening:  # not when it reopens (a new device)
            self._reopen_kept_microphone()

    def _close_kept_microphone(self) -> None:
        """One microphone at a time: a push-to-talk one kept open (audio.keep_mic_open)
        closes while hands-free listens."""
        if getattr(self.recorder, "is_open", False) and hasattr(self.recorder, "close"):
            self.recorder.close()
            self._kept_microphone_closed = True

    def _reopen_kept_microphone(self) -> None:
        if not self._kept_microphone_closed:
            return
        self._kept_microphone_closed = False
        try:
            self.recorder.open()
        except S2SError as exc:  # said again, with its fix, at the next press
            log.info("the push-to-talk microphone did not reopen: %s", exc)

    def _do_open_voice_turn(self) -> None:
        info, self._barge_in = self._barge_in, {}
        turn = self.pipeline.begin_turn(source=SOURCE)
        self.current_turn = turn
        if self._voice is not None:
            self._voice.begin(turn)  # with the speech heard before the turn existed
        self.turn_info = {"id": turn, "source": SOURCE, "pressed_at": self._press[1], **info}
        self._source, self.error_now = SOURCE, ""

    def _do_submit_voice_turn(self) -> None:
        turn = self._voice.finish() if self._voice is not None else None
        if turn is None:
            turn = self.current_turn
        self.pipeline.end_turn(turn, released_at=self._released_at)
        self.turn_info.update(released_at=self._released_at, submitted_at=self.clock())

    def _do_cancel_voice_turn(self) -> None:
        if self._voice is not None:
            self._voice.finish()
        self.pipeline.interrupt(reason=TurnReason.INTERRUPTED)  # closes the live turn

    def _do_sound_hands_free_on(self) -> None:
        self._sound("listen-start")

    def _do_sound_hands_free_off(self) -> None:
        self._sound("listen-stop")

    def _do_hint_hands_free_waits(self) -> None:
        self._hint("Hands-free conversation starts once the models are loaded")

    def _do_hint_hands_free_timed_out(self) -> None:
        seconds = self.settings.listen.hands_free_timeout_s
        self._hint(
            f"Hands-free conversation turned off: nothing was said for {seconds:g} s. Turn it on "
            "again from the menu or with a double tap of the talk key"
        )

    def _do_hint_hands_free_lost(self) -> None:
        text = self._hands_free_problem or f"hands-free conversation stopped; {STILL_WORKS}"
        self._hands_free_problem = ""
        self.last_error = text
        self._hint(text)
