"""Headless runs: recordings from files through the real pipeline, replies to WAV files.
Used by `s2s-desktop run`, the benchmark and the GPU check."""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt

from ..audio.files import read_audio, write_wav
from ..audio.sink import CaptureSink
from ..config import Settings
from ..errors import S2SError
from ..states import STAGES
from .pipeline import Pipeline
from .turns import FinishedTurn

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TypedQuestion:
    """A question given as text (`run --text`), among the recordings of a conversation."""

    text: str


def ensure_qt_core() -> QCoreApplication:
    return QCoreApplication.instance() or QCoreApplication([])


class HeadlessSession:
    """A started pipeline with a capture sink; turns are run one after another."""

    def __init__(self, settings: Settings, load_timeout_s: float = 600.0,
                 sink: CaptureSink | None = None):
        ensure_qt_core()
        self.sink = sink if sink is not None else CaptureSink()
        self.pipeline = Pipeline(settings, self.sink)
        self._finished: queue.Queue[FinishedTurn] = queue.Queue()
        self.pipeline.events.turn_finished.connect(self._finished.put,
                                                   Qt.ConnectionType.DirectConnection)
        self.notices: list[str] = []
        self.pipeline.events.notice.connect(self.notices.append,
                                            Qt.ConnectionType.DirectConnection)
        self.pipeline.events.voice_missing.connect(lambda text, *_: self.notices.append(text),
                                                   Qt.ConnectionType.DirectConnection)
        self.pipeline.start()
        errors = self.pipeline.wait_ready(load_timeout_s)
        if errors:
            self.close()
            stage, message = next(iter(errors.items()))
            raise S2SError(message if stage in message else f"{stage}: {message}")

    def load_times_ms(self) -> dict[str, float]:
        stages = self.pipeline.stages
        return {name: round(stages[name].load_s * 1000, 1) for name in STAGES
                if stages[name].load_s is not None}

    def turn(self, audio, source: str = "", timeout_s: float = 600.0,
             released_at: float | None = None) -> dict:
        """Run one turn to its end; returns its JSON record (`FinishedTurn.to_dict()`) plus
        `pcm`/`sample_rate`."""
        turn = self.pipeline.submit(audio, source=source, released_at=released_at)
        return self._finish(turn, timeout_s)

    def ask(self, text: str, timeout_s: float = 600.0) -> dict:
        """Run one typed question to its end; the same record as `turn`."""
        return self._finish(self.pipeline.submit_text(text, source="text"), timeout_s)

    def _finish(self, turn: int, timeout_s: float) -> dict:
        rec = self.wait(turn, timeout_s).to_dict()
        rec["pcm"] = self.sink.audio(turn)
        rec["sample_rate"] = self.sink.sample_rates.get(turn)
        self.sink.forget(turn)
        return rec

    def wait(self, turn: int, timeout_s: float = 600.0) -> FinishedTurn:
        """`turn` once it has finished (older turns are skipped)."""
        while True:
            try:
                rec = self._finished.get(timeout=timeout_s)
            except queue.Empty:
                raise S2SError(f"turn {turn} did not finish within {timeout_s:.0f} s") from None
            if rec.turn == turn:
                return rec

    def close(self) -> bool:
        if self.pipeline.shutdown(timeout_s=2.0):
            return True
        # a stage still finishing (the LLM evaluating the next prompt, a model unloading) on
        # a busy machine: the process must not end under a running thread (Qt aborts it)
        log.info("waiting for the pipeline's threads to stop")
        return all([stage.wait(30000) for stage in self.pipeline.stages.values()])


def run_files(settings: Settings, inputs: Iterable[str | Path | TypedQuestion],
              output_dir: str | Path | None,
              on_turn: Callable[[dict], None] | None = None) -> list[dict]:
    """One conversation over the given recordings and typed questions, in order; each reply
    is written to output_dir/turn-N.wav. Recordings are all read first, so a bad file fails
    before models load."""
    questions = [q if isinstance(q, TypedQuestion) else (str(q), read_audio(q)) for q in inputs]
    if any(isinstance(q, TypedQuestion) and not q.text.strip() for q in questions):
        raise S2SError('--text is empty: give the question, e.g. --text "What time is it?"')
    session = HeadlessSession(settings)
    results = []
    try:
        for q in questions:
            if isinstance(q, TypedQuestion):
                rec = session.ask(q.text)
            else:
                rec = session.turn(q[1], source=q[0])
            pcm, rate = rec.pop("pcm"), rec.pop("sample_rate")
            rec["audio"] = None
            if output_dir is not None and rate and len(pcm):
                path = Path(output_dir) / f"turn-{rec['turn']}.wav"
                rec["audio"] = str(write_wav(path, pcm, rate))
            rec["audio_seconds"] = round(len(pcm) / rate, 2) if rate else 0.0
            results.append(rec)
            if on_turn is not None:
                on_turn(rec)
    finally:
        session.close()
    return results
