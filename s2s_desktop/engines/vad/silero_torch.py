"""Silero VAD through the `silero-vad` package (TorchScript model on torch): the reference
implementation, for users who already have torch (extra "torch"). The ONNX backend gives the
same results without torch."""

from __future__ import annotations

import logging
import time

import numpy as np

from ...audio_format import SAMPLE_RATE
from ...errors import ModelLoadError
from ..base import SpeechSegment, VADEngine, VADOptions

log = logging.getLogger(__name__)

WARMUP_VAD = VADOptions(threshold=0.5, min_speech_ms=250, min_silence_ms=100)  # silero's own


class SileroTorchVAD(VADEngine):
    name = "silero"
    devices = ("cpu",)
    extra = "torch"

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.model = None
        self._torch = None
        self._timestamps = None

    def load(self) -> None:
        torch = self.require("torch", "torch")
        threads = torch.get_num_threads()
        silero_vad = self.require("silero_vad", "silero-vad")
        # silero_vad sets torch to one thread on import; that would slow every other torch
        # stage in this process, so give the process its thread count back.
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        try:
            self.model = silero_vad.load_silero_vad(onnx=False)
        except Exception as exc:
            raise ModelLoadError(
                f"cannot load the silero VAD model from the silero-vad package ({exc}): "
                "pip install --force-reinstall silero-vad, or set vad.backend=silero-onnx"
            ) from exc
        self._torch = torch
        self._timestamps = silero_vad.get_speech_timestamps
        log.info("silero VAD (torch) loaded in %.2f s", time.perf_counter() - t0)
        self.loaded = True

    def warmup(self) -> None:
        self.speech(np.zeros(SAMPLE_RATE // 2, dtype=np.float32), WARMUP_VAD)

    def unload(self) -> None:
        self.model = None
        super().unload()

    def describe(self) -> str:
        return f"{self.name} on cpu"  # the model is tiny: a GPU would only add transfers

    def speech(self, audio: np.ndarray, options: VADOptions) -> list[SpeechSegment]:
        if self.model is None:
            self.load()
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        if len(audio) == 0:
            return []
        torch = self._torch
        # The model runs one 32 ms window at a time: several intra-op threads only spin and, on
        # a busy CPU, made a 3 s clip take seconds instead of ~0.15 s. Limit this call to one
        # thread (with OpenMP that is this thread's setting) and put the count back.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.inference_mode():
                found = self._timestamps(
                    torch.from_numpy(audio.copy()),
                    self.model,
                    threshold=options.threshold,
                    sampling_rate=SAMPLE_RATE,
                    min_speech_duration_ms=options.min_speech_ms,
                    min_silence_duration_ms=options.min_silence_ms,
                    speech_pad_ms=0,  # padding is trim()'s job, with vad.pad_ms
                )
        finally:
            torch.set_num_threads(threads)
        return [SpeechSegment(int(t["start"]), int(t["end"])) for t in found]
