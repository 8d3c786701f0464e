"""The user's language, per turn: which language a question was spoken in, which language the
reply is asked for, and which voice speaks it. Pure decisions, no Qt, no engines: the STT
engines, the LLM stage and the TTS stage each ask here.

A multilingual recognizer detects the language of each question (unless `stt.language` fixes
it). Detection is restricted to the languages the user speaks (`stt.languages`, the first is
the usual one; when empty, to the languages the catalog has voices for: Whisper base heard two
of 48 espeak English questions as Thai, at p 0.55 and 0.86), and a detection less sure than
`stt.language_threshold` keeps the usual language: Whisper base hears espeak's German as
English at p ≈ 0.4, but real English speech at 0.99.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from .engines.base import language_code
from .errors import S2SError

DEFAULT_LANGUAGE = "en"  # the usual language when `stt.languages` is empty
DEFAULT_THRESHOLD = 0.5

# Names for the languages the catalog has voices for, and a few more (notices, settings).
LANGUAGE_NAMES = {
    "en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
    "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "ru": "Russian", "uk": "Ukrainian",
    "tr": "Turkish", "sv": "Swedish", "cs": "Czech", "ja": "Japanese", "zh": "Chinese",
    "ko": "Korean", "hi": "Hindi", "ar": "Arabic",
}


def code(language: str | None) -> str:
    """A language as a bare lower-case code: "en-US" / "en_us" / Whisper's "<|en|>" → "en"."""
    return language_code((language or "").strip().strip("<|>"))


def name(language: str | None) -> str:
    lang = code(language)
    return LANGUAGE_NAMES.get(lang, lang or "an unknown language")


def spoken_languages(setting: str | Iterable[str] | None) -> tuple[str, ...]:
    """`stt.languages` ("en, de" or a list) as codes in the user's order, without repeats."""
    items = setting.replace(";", ",").split(",") if isinstance(setting, str) else (setting or ())
    out: list[str] = []
    for item in items:
        lang = code(item)
        if lang and lang not in out:
            out.append(lang)
    return tuple(out)


@functools.cache
def voiced_languages() -> tuple[str, ...]:
    """The languages the catalog has voices for: what detection picks among when the user
    has not said which languages they speak."""
    from .models.catalog import load_catalog

    try:
        return load_catalog().voice_languages()
    except S2SError:
        return ()


def usual_language(spoken: tuple[str, ...]) -> str:
    return spoken[0] if spoken else DEFAULT_LANGUAGE


class LanguageReason(StrEnum):
    """Why a turn's language is what it is."""

    FIXED = "fixed"  # stt.language names it
    DETECTED = "detected"  # the recognizer was sure enough
    UNSURE = "unsure"  # below the threshold: the usual language is kept
    ENGLISH_ONLY = "english-only"  # the model knows English only


@dataclass(frozen=True)
class LanguageChoice:
    language: str
    probability: float | None  # the recognizer's for that language; None: not detected
    reason: LanguageReason


def choose_language(ranked: Iterable[tuple[str, float]], spoken: tuple[str, ...] = (),
                    threshold: float = DEFAULT_THRESHOLD,
                    otherwise: Iterable[str] = ()) -> LanguageChoice:
    """The turn's language from a recognizer's (language, probability) pairs: the likeliest
    of the languages the user speaks (when none are set: of `otherwise`, the languages the
    app has voices for; any when that is empty too), kept only when its probability reaches
    `threshold`; otherwise the usual language."""
    usual = usual_language(spoken)
    allowed = set(spoken) or {code(x) for x in otherwise}
    candidates = [(code(lang), p) for lang, p in ranked if not allowed or code(lang) in allowed]
    if not candidates:
        return LanguageChoice(usual, None, LanguageReason.UNSURE)
    lang, p = max(candidates, key=lambda c: c[1])
    if p < threshold:
        return LanguageChoice(usual, p, LanguageReason.UNSURE)
    return LanguageChoice(lang, p, LanguageReason.DETECTED)


