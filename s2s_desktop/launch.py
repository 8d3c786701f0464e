"""What one launch runs: the settings file, or — at first run, with no settings file — the
`auto` profile's models that are on disk, with the installed starter set standing in for
the rest; then this launch's --profile and --set on top (never saved).

The Settings dialog saves onto `Launch.saved` only the keys the user changed, so a
--profile/--set launch never writes its profile into settings.json.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from . import config, profiles
from .errors import S2SError
from .states import MODEL_STAGES

log = logging.getLogger(__name__)

STAGE_WORDS = {"stt": "speech-to-text", "llm": "language model", "tts": "voice"}


class Source(StrEnum):
    """Where a first run takes a stage's model from."""

    AUTO = "auto"  # the recommended model, downloaded
    STARTER = "starter"  # the offline starter set, standing in until the download
    MISSING = "missing"  # neither is on disk


@dataclass
class StageChoice:
    stage: str
    source: Source
    auto_id: str = ""  # catalog id of the recommended model
    auto_name: str = ""
    auto_size: int | None = None
    starter_package: str = ""  # pip name of the starter model for this stage


@dataclass
class FirstRun:
    """Which models a launch without a settings file uses, and what is missing."""

    choices: dict[str, StageChoice]

    def stages(self, source: Source) -> list[str]:
        return [s for s, c in self.choices.items() if c.source is source]

    @property
    def to_download(self) -> list[StageChoice]:
        """Recommended models not on disk (offered in the model manager)."""
        return [c for c in self.choices.values() if c.source is not Source.AUTO and c.auto_id]

    def download_bytes(self) -> int:
        return sum(c.auto_size or 0 for c in self.to_download)

    def missing_lines(self) -> list[str]:
        """One line per stage with no model at all, each with its fix."""
        from .models.download import human_size

        out = []
        for c in self.choices.values():
            if c.source is not Source.MISSING:
                continue
            size = f", {human_size(c.auto_size)}" if c.auto_size else ""
            fixes = [f"download {c.auto_name or c.auto_id} in Models…{size}"]
            if c.starter_package:
                fixes.append(f"pip install {c.starter_package} (offline starter)")
            out.append(f"No {STAGE_WORDS[c.stage]} model: " + " or ".join(fixes))
        return out

    def summary(self) -> str:
        """What this first run uses, in one or two sentences."""
        from .models.download import human_size

        starter = self.stages(Source.STARTER)
        if not starter and not self.stages(Source.MISSING):
            return "Using the recommended models (auto profile)."
        parts = []
        if starter:
            words = ", ".join(STAGE_WORDS[s] for s in starter)
            size = human_size(self.download_bytes())
            parts.append(
                f"Using the offline starter set for {words} until the recommended models "
                f"are downloaded (Models…, {size})."
            )
        parts += self.missing_lines()
        return " ".join(parts)


@dataclass
class Launch:
    settings: config.Settings  # what this launch runs
    saved: config.Settings | None  # what settings.json holds; None: no file yet (see base)
    warnings: list[str] = field(default_factory=list)
    profile: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    first_run: FirstRun | None = None  # set when this launch chose its models from the disk

    @property
    def layered(self) -> bool:
        """--profile or --set changed this launch's settings."""
        return bool(self.profile or self.overrides)

    def base(self) -> config.Settings:
        """What the Settings dialog saves the user's changes onto: the settings file, or
        with none yet, the models on disk (never this launch's --profile / --set)."""
        if self.saved is None:
            self.saved = first_run_settings(first_run_choice())
        return self.saved

    def options_text(self) -> str:
        parts = [f"--profile {self.profile}"] if self.profile else []
        parts += [f"--set {k}={v}" for k, v in self.overrides.items()]
        return " ".join(parts)


def first_run_choice(manager=None) -> FirstRun:
    """Per model stage: the auto profile's model if it is on disk, else the starter one."""
    from .models.manager import ModelManager

    try:
        auto, starters = profiles.profile_models("auto"), profiles.profile_models("starter")
        manager = manager or ModelManager()
        infos = manager.list()
    except S2SError as exc:  # no catalog: keep the auto profile; loading says what is missing
        log.warning("first run: model list unavailable (%s)", exc)
        return FirstRun({s: StageChoice(s, Source.AUTO) for s in MODEL_STAGES})
    choices = {}
    for stage in MODEL_STAGES:
        recommended = next((m for m in infos if m.entry and m.id == auto[stage].id), None)
        starter = next((m for m in infos if m.entry and m.id == starters[stage].id), None)
        if recommended is not None and recommended.installed:
            source = Source.AUTO
        elif starter is not None and starter.installed:
            source = Source.STARTER
        elif recommended is None:
            source = Source.AUTO  # not catalogued: loading tells whether it is there
        else:
            source = Source.MISSING
        choices[stage] = StageChoice(
            stage,
            source,
            auto_id=recommended.id if recommended else "",
            auto_name=recommended.name if recommended else "",
            auto_size=recommended.size_bytes if recommended else None,
            starter_package=" ".join(starter.entry.pip_packages) if starter else "",
        )
    return FirstRun(choices)


def first_run_settings(choice: FirstRun) -> config.Settings:
    """The auto profile, with the starter set's keys for the stages it stands in for."""
    settings = config.Settings()
    config.apply_overrides(settings, profiles.profile_overrides("auto"))
    starter = profiles.profile_overrides("starter")
    defaults = config.Settings()
    for stage in choice.stages(Source.STARTER):
        # the stage starts over from the defaults: no auto key (a Piper voice file) stays
        setattr(settings, stage, getattr(defaults, stage))
        config.apply_overrides(
            settings, {k: v for k, v in starter.items() if k.startswith(stage + ".")}
        )
    return settings


def resolve_launch(profile: str | None, overrides: dict[str, Any] | None = None) -> Launch:
    """The settings this launch runs: the file (or at first run without --profile, the models
    on disk), then the profile, then the --set overrides."""
    overrides = dict(overrides or {})
    first_run = None
    if config.settings_path().exists():
        saved, warnings = config.load()
        settings = saved.copy()
    elif profile:
        saved, warnings, settings = None, [], config.Settings()  # the profile picks the models
    else:
        first_run = first_run_choice()
        saved, warnings = first_run_settings(first_run), []
        settings = saved.copy()
    if profile:
        config.apply_overrides(settings, profiles.profile_overrides(profile))
    if overrides:
        config.apply_overrides(settings, overrides)
    return Launch(settings, saved, warnings, profile, overrides, first_run)


def _flat(data: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changed_keys(before: config.Settings, after: config.Settings) -> dict[str, Any]:
    """Dotted keys whose value differs, with the new value."""
    a, b = _flat(dataclasses.asdict(before)), _flat(dataclasses.asdict(after))
    return {k: v for k, v in b.items() if a.get(k) != v}


def with_changes(base: config.Settings, changes: dict[str, Any]) -> config.Settings:
    out = base.copy()
    for key, value in changes.items():
        config.set_key(out, key, value)
    config.validate(out)
    return out
