"""The local command matcher: a transcript → an Intent (the time, the date, timers, repeat,
stop) or None, so these are answered right without the LLM.

The phrases live in one data file per language (resources/intents/en.json). A phrase must
match the whole transcript (lower case, punctuation removed), give or take polite fillers
before and after it, so "how do I stop a memory leak" is not "stop".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from ..resources_path import resources_dir


class IntentKind(StrEnum):
    TIME = "time"
    DATE = "date"
    TIMER_SET = "timer_set"
    TIMER_LEFT = "timer_left"
    TIMER_CANCEL = "timer_cancel"
    REPEAT = "repeat"
    STOP = "stop"


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    seconds: int = 0  # the timer's length (TIMER_SET)


@lru_cache(maxsize=4)
def intent_data(language: str = "en") -> dict:
    """The phrases and answers of one language (read once)."""
    path = resources_dir() / "intents" / f"{language}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def normalize(text: str) -> str:
    """Lower case, curly quotes made straight, punctuation other than apostrophes dropped
    (a decimal number such as 2.5 stays whole)."""
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(re.findall(r"\d+(?:\.\d+)?|[\w']+", text))


def _alternatives(words: list[str]) -> str:
    # longest first, so "can you please" wins over "can you"
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


class DurationParser:
    """'5 minutes', 'two and a half hours', '1 minute and 30 seconds' → seconds."""

    def __init__(self, data: dict):
        self.numbers: dict[str, float] = data["numbers"]
        self.unit_of = {w: unit for unit, words in data["units"].items() for w in words}
        self.unit_seconds: dict[str, int] = data["unit_seconds"]
        self.halves = sorted(data["half"], key=len, reverse=True)
        self.phrases: dict[str, int] = data["phrases"]
        self.joiners = set(data["joiners"])

    def seconds(self, text: str) -> int | None:
        text = text.strip()
        if text in self.phrases:
            return self.phrases[text]
        for half in self.halves:
            text = re.sub(rf"\b{re.escape(half)}\b", " +half ", text)
        words = text.split()
        total, count, last_unit, i = 0.0, None, 0, 0
        while i < len(words):
            word = words[i]
            if word in self.unit_of:
                if count is None:
                    return None
                last_unit = self.unit_seconds[self.unit_of[word]]
                total += count * last_unit
                count = None
            elif word == "+half":
                if count is not None:
                    count += 0.5  # two and a half minutes
                elif last_unit:
                    total += 0.5 * last_unit  # a minute and a half
                else:
                    return None
            elif word not in self.joiners:
                value, used = self._number(words, i)
                if value is None or count is not None:
                    return None
                count = value
                i += used - 1
            i += 1
        if count is not None or total <= 0:
            return None
        return int(round(total))

    def _number(self, words: list[str], i: int) -> tuple[float | None, int]:
        """A number at words[i]: digits, or number words ('twenty five'); (value, words used)."""
        word = words[i]
        if re.fullmatch(r"\d+(\.\d+)?", word):
            return float(word), 1
        for n in (3, 2):  # "a couple of"
            phrase = " ".join(words[i:i + n])
            if len(words) >= i + n and phrase in self.numbers:
                return float(self.numbers[phrase]), n
        if word not in self.numbers:
            return None, 1
        value, used = float(self.numbers[word]), 1
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if value >= 20 and nxt in self.numbers and self.numbers[nxt] < 10 and nxt not in ("a", "an"):
            value, used = value + self.numbers[nxt], 2  # twenty five
        elif nxt == "hundred" and value < 10:
            value, used = value * 100, 2
        return value, used


class IntentMatcher:
    def __init__(self, language: str = "en"):
        data = intent_data(language)
        before = _alternatives(data["fillers_before"])
        after = _alternatives(data["fillers_after"])
        self.durations = DurationParser(data["durations"])
        self._patterns: list[tuple[IntentKind, re.Pattern]] = []
        for name, phrases in data["intents"].items():
            kind = IntentKind(name)
            for phrase in phrases:
                body = re.escape(phrase).replace(re.escape("{duration}"), r"(?P<duration>.+?)")
                self._patterns.append((kind, re.compile(
                    rf"^(?:(?:{before})\s+)*{body}(?:\s+(?:{after}))*$")))

    def match(self, transcript: str) -> Intent | None:
        text = normalize(transcript)
        if not text:
            return None
        for kind, pattern in self._patterns:
            m = pattern.match(text)
            if m is None:
                continue
            if kind is IntentKind.TIMER_SET:
                seconds = self.durations.seconds(m.group("duration"))
                if seconds is None:
                    continue  # "set a timer for my meeting": not a length, the LLM answers
                return Intent(kind, seconds=seconds)
            return Intent(kind)
        return None
