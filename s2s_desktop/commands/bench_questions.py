"""Question sets read from a file, for `s2s-desktop bench --questions` and
scripts/real_loop.py: one question a line as "espeak-ng voice | question" (or just the
question, said by en-us); blank lines and lines starting with # are skipped. The repository's
sets are scripts/questions/tuning.txt (to tune on) and reporting.txt (to report from)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import S2SError

DEFAULT_VOICE = "en-us"


@dataclass(frozen=True)
class SpokenQuestion:
    text: str
    voice: str = DEFAULT_VOICE


def read_questions(path: Path) -> list[SpokenQuestion]:
    """The file's questions; S2SError naming the file and line when one cannot be read."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise S2SError(f"cannot read the questions in {path}: {exc}") from None
    out = []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        voice, sep, text = line.partition("|")
        voice, text = (voice.strip(), text.strip()) if sep else (DEFAULT_VOICE, line)
        if not text or not voice or " " in voice:
            raise S2SError(f"{path}:{number}: write one question a line as "
                           f"'voice | question' (e.g. 'en-us | What time is it?'), got {line!r}")
        out.append(SpokenQuestion(text, voice))
    if not out:
        raise S2SError(f"{path} holds no questions: write one a line as 'voice | question'")
    return out
