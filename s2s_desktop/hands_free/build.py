"""The app's hands-free session, built when the mode starts: its own microphone, the echo
canceller fed by what the app's speaker plays, silero VAD and Smart Turn (both loaded once
and kept). Qt-free; `HandsFreeBuilder(...)(on_event)` is the controller's session factory."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..engines.turn.smart_turn import SmartTurn
from ..engines.vad.silero_onnx import SileroOnnxVAD
from ..engines.vad.silero_stream import SileroStream
from .listener import HandsFreeEvent, HandsFreeListener, TurnTaking
from .session import EchoReferenceSpeaker, HandsFreeSession, StreamingMicrophone


class SpeakerLinkedSession(HandsFreeSession):
    """A session whose echo canceller hears what the app's speaker plays while it runs (and
    only then: push-to-talk pays nothing for it)."""

    def __init__(self, listener, microphone, on_event, speaker=None):
        super().__init__(listener, microphone, on_event)
        self.speaker = speaker if isinstance(speaker, EchoReferenceSpeaker) else None
        self.player = self.speaker  # a voice over the reply pauses it here, at once

    def start(self) -> None:
        echo = self.listener.echo
        if self.speaker is not None and echo is not None:
            self.speaker.on_played = echo.reference
        try:
            super().start()
        except Exception:
            self._unlink()
            raise

    def stop(self) -> None:
        super().stop()
        self._unlink()

    def _unlink(self) -> None:
        if self.speaker is not None:
            self.speaker.on_played = None


class HandsFreeBuilder:
    def __init__(self, settings: Callable[[], object], speaker, on_notice=None, sd=None,
                 transcript: Callable[[np.ndarray], str] | None = None,
                 words_so_far: Callable[[int], str | None] | None = None):
        self.settings = settings  # the settings now (they change while the app runs)
        self.speaker = speaker
        # the words of 16 kHz audio (the app's speech-to-text), or None: a turn's words keep it
        # open on "of …" and tell "Stop." from "yeah" over a reply (docs/hands-free.md)
        self.transcript = transcript
        self.words_so_far = words_so_far  # the live transcript, once it covers n samples
        self.on_notice = on_notice
        self.sd = sd
        self._vad: SileroOnnxVAD | None = None
        self._turn: SmartTurn | None = None

    def __call__(self, on_event: Callable[[HandsFreeEvent], None]) -> SpeakerLinkedSession:
        """Raises EchoCancellerUnavailable (the livekit wheel is missing: how to install it)
        or ModelNotFound / ModelLoadError for the VAD or the end-of-turn model."""
        from ..audio.echo import EchoCanceller

        settings = self.settings()
        echo = EchoCanceller(origin=time.monotonic())
        if self._vad is None:
            vad = SileroOnnxVAD(settings.vad)
            vad.load()
            self._vad = vad
        if self._turn is None and settings.listen.turn_model:
            turn = SmartTurn()
            turn.load()
            self._turn = turn
        tuning = TurnTaking(timeout_s=settings.listen.hands_free_timeout_s,
                            use_turn_model=settings.listen.turn_model)
        listener = HandsFreeListener(SileroStream(self._vad), self._turn, echo, tuning,
                                     transcript=self.transcript,
                                     words_so_far=self.words_so_far)
        microphone = StreamingMicrophone(
            settings.audio.input_device, on_notice=self.on_notice, sd=self.sd, keep_open=True
        )
        return SpeakerLinkedSession(listener, microphone, on_event, self.speaker)
