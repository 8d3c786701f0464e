"""What the Settings dialog and `s2s-desktop set` check before anything is saved: the values
(config.validate), the shortcut, the devices this machine can run, that a local model path
exists, that the language suits the speech-to-text model. One list of checks, so both refuse
the same settings with the same words."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .. import config, devices
from ..errors import ModelNotFound, S2SError, SettingsError
from ..hotkey.combo import parse_combo
from ..models.resolve import looks_like_repo_id, resolve_model
from ..states import MODEL_STAGES
from .hotkey_edit import taken_by_desktop
from .language_check import language_problems

log = logging.getLogger(__name__)


def is_local_ref(ref: str) -> bool:
    """A model reference that names a path or an installed package (not a Hub id)."""
    expanded = os.path.expanduser(ref)
    return ref.startswith(("pkg:", "./", "../", ".\\", "..\\", "~")) or os.path.isabs(expanded)


def model_problems(new: config.Settings, old: config.Settings) -> tuple[list[str], list[str]]:
    """(refusals, notes): local models that do not exist; Hub models not downloaded yet."""
    problems, notes = [], []
    for stage in MODEL_STAGES:
        section, before = getattr(new, stage), getattr(old, stage)
        ref = section.model
        if not ref or (ref, getattr(section, "model_file", "")) == (
            before.model,
            getattr(before, "model_file", ""),
        ):
            continue  # unchanged: it was checked when it was chosen
        file = getattr(section, "model_file", "")
        try:
            if is_local_ref(ref):
                base = Path(os.path.expanduser(ref))
                resolve_model(ref, stage, file if file and not base.is_file() else "")
            elif looks_like_repo_id(ref):
                resolve_model(ref, stage)
        except ModelNotFound as exc:
            (problems if is_local_ref(ref) else notes).append(str(exc))
    return problems, notes


def settings_problems(
    new: config.Settings,
    old: config.Settings,
    platform: devices.Platform,
    known_models=(),
) -> tuple[list[str], list[str]]:
    """(reasons to refuse, notes to show) for going from `old` to `new`."""
    refusals = []
    try:
        config.validate(new)
    except SettingsError as exc:
        refusals.append(str(exc))
    try:
        parse_combo(new.hotkey.combo)
    except SettingsError as exc:
        refusals.append(str(exc))
    refusals += devices.validate_devices(new, platform)
    missing, notes = model_problems(new, old)
    wrong_language, language_notes = language_problems(new, known_models)
    why = taken_by_desktop(new.hotkey.combo)
    if why and new.hotkey.combo != old.hotkey.combo:
        notes.append(f"Talk shortcut {new.hotkey.combo}: {why}")
    return refusals + missing + wrong_language, notes + language_notes


def known_models(settings: config.Settings, manager=None) -> list:
    """The catalog's and the disk's models (their languages, voices); [] when unreadable."""
    try:
        if manager is None:
            from ..models.manager import ModelManager

            manager = ModelManager(settings=settings)
        return manager.list()
    except S2SError as exc:  # an unreadable catalog must not keep settings from changing
        log.warning("model list unavailable: %s", exc)
        return []
