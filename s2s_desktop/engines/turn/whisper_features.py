"""Whisper's log-mel spectrogram in numpy: the input Smart Turn v3 documents (16 kHz audio,
80 mel bins, 25 ms windows every 10 ms, Slaney mel scale, log10 clamped to 8 below the peak,
scaled to about -1..1). Written from that description so the turn model needs neither torch,
transformers nor pipecat; tests check it against transformers' WhisperFeatureExtractor."""

from __future__ import annotations

import functools

import numpy as np

from ...audio_format import SAMPLE_RATE

N_FFT = 400  # 25 ms
HOP = 160  # 10 ms
N_MELS = 80


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    mel = 3.0 * hz / 200.0
    log_step = np.log(6.4) / 27.0
    return np.where(hz >= 1000.0, 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / log_step, mel)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    log_step = np.log(6.4) / 27.0
    return np.where(mel >= 15.0, 1000.0 * np.exp(log_step * (mel - 15.0)), 200.0 * mel / 3.0)


@functools.cache
def mel_filters() -> np.ndarray:
    """(N_MELS, N_FFT // 2 + 1) triangular filters with Slaney area normalisation."""
    fft_hz = np.linspace(0, SAMPLE_RATE / 2, N_FFT // 2 + 1)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(SAMPLE_RATE / 2), N_MELS + 2))
    lower = (fft_hz[None, :] - edges[:-2, None]) / np.diff(edges)[:-1, None]
    upper = (edges[2:, None] - fft_hz[None, :]) / np.diff(edges)[1:, None]
    filters = np.maximum(0.0, np.minimum(lower, upper))
    filters *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return filters.astype(np.float32)


@functools.cache
def _window() -> np.ndarray:
    return np.hanning(N_FFT + 1)[:-1].astype(np.float32)  # periodic Hann


def log_mel(audio: np.ndarray, normalize: bool = True) -> np.ndarray:
    """(N_MELS, len(audio) // HOP) log-mel features of 16 kHz mono audio."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    if normalize:  # zero mean, unit variance, as the feature extractor's do_normalize
        audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
    padded = np.pad(audio, N_FFT // 2, mode="reflect")  # centred frames
    n_frames = 1 + (len(padded) - N_FFT) // HOP
    frames = np.lib.stride_tricks.as_strided(
        padded, shape=(n_frames, N_FFT), strides=(padded.strides[0] * HOP, padded.strides[0])
    )
    power = np.abs(np.fft.rfft(frames * _window(), axis=1)) ** 2
    mel = mel_filters() @ power.T.astype(np.float32)
    spec = np.log10(np.maximum(mel, 1e-10))[:, :-1]  # Whisper drops the last frame
    spec = np.maximum(spec, spec.max() - 8.0)
    return ((spec + 4.0) / 4.0).astype(np.float32)
