"""Silero VAD on onnxruntime, torch-free.

The model file is the `silero_vad_v6.onnx` that faster-whisper (a runtime dependency) ships.
It is found by path, without importing faster_whisper, so this backend costs only
onnxruntime's import. That export runs a whole clip as one sequence of 512-sample windows,
each prefixed with the previous window's last 64 samples, with the LSTM state (h, c) passed
between batches.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ...audio_format import SAMPLE_RATE
from ...errors import ModelLoadError, ModelNotFound
from ...models.resolve import package_path
from ..base import SpeechSegment, VADEngine, VADOptions, require

log = logging.getLogger(__name__)

WINDOW = 512  # samples per speech probability at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous window the model sees before each window
BATCH_WINDOWS = 4096  # ~131 s of audio per session.run; state carries across batches


def segments_from_probs(
    probs: np.ndarray,
    n_samples: int,
    threshold: float,
    min_speech_ms: int,
    min_silence_ms: int,
    window: int = WINDOW,
    sample_rate: int = SAMPLE_RATE,
) -> list[SpeechSegment]:
    """Speech regions (sample indices) from per-window speech probabilities.

    Hysteresis: speech starts at a window >= threshold and ends once the probability has stayed
    below a lower threshold for min_silence_ms; regions shorter than min_speech_ms are dropped.
    """
    low = max(threshold - 0.15, 0.01)
    min_speech = sample_rate * min_speech_ms / 1000
    min_silence = sample_rate * min_silence_ms / 1000
    out: list[SpeechSegment] = []
    start: int | None = None
    silence_from: int | None = None

    def close(end: int) -> None:
        if start is not None and end - start >= min_speech:
            out.append(SpeechSegment(start, end))

    for i, p in enumerate(np.asarray(probs, dtype=np.float32).reshape(-1)):
        pos = i * window
        if start is None:
            if p >= threshold:
                start, silence_from = pos, None
            continue
        if p >= threshold:
            silence_from = None
        elif p < low:
            if silence_from is None:
                silence_from = pos
            if pos + window - silence_from >= min_silence:
                close(silence_from)
                start, silence_from = None, None
    if start is not None:
        close(min(silence_from if silence_from is not None else n_samples, n_samples))
    return out


def onnx_model_path():
    """Path of faster-whisper's silero_vad_v6.onnx, or ModelNotFound saying what to install."""
    root = package_path("faster_whisper")
    path = root / "assets" / "silero_vad_v6.onnx" if root else None
    if path is None or not path.is_file():
        raise ModelNotFound(
            "the silero VAD model (faster_whisper/assets/silero_vad_v6.onnx) is missing: "
            "pip install --force-reinstall faster-whisper, or set vad.backend=none"
        )
    return path


class SileroOnnxVAD(VADEngine):
    name = "silero-onnx"
    devices = ("cpu",)
    recognise_order = 1  # after Piper: a voice is an .onnx file too

    @classmethod
    def recognises(cls, model) -> bool:
        return any("silero" in n.lower() for n in model.onnx_files())

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.session = None

    def load(self) -> None:
        ort = require("onnxruntime", self.name, "onnxruntime")
        path = onnx_model_path()
        opts = ort.SessionOptions()
        # A 32 ms window is tiny work: one thread leaves the cores to STT and the LLM.
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        t0 = time.perf_counter()
        try:
            self.session = ort.InferenceSession(
                str(path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ModelLoadError(
                f"cannot load the silero VAD model {path} ({exc}): "
                "pip install --force-reinstall faster-whisper, or set vad.backend=none"
            ) from exc
        log.info("silero VAD (onnx) loaded in %.2f s from %s", time.perf_counter() - t0, path)
        self.loaded = True

    def warmup(self) -> None:
        self.probabilities(np.zeros(SAMPLE_RATE // 2, dtype=np.float32))

    def unload(self) -> None:
        self.session = None
        super().unload()

    def describe(self) -> str:
        return f"{self.name} on cpu"  # VAD always runs on the CPU: it is too small to gain

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        """Speech probability of each 512-sample window of `audio` (the last one zero-padded)."""
        if self.session is None:
            self.load()
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        n_windows = -(-len(audio) // WINDOW)
        if n_windows == 0:
            return np.zeros(0, dtype=np.float32)
        frames = np.zeros((n_windows, WINDOW), dtype=np.float32)
        frames.reshape(-1)[: len(audio)] = audio
        context = np.zeros((n_windows, CONTEXT), dtype=np.float32)
        context[1:] = frames[:-1, -CONTEXT:]
        inputs = np.concatenate([context, frames], axis=1)
        h = np.zeros((1, 1, 128), dtype=np.float32)
        c = np.zeros((1, 1, 128), dtype=np.float32)
        probs = []
        for i in range(0, n_windows, BATCH_WINDOWS):
            out, h, c = self.session.run(
                None, {"input": inputs[i : i + BATCH_WINDOWS], "h": h, "c": c}
            )
            probs.append(np.asarray(out, dtype=np.float32).reshape(-1))
        return np.concatenate(probs)

    def speech(self, audio: np.ndarray, options: VADOptions) -> list[SpeechSegment]:
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        return segments_from_probs(
            self.probabilities(audio), len(audio), options.threshold, options.min_speech_ms,
            options.min_silence_ms,
        )
