"""Does the spoken language suit the speech-to-text model and the voice? Checked when Settings
are saved: an English-only Whisper cannot hear German (refused, with the fix); an English voice
reads German words with English sounds (saved, with a warning). Also the Voice list's labels."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from .. import config

LANGUAGE_NAMES = {
    "en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
    "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "sv": "Swedish", "tr": "Turkish",
    "ru": "Russian", "uk": "Ukrainian", "ar": "Arabic", "hi": "Hindi", "zh": "Chinese",
    "ja": "Japanese", "ko": "Korean",
}  # fmt: skip
ENGLISH_ONLY_NAME = re.compile(r"[.\-_]en$|distil-(small|medium)\.en", re.IGNORECASE)
PIPER_VOICE = re.compile(r"(?P<lang>[a-z]{2,3})_(?P<region>[A-Z]{2})-(?P<name>[^-]+)-(?P<q>\w+)")


MULTILINGUAL = "mul"  # the catalog's word for "any language"


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def _catalog_languages(models, stage: str, s: config.Settings) -> tuple[str, ...]:
    """Languages the catalog lists for the model (and voice) the settings choose for `stage`."""
    for m in models:
        wanted = (m.entry.settings if m.entry else None) or {}
        picks = {
            k: v for k, v in wanted.items()
            if k.startswith(stage + ".") and k.endswith((".model", ".voice"))
        }  # fmt: skip
        if picks and m.languages and all(config.get_key(s, k) == v for k, v in picks.items()):
            return () if MULTILINGUAL in m.languages else tuple(m.languages)
    return ()


def stt_languages(s: config.Settings, models=()) -> tuple[str, ...]:
    """Languages the speech-to-text model understands; () when it is not known (multilingual)."""
    known = _catalog_languages(models, "stt", s)
    if known:
        return known
    name = s.stt.model.rstrip("/").split("/")[-1]
    return ("en",) if ENGLISH_ONLY_NAME.search(name) else ()


def voice_language(s: config.Settings, models=()) -> str:
    """The language the voice speaks ("" when it cannot be told)."""
    known = _catalog_languages(models, "tts", s)
    if len(known) == 1:
        return known[0]
    for ref in (s.tts.voice, s.tts.model):
        match = PIPER_VOICE.search(PurePosixPath(ref).name) if ref else None
        if match:
            return match["lang"]
    return ""


def language_problems(s: config.Settings, models=()) -> tuple[list[str], list[str]]:
    """(refusals, warnings) for the chosen language, each with its fix."""
    lang = s.stt.language
    if not lang:
        return [], []
    refusals, warnings = [], []
    hears = stt_languages(s, models)
    if hears and lang not in hears:
        refusals.append(
            f"the speech-to-text model ({s.stt.model}) understands "
            f"{', '.join(language_name(c) for c in hears)} only, not {language_name(lang)}: "
            "choose a multilingual model in Models (e.g. Systran/faster-whisper-small) "
            "or set the language back"
        )
    speaks = voice_language(s, models)
    if speaks and speaks != lang and s.tts.backend != "none":
        warnings.append(
            f"The voice speaks {language_name(speaks)}: replies in {language_name(lang)} will "
            f"sound wrong. Choose a {language_name(lang)} voice (Models → Voice)."
        )
    return refusals, warnings


def voice_label(value: str) -> str:
    """A Voice list label: "Lessac (en_US, medium)" for a Piper file path, else the name."""
    match = PIPER_VOICE.search(PurePosixPath(value).name)
    if match and value.endswith(".onnx"):
        return f"{match['name'].capitalize()} ({match['lang']}_{match['region']}, {match['q']})"
    return value
