"""`s2s-desktop devices [--json]`: compute devices, what each stage would use, audio devices."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from ..devices import Platform, compute_devices, detect_platform, resolve_device
from ..errors import DeviceUnavailable, SettingsError
from ..states import STAGES


def audio_devices() -> dict:
    """Audio devices via sounddevice; without PortAudio an "audio_error" line instead."""
    try:
        import sounddevice as sd
    except OSError as exc:  # the PortAudio library itself is missing
        return {"audio_error": f"PortAudio is not installed ({exc}); install libportaudio2"}
    except ImportError as exc:
        return {"audio_error": f"sounddevice is not installed ({exc}): pip install sounddevice"}
    try:
        devices = sd.query_devices()
        apis = sd.query_hostapis()
        default_in, default_out = sd.default.device
    except Exception as exc:  # noqa: BLE001 - PortAudioError and friends
        return {"audio_error": f"audio devices cannot be listed: {exc}"}
    listed = []
    for i, d in enumerate(devices):
        listed.append(
            {
                "index": i,
                "name": d["name"],
                "hostapi": apis[d["hostapi"]]["name"] if d["hostapi"] < len(apis) else "",
                "inputs": d["max_input_channels"],
                "outputs": d["max_output_channels"],
                "default_samplerate": d["default_samplerate"],
                "default_input": i == default_in,
                "default_output": i == default_out,
            }
        )
    out: dict[str, Any] = {"audio": listed}
    if not listed:
        out["audio_error"] = "no audio devices found (is a sound server running?)"
    return out


def describe(settings, platform: Platform | None = None) -> dict:
    """Compute devices, what each stage would use, and audio devices: `s2s-desktop devices`."""
    plat = platform or detect_platform()
    stages = {}
    for stage in STAGES:
        section = getattr(settings, stage)
        entry: dict[str, Any] = {
            "backend": section.backend,
            "requested": section.device or ("cpu" if stage == "vad" else settings.device),
        }
        try:
            entry["device"] = resolve_device(stage, settings, plat)
        except (DeviceUnavailable, SettingsError) as exc:
            entry["device"], entry["error"] = None, str(exc)
        stages[stage] = entry
    return {
        "platform": asdict(plat) | {"apple_silicon": plat.apple_silicon},
        "compute": compute_devices(plat),
        "stages": stages,
        **audio_devices(),
    }


def _gib(n: int | None) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "?"


def format_description(info: dict) -> str:
    p = info["platform"]
    lines = [f"Platform: {p['system']} {p['machine']}", "", "Compute devices:"]
    for d in info["compute"]:
        lines.append(f"  {d['kind']:<8} {d['name']}  ({_gib(d['memory_bytes'])})")
    lines += ["", "Stages:"]
    for stage, e in info["stages"].items():
        got = e["device"] or f"unavailable: {e['error']}"
        lines.append(f"  {stage:<4} {e['backend']:<15} {e['requested']:<7} → {got}")
    lines += ["", "Audio devices:"]
    if info.get("audio_error"):
        lines.append(f"  {info['audio_error']}")
    for d in info.get("audio", []):
        marks = ("*in " if d["default_input"] else "") + ("*out" if d["default_output"] else "")
        lines.append(
            f"  {d['index']:>3} {d['name']} [{d['hostapi']}] "
            f"in {d['inputs']} / out {d['outputs']} {marks}".rstrip()
        )
    return "\n".join(lines)


def devices_command(args_json: bool, settings, platform: Platform | None = None) -> int:
    """`s2s-desktop devices [--json]`: print the listing; 0 unless a stage cannot run here."""
    info = describe(settings, platform)
    print(json.dumps(info, indent=2) if args_json else format_description(info))
    return 1 if any(e.get("error") for e in info["stages"].values()) else 0
