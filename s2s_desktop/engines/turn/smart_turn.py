"""Smart Turn v3.2 (Daily, BSD-2): from the last 8 s of an utterance, the probability that the
speaker has finished their turn rather than paused mid-sentence. An ONNX model of 8.7 MB,
shipped in resources/turn/ with its license; ~100 ms per call on one core here. The model
reads Whisper log-mel features (`whisper_features.py`), the audio left-padded with silence to
8 s."""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

import numpy as np

from ...audio_format import SAMPLE_RATE
from ...errors import ModelLoadError, ModelNotFound
from ...resources_path import resources_dir
from ..base import require
from .whisper_features import log_mel

log = logging.getLogger(__name__)

MODEL_FILE = "smart-turn-v3.2-cpu.onnx"
MODEL_SHA256 = "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"
WINDOW_S = 8  # the model sees at most the last 8 s
FINISHED = 0.5  # a probability above this: the turn is over


def model_path() -> Path:
    path = resources_dir() / "turn" / MODEL_FILE
    if not path.is_file():
        raise ModelNotFound(
            f"the end-of-turn model {path} is missing: reinstall s2s-desktop, or turn "
            "hands-free conversation off (push-to-talk does not need it)"
        )
    return path


def last_window(audio: np.ndarray) -> np.ndarray:
    """The last 8 s of 16 kHz audio, silence-padded in front to exactly 8 s."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    n = WINDOW_S * SAMPLE_RATE
    if len(audio) >= n:
        return audio[-n:]
    return np.concatenate([np.zeros(n - len(audio), np.float32), audio])


class SmartTurn:
    name = "smart-turn-v3.2"

    def __init__(self, path: Path | None = None, threads: int = 1):
        self.path = Path(path) if path else None
        self.threads = threads
        self.session = None

    def load(self) -> None:
        ort = require("onnxruntime", self.name, "onnxruntime")
        path = self.path or model_path()
        data = path.read_bytes()
        if self.path is None and hashlib.sha256(data).hexdigest() != MODEL_SHA256:
            raise ModelLoadError(
                f"the end-of-turn model {path} is damaged (sha256 differs): reinstall "
                "s2s-desktop"
            )
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads  # leave the other cores to STT and the LLM
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        t0 = time.perf_counter()
        try:
            self.session = ort.InferenceSession(
                data, sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ModelLoadError(f"cannot load the end-of-turn model {path} ({exc})") from exc
        log.info("%s loaded in %.2f s", self.name, time.perf_counter() - t0)

    def warmup(self) -> None:
        self.probability(np.zeros(SAMPLE_RATE, np.float32))

    def probability(self, audio: np.ndarray) -> float:
        """Probability (0..1) that 16 kHz `audio`, ending now, is a finished turn."""
        if self.session is None:
            self.load()
        features = log_mel(last_window(audio))[None]
        out = self.session.run(None, {"input_features": features})[0]
        return float(np.asarray(out).reshape(-1)[0])
