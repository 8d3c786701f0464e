"""The audio format every layer shares: what the microphone captures and the engines receive,
how PCM travels between stages and how WAV files are written. A base module: it imports
nothing of the app, so audio, engines, the pipeline, the controller and bench all read it."""

from __future__ import annotations

SAMPLE_RATE = 16000  # the capture rate: microphone, files, VAD and STT all run at 16 kHz mono
SAMPLE_DTYPE = "float32"  # every PCM buffer: mono float32 in -1..1
WAV_SUBTYPE = "PCM_16"  # how WAV files are written
TTS_DEFAULT_RATE = 22050  # a voice that does not say its rate (Piper's medium voices)

