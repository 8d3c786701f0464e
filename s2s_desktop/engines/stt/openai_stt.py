"""STT over an OpenAI-compatible /audio/transcriptions endpoint (whisper.cpp server,
speaches, a self-hosted faster-whisper server, ...). The audio goes up as a 16-bit WAV."""

from __future__ import annotations

import io
import json
import logging
import uuid
import wave

import numpy as np

from ...audio_format import SAMPLE_RATE
from ..base import STTEngine, STTOptions, STTResult
from ..openai_http import (
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    Request,
    ServerError,
    parse_base_url,
    plain_http_warning,
)

log = logging.getLogger(__name__)

WHAT = "speech-to-text server"


def wav_bytes(audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bytes:
    """16-bit mono PCM WAV of float audio in -1..1."""
    pcm = (np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def multipart(
    fields: dict[str, str], file_field: str, filename: str, content: bytes, content_type: str
) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type header."""
    boundary = f"s2s-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode()
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
        f'filename="{filename}"\r\nContent-Type: {content_type}\r\n\r\n'.encode()
    )
    parts.append(content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class OpenAISTT(STTEngine):
    name = "openai"
    connect_timeout = CONNECT_TIMEOUT_S
    read_timeout = READ_TIMEOUT_S

    def __init__(self, settings, device: str = "cpu"):
        super().__init__(settings, device)
        self.endpoint = parse_base_url(settings.base_url, "stt.base_url")
        self.warnings: list[str] = []
        warning = plain_http_warning(self.endpoint, WHAT)
        if warning:
            log.warning(warning)
            self.warnings.append(warning)

    def load(self) -> None:
        self.loaded = True  # the server holds the model; the first request tells if it is up

    def describe(self) -> str:
        return f"{self.settings.model or 'default model'} at {self.endpoint.base_url}"

    def transcribe(self, audio: np.ndarray, language: str | None,
                   options: STTOptions) -> STTResult:
        fields = {"response_format": "json", "temperature": "0"}
        if self.settings.model:
            fields["model"] = self.settings.model
        if language:
            fields["language"] = language
        body, content_type = multipart(fields, "file", "speech.wav", wav_bytes(audio), "audio/wav")
        request = Request(self.endpoint, WHAT, self.connect_timeout, self.read_timeout)
        try:
            request.open(
                "/audio/transcriptions", body, content_type, getattr(self.settings, "api_key", "")
            )
            raw = b"".join(iter(request.readline, b""))
        finally:
            request.close()
        text = raw.decode("utf-8", "replace").strip()
        try:
            data = json.loads(text)
        except ValueError:
            return STTResult(text=text, language=language or None)  # response_format=text
        if not isinstance(data, dict) or "text" not in data:
            raise ServerError(
                f"the {WHAT} at {self.endpoint.base_url} answered without a "
                f"transcript: {text[:120]!r}"
            )
        return STTResult(
            text=str(data["text"]).strip(), language=data.get("language") or language or None
        )