def reply_instruction(language: str | None) -> str:
    """The line added to the LLM's system prompt so it answers in the question's language;
    "" for English (the prompts are English: nothing to ask, the prompt cache stays)."""
    lang = code(language)
    if not lang or lang == "en":
        return ""
    return f"The user speaks {name(lang)}: always answer in {name(lang)}."


def with_reply_language(system_prompt: str, language: str | None) -> str:
    line = reply_instruction(language)
    return f"{system_prompt.rstrip()} {line}" if line else system_prompt


LOCAL_COMMANDS_NOTE = "(Local commands understand and answer in English only.)"


def local_answer_note(language: str | None) -> str:
    """What a local command's answer says in a turn spoken in another language."""
    lang = code(language)
    return "" if not lang or lang == "en" else LOCAL_COMMANDS_NOTE


class VoiceAction(StrEnum):
    SPEAK = "speak"  # the configured voice speaks this language
    SWITCH = "switch"  # another installed voice does
    MISSING = "missing"  # no installed voice does: the reply is shown, not spoken


@dataclass(frozen=True)
class VoiceOption:
    """An installed or downloadable voice, as the catalog knows it."""

    id: str
    name: str
    languages: tuple[str, ...]
    settings: dict  # tts.* keys that select it
    installed: bool
    size_bytes: int | None = None

    def speaks(self, language: str) -> bool:
        langs = {code(x) for x in self.languages}
        return code(language) in langs or "mul" in langs


@dataclass(frozen=True)
class VoiceChoice:
    action: VoiceAction
    voice: VoiceOption | None = None  # SWITCH: the voice to use; MISSING: one to download
    language: str = ""

    def notice(self) -> str:
        """What the user reads when no installed voice speaks the reply's language."""
        if self.action is not VoiceAction.MISSING:
            return ""
        lang = name(self.language)
        offer = (f"download {self.voice.name} to hear it (Models…, or `s2s-desktop models "
                 f"download {self.voice.id}`)" if self.voice
                 else "no voice for it is in the catalog yet")
        return (f"No {lang} voice is installed, so this {lang} reply is shown, not spoken "
                f"(an English voice would garble it): {offer}.")

    def offer(self) -> str:
        """The download offer's label ("" when there is nothing to download): short, for a
        button; the model manager it opens names the voice."""
        missing = self.action is VoiceAction.MISSING and self.voice is not None
        return f"Download {name(self.language)} Voice…" if missing else ""


def choose_voice(language: str | None, current_languages: tuple[str, ...],
                 voices: Iterable[VoiceOption]) -> VoiceChoice:
    """Who speaks a reply in `language`: the configured voice when it speaks it, else an
    installed voice that does, else nobody (with a voice to download, when the catalog has
    one)."""
    lang = code(language) or DEFAULT_LANGUAGE
    current = {code(x) for x in current_languages} or {DEFAULT_LANGUAGE}
    if lang in current or "mul" in current:
        return VoiceChoice(VoiceAction.SPEAK, None, lang)
    speaking = [v for v in voices if v.speaks(lang)]
    installed = next((v for v in speaking if v.installed), None)
    if installed is not None:
        return VoiceChoice(VoiceAction.SWITCH, installed, lang)
    return VoiceChoice(VoiceAction.MISSING, speaking[0] if speaking else None, lang)


def coverage_text(voices: Iterable[VoiceOption]) -> str:
    """Which reply languages the installed voices speak, and which a download would add (the
    model manager's line)."""
    voices = list(voices)
    have = sorted({code(x) for v in voices if v.installed for x in v.languages} - {"mul"},
                  key=name)
    can = sorted({code(x) for v in voices if not v.installed for x in v.languages}
                 - set(have) - {"mul"}, key=name)
    text = "Replies are spoken in " + (", ".join(name(x) for x in have) or "no language yet")
    if can:
        text += "; download a voice for " + ", ".join(name(x) for x in can)
    return text + ". Questions in other languages get a written reply."
