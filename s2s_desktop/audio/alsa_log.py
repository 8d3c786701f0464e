"""ALSA's own messages ("ALSA lib pcm.c:…: underrun occurred") go to the log, not the terminal.

libasound prints them to stderr through one process-wide error handler; PortAudio sets its
own when it initialises (importing sounddevice), so this runs after that import."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger("s2s_desktop.alsa")

# void handler(const char *file, int line, const char *function, int err, const char *fmt, ...)
# the variadic tail is not read: fmt itself is the message ("underrun occurred")
_HANDLER_TYPE = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p
)
_installed = None  # kept referenced: libasound calls it for the life of the process


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def _to_log(file, line, function, err, fmt) -> None:
    log.info("ALSA %s:%d (%s) %s", _text(file), line, _text(function), _text(fmt).strip())


def route_alsa_messages_to_log() -> bool:
    """True when libasound's messages now go to the log (Linux with ALSA only)."""
    global _installed
    if not sys.platform.startswith("linux"):
        return False
    if _installed is not None:
        return True
    name = ctypes.util.find_library("asound")
    if not name:
        return False
    try:
        lib = ctypes.CDLL(name)
        handler = _HANDLER_TYPE(_to_log)
        lib.snd_lib_error_set_handler(handler)
    except (OSError, AttributeError) as exc:
        log.debug("ALSA messages stay on stderr (%s)", exc)
        return False
    _installed = handler
    return True
