"""Named profiles: sets of dotted settings keys applied over the defaults (`--profile NAME`).

Which models a profile runs is not written here: resources/catalog.json tags each model with
the profiles that use it ("starter", "auto", and "auto-apple" for the auto profile on Apple
Silicon), and a profile's model keys are those entries' `settings`. Here are only the other
keys each profile sets, applied first.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from . import host
from .config import Settings, apply_overrides
from .errors import SettingsError
from .models.catalog import CatalogEntry, load_catalog
from .states import Stage

# a profile's keys besides its models, by catalog tag
OPTIONS: dict[str, dict[str, Any]] = {
    # The offline starter set: small real models shipped as PyPI packages (`.[starter]`).
    "starter": {
        "device": "cpu",
        "stt.language": "en",
        "stt.compute_type": "int8",
        "stt.beam_size": 5,  # 40 % fewer word errors than greedy for ~30 ms (docs/performance.md)
        "llm.system_prompt": "You are a helpful assistant. Answer briefly in plain sentences.",
        "llm.max_new_tokens": 120,
        # a 135M model loses the thread and copies earlier replies with a longer history
        "llm.history_turns": 2,
    },
    # The starter set for a user whose locale is not English: Whisper base instead of tiny.en
    # (its `stt.languages` is filled in from the locale by `profile_overrides`)
    "starter-multilingual": {"stt.language": ""},
    # Best defaults for this platform; Hub models the model manager downloads.
    "auto": {"device": "auto"},
    "auto-apple": {"device": "auto", "tts.voice": "af_heart"},  # Kokoro's voice
}
PROFILES = ("starter", "auto")  # what --profile takes


def kokoro_english_installed() -> bool:
    """Kokoro's English G2P (misaki + spaCy + its English model) is importable. The macOS
    installer leaves it out (~85 MB); a pip install has it with the "kokoro" extra."""
    return all(
        importlib.util.find_spec(module) is not None
        for module in ("misaki", "spacy", "en_core_web_sm")
    )


def catalog_tag(name: str) -> str:
    """The catalog's tag for profile `name` on this machine."""
    if name not in PROFILES:
        raise SettingsError(f"unknown profile '{name}': choose one of {', '.join(PROFILES)}")
    return "auto-apple" if name == "auto" and host.apple_silicon() else name


def starter_hears_many_languages() -> bool:
    """The starter set's recognizer is Whisper base (multilingual) for a user whose locale is
    not English, else tiny.en: on 2 CPU cores base took 1.6-1.9 s after release against
    tiny.en's 0.3-0.6 s, for 2.8 vs 4.2 % word errors on read English (docs/performance.md)."""
    return host.user_language() != "en"


def profile_models(name: str) -> dict[Stage, CatalogEntry]:
    """The catalog entry profile `name` runs for each stage on this machine."""
    tag = catalog_tag(name)
    catalog = load_catalog()
    models = {Stage(e.stage): e for e in catalog.for_profile(tag)}
    if tag == "starter" and starter_hears_many_languages():
        models[Stage.STT] = catalog.for_profile("starter-multilingual")[0]
    if tag == "auto-apple" and not kokoro_english_installed():
        # the macOS installer cannot run Kokoro in English: the auto profile's voice instead
        models[Stage.TTS] = next(e for e in catalog.for_profile("auto") if e.stage == Stage.TTS)
    missing = [stage for stage in Stage if stage not in models]
    if missing:
        raise SettingsError(
            f"the model catalog names no {', '.join(missing)} model for profile '{name}': "
            "reinstall s2s-desktop"
        )
    return {stage: models[stage] for stage in Stage}


def profile_overrides(name: str) -> dict[str, Any]:
    """Every key profile `name` sets here: its options, then its catalog models' settings."""
    tag = catalog_tag(name)
    keys = dict(OPTIONS[tag])
    if tag == "starter" and starter_hears_many_languages():
        language = host.user_language()
        keys.update(OPTIONS["starter-multilingual"], **{"stt.languages": f"{language}, en"})
    for entry in profile_models(name).values():
        keys.update(entry.settings)
    return keys


def for_profile(name: str | None, overrides: dict[str, Any] | None = None) -> Settings:
    """The defaults, then a profile, then --set style overrides: no settings file involved
    (what one launch runs, file included, is `launch.resolve_launch`)."""
    s = Settings()
    if name:
        apply_overrides(s, profile_overrides(name))
    if overrides:
        apply_overrides(s, overrides)
    return s
