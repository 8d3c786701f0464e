"""sounddevice, imported with clear errors, and audio devices chosen by name (names survive
replugging; indices do not)."""

from __future__ import annotations

from ..errors import AudioDeviceError


def import_sounddevice():
    """The sounddevice module, or AudioDeviceError saying how to get PortAudio."""
    try:
        import sounddevice
    except OSError as exc:  # the PortAudio library itself is missing
        raise AudioDeviceError(
            f"PortAudio is not installed ({exc}): install it (Debian/Ubuntu: "
            "apt-get install libportaudio2) and restart s2s-desktop"
        ) from None
    except ImportError:
        raise AudioDeviceError(
            "the sounddevice package is missing: pip install sounddevice"
        ) from None
    return sounddevice


def find_device(sd, name: str, kind: str) -> tuple[int | None, str]:
    """(device index or None for the default, notice). `kind` is "input" or "output".

    An exact name wins, then a case-insensitive substring; a missing name falls back to the
    default device with a notice. No device of that kind at all raises AudioDeviceError."""
    channels = "max_input_channels" if kind == "input" else "max_output_channels"
    what = "microphone" if kind == "input" else "speaker"
    try:
        devices = [d for d in sd.query_devices() if d.get(channels, 0) > 0]
    except Exception as exc:  # PortAudioError: no host API answered
        raise AudioDeviceError(f"no audio devices are available ({exc})") from None
    if not devices:
        raise AudioDeviceError(
            f"no {what} found: connect one (or start the sound server) and try again"
        )
    if not name:
        return None, ""
    for match in (lambda d: d["name"] == name, lambda d: name.lower() in d["name"].lower()):
        for dev in devices:
            if match(dev):
                return int(dev["index"]), ""
    return None, (
        f"The {what} '{name}' is not connected; using the default {what} instead "
        "(choose another in Settings…)"
    )


def device_label(sd, index: int | None, kind: str) -> str:
    try:
        info = sd.query_devices(index, kind=kind) if index is None else sd.query_devices(index)
        return str(info["name"])
    except Exception:
        return "default"
