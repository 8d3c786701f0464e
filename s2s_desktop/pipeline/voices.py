"""Which voice speaks a reply: the configured one when it speaks the reply's language, else an
installed catalog voice that does (loaded beside it, kept for later turns), else none — the
reply is shown with a notice offering a voice to download, never read by a voice of another
language. The decision itself is `languages.choose_voice`. A voice downloaded meanwhile is
found at the next reply (`catalog_changed`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path

from .. import config, languages
from ..engines import registry
from ..errors import S2SError
from ..languages import VoiceAction, VoiceChoice, VoiceOption

log = logging.getLogger(__name__)


def catalog_voices() -> list[VoiceOption]:
    """The catalog's voices that run here, installed or not."""
    from ..models.manager import ModelManager

    try:
        infos = ModelManager().list()
    except S2SError as exc:
        log.warning("voices: the model list is unavailable (%s)", exc)
        return []
    return [
        VoiceOption(m.id, m.name, m.languages, dict(m.entry.settings), m.installed, m.size_bytes)
        for m in infos
        if m.entry is not None and m.stage == "tts" and m.runs_here and m.languages
    ]


def voice_languages(engine, section, voices: list[VoiceOption]) -> tuple[str, ...]:
    """The languages the loaded voice speaks: `tts.language`, else its catalog entry's, else
    a Piper voice's own config; () when nobody says (taken as English)."""
    if section.language:
        return (languages.code(section.language),)
    keys = {f"tts.{k}": v for k, v in dataclasses.asdict(section).items()}
    for v in voices:
        if v.settings and all(keys.get(k, v_) == v_ for k, v_ in v.settings.items()):
            return v.languages
    path = getattr(engine, "model_path", None)
    if path is not None:
        try:
            data = json.loads(Path(f"{path}.json").read_text(encoding="utf-8"))
            lang = (data.get("language") or {}).get("code") or (data.get("espeak") or {}).get(
                "voice", "")
            if lang:
                return (languages.code(lang),)
        except (OSError, ValueError, AttributeError):
            pass
    return ()


class VoiceRouter:
    """The TTS stage's voices per reply language. `voices` lists the catalog's voices (tests
    pass their own); `notice` tells the user about a language without a voice (the choice,
    with the voice to download), once."""

    def __init__(self, notice: Callable[[VoiceChoice], None],
                 voices: Callable[[], list[VoiceOption]] | None = None):
        self._notice = notice
        self._list_voices = voices
        self._voices: list[VoiceOption] | None = None
        self._engines: dict[str, object] = {}  # voice id → loaded engine
        self._told: set[str] = set()
        self._stale = False  # a model was downloaded: list the voices again

    def catalog_changed(self) -> None:
        """A model was downloaded or deleted (from any thread): the next reply looks again at
        which voices are installed, and tells again about a language still without one."""
        self._stale = True

    def reset(self) -> None:
        """Forget the extra voices (the settings changed or the models were freed)."""
        for engine in self._engines.values():
            engine.unload()
        self._engines, self._voices, self._told = {}, None, set()

    def voices(self) -> list[VoiceOption]:
        if self._stale:
            self._stale, self._voices, self._told = False, None, set()
        if self._voices is None:
            self._voices = (self._list_voices or catalog_voices)()
        return self._voices

    def engine_for(self, language: str | None, engine, section, device: str):
        """The engine to speak a reply in `language` with, or None: nobody here speaks it."""
        lang = languages.code(language)
        if not lang or lang == languages.DEFAULT_LANGUAGE and not section.language:
            return engine  # English (or unknown) with an English or unlabelled voice
        current = voice_languages(engine, section, self.voices())
        choice = languages.choose_voice(lang, current, self.voices())
        if choice.action is VoiceAction.SPEAK:
            return engine
        if choice.action is VoiceAction.SWITCH:
            try:
                return self._load(choice.voice, section, device)
            except S2SError as exc:
                log.warning("the %s voice %s did not load: %s", lang, choice.voice.id, exc)
                choice = dataclasses.replace(choice, action=VoiceAction.MISSING)
        if lang not in self._told:
            self._told.add(lang)
            self._notice(choice)
        return None

    def _load(self, voice: VoiceOption, section, device: str):
        if voice.id not in self._engines:
            settings = config.Settings()
            settings.tts = dataclasses.replace(section, voice="", language="")
            config.apply_overrides(settings, voice.settings)
            engine = registry.create("tts", settings.tts, device)
            engine.load()
            engine.warmup()
            log.info("the %s voice %s loaded for %s replies", voice.name, voice.id,
                     "/".join(voice.languages))
            self._engines[voice.id] = engine
        return self._engines[voice.id]
