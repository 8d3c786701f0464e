"""A piper voice run in two parts, so a sentence's first words play while the rest is made.

A piper `.onnx` is one VITS graph: text encoder, duration predictor and flow make the
sentence's latent frames (hop 256 samples), then the HiFi-GAN decoder turns them into audio,
which is 60-70 % of the time (the starter voice, 2 cores). The graph is cut where the decoder
starts; the decoder then runs on a window of the first frames and then on the rest, each with
`CONTEXT_FRAMES` of latent on both sides, which gives the same samples as one run (measured:
largest difference 0 with 16 frames, 5e-4 with 8). So a long first sentence is heard after
its front part and ~0.45 s of decoding, not after all of it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

DECODER_FIRST_NODE = "/dec/conv_pre/Conv"  # how piper's exporter names the decoder's input
CONTEXT_FRAMES = 16
FIRST_FRAMES = 40  # ~0.46 s of 22.05 kHz audio: longer than a voice's lead-in silence
LIMIT_KNEE = 0.89  # -1 dBFS: louder samples are bent softly towards 1.0, never clipped


@dataclass
class VoiceParts:
    front: object  # onnxruntime session: phoneme ids → latent frames
    decoder: object  # onnxruntime session: latent frames → audio
    latent: str  # the tensor between them
    hop: int  # samples per latent frame


def split_graph(onnx_path) -> tuple[bytes, bytes, str] | None:
    """The voice's front and decoder as two serialized graphs and the latent's name, or None
    for a graph cut another way (another exporter, a multi-speaker voice whose decoder also
    takes the speaker): such a voice is run whole."""
    try:
        import onnx
        from onnx.utils import Extractor
    except ImportError:
        return None
    try:
        model = onnx.load(str(onnx_path))
    except Exception:  # noqa: BLE001 - a corrupt file: loading it whole says what is wrong
        return None
    graph = model.graph
    inputs = [i.name for i in graph.input]
    if "sid" in inputs or len(graph.output) != 1:
        return None
    first = next((n for n in graph.node if n.name == DECODER_FIRST_NODE), None)
    if first is None or not first.input:
        return None
    latent = first.input[0]
    try:
        cut = Extractor(model)
        front = cut.extract_model(inputs, [latent])
        decoder = cut.extract_model([latent], [graph.output[0].name])
    except Exception:  # noqa: BLE001 - onnx raises bare Exceptions on graphs it cannot cut
        return None
    return front.SerializeToString(), decoder.SerializeToString(), latent


def frame_windows(frames: int) -> list[tuple[int, int]]:
    """The [start, end) frame ranges decoded one after the other: the first words, the rest."""
    if frames <= FIRST_FRAMES + CONTEXT_FRAMES:
        return [(0, frames)]
    return [(0, FIRST_FRAMES), (FIRST_FRAMES, frames)]


def decode_in_parts(parts: VoiceParts, feed: dict,
                    stop: threading.Event | None) -> Iterator[np.ndarray]:
    """One sentence's audio, its first ~0.46 s as soon as that is decoded."""
    latent = parts.front.run(None, feed)[0]
    frames = latent.shape[-1]
    for start, end in frame_windows(frames):
        if stop is not None and stop.is_set():
            return
        lo, hi = max(0, start - CONTEXT_FRAMES), min(frames, end + CONTEXT_FRAMES)
        audio = parts.decoder.run(None, {parts.latent: latent[..., lo:hi]})[0].reshape(-1)
        yield audio[(start - lo) * parts.hop:(end - lo) * parts.hop]


class VoiceGain:
    """One gain for all of a voice's sentences. piper scales each sentence to its own peak,
    which a sentence said in parts does not know until its end; the voice's loudest sentence
    so far sets the gain instead (so loudness holds from sentence to sentence), and a part
    louder than that is bent softly under full scale."""

    def __init__(self) -> None:
        self.peak = 0.0

    def start_sentence(self, first_part: np.ndarray) -> float:
        """The gain for a sentence, from the voice's past and the sentence's first part."""
        return 1.0 / max(self.peak, float(np.abs(first_part).max(initial=0.0)), 1e-4)

    def sentence_done(self, loudest: float) -> None:
        self.peak = max(self.peak, loudest)


def soft_limit(audio: np.ndarray) -> np.ndarray:
    """Samples past the knee bent towards ±1 (tanh), the rest untouched."""
    over = np.abs(audio) > LIMIT_KNEE
    if not over.any():
        return audio
    out = audio.copy()
    room = 1.0 - LIMIT_KNEE
    out[over] = np.sign(audio[over]) * (
        LIMIT_KNEE + room * np.tanh((np.abs(audio[over]) - LIMIT_KNEE) / room))
    return out
