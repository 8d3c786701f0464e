"""Text deltas → speakable pieces, as early as they can sound natural.

The first piece goes out at the first sentence end, or at a clause boundary once it has a
few words, or before the verb that follows a subject of a few words once the predicate runs
on ("The boiling point of water | is 100 degrees Celsius."), or before a joining word ("because", "when", "that", "by", …) once it has a few
more, or before a preposition ("in", "from", …) once a long tail follows it (while the
sentence is still being written, or when it is over FIRST_PIECE_MAX_WORDS long), so TTS can
start while the LLM writes: the first piece's synthesis is what the user waits for, and a
long clause took 450 ms of it here. Later pieces break at
sentence ends (or at clauses when a sentence runs long). Abbreviations ("Dr.", "e.g."),
initials and decimals do not split. Code blocks are dropped; markdown, emoji, HTML and URLs
are made speakable.
"""

from __future__ import annotations

import re

ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "eg", "ie",
    "no", "fig", "approx", "dept", "est", "inc", "ltd", "co", "corp", "mt", "ft", "jan", "feb",
    "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "a.m",
    "p.m", "cf", "al", "vol", "ca",
}
FIRST_CLAUSE_MIN_WORDS = 4  # "Yes, " alone sounds clipped; wait for a real clause
FIRST_JOIN_MIN_WORDS = 5  # a first piece may end before a joining word after this many
LONG_SENTENCE_WORDS = 24  # past this, later pieces may break at a clause too
# a whole first sentence longer than this may still be cut before a preposition
FIRST_PIECE_MAX_WORDS = 10
# words that open a new phrase, so a pause before them sounds natural
JOINING_WORDS = {
    "and", "but", "so", "because", "which", "who", "where", "when", "while", "whereas",
    "although", "though", "since", "unless", "until", "by", "if", "then", "that",
}
# verbs that open a sentence's predicate ("The boiling point of water | is 100 degrees"): a
# first piece may end before one once its subject has FIRST_SUBJECT_MIN_WORDS words and
# VERB_TAIL_WORDS words (the verb included) follow, so a short sentence ("The capital of Japan
# is Tokyo.") stays whole while a longer one goes out at its subject
VERB_WORDS = {
    "is", "are", "was", "were", "has", "have", "had", "can", "will", "would", "could",
    "should", "does", "do", "did", "may", "might", "must",
}
FIRST_SUBJECT_MIN_WORDS = 3
VERB_TAIL_WORDS = 4
# prepositions that open a phrase of their own ("a term used | in the context of physics");
# not "of", "to", "than", "as", "like", which bind to the word before ("capital of")
PHRASE_WORDS = {
    "in", "on", "at", "from", "with", "for", "about", "into", "during", "after", "before",
    "through", "between", "over", "under", "around", "across", "within", "without",
}
# a first piece ends before one of PHRASE_WORDS only once this many words follow it in the
# same sentence: a short tail ("turns | into steam.") is heard as a broken sentence, for little
PHRASE_TAIL_WORDS = 4

_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]»”’]*(?=\s)")
_CLAUSE_END = re.compile(r"[,;:—–](?=\s)")

_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f1e6-\U0001f1ff"
    "\U00002b00-\U00002bff\ufe0f\u200d\u20e3]+"
)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"\bhttps?://\S+")
_HTML = re.compile(r"</?[A-Za-z][^>]*>")
_LINE_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+•]\s+|\d+[.)]\s+)", re.M)
_EMPHASIS = re.compile(r"(\*\*|__|\*|~~|`)")
_UNDERSCORE_EMPH = re.compile(r"(?<!\w)_(\S[^_]*?)_(?!\w)")
_JOINING_WORD = re.compile(r"\s(\w+)(?=\s+\S)")  # a whole word with more text after it
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,!?;:…])")
_SPEAKABLE = re.compile(r"\w", re.UNICODE)


def _speak_url(m: re.Match) -> str:
    """A URL is spoken as its host ("example.com"); trailing punctuation stays."""
    url = m.group(0)
    tail = len(url) - len(url.rstrip(".,!?;:)"))
    host = url[: len(url) - tail].split("://", 1)[1].split("/", 1)[0]
    return host.removeprefix("www.") + url[len(url) - tail :]


def clean_for_speech(text: str) -> str:
    """Markdown/emoji/URLs → plain speakable text; "" when nothing is left to say."""
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(_speak_url, text)
    text = _HTML.sub(" ", text)
    text = _LINE_MARKUP.sub("", text)
    text = _EMPHASIS.sub("", text)
    text = _UNDERSCORE_EMPH.sub(r"\1", text)
    text = _EMOJI.sub(" ", text)
    text = text.replace("|", ", ").replace("#", " ")
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", text)).strip()
    return text if _SPEAKABLE.search(text) else ""


def _is_abbreviation(text: str, dot: int) -> bool:
    """True when the '.' at `dot` ends an abbreviation, an initial or a list number."""
    if text[dot] != ".":
        return False
    start = dot
    while start > 0 and not text[start - 1].isspace() and text[start - 1] not in "([\"'":
        start -= 1
    word = text[start:dot].lower()
    if word in ABBREVIATIONS:
        return True
    if len(word) == 1 and word.isalpha():  # an initial: "J. R. R. Tolkien"
        return True
    if word.isdigit():  # "1. " at a line start is a list marker, not a sentence end
        line_start = text.rfind("\n", 0, start) + 1
        return text[line_start:start].strip() == ""
    return False


class SentenceChunker:
    def __init__(self, first_clause_min_words: int = FIRST_CLAUSE_MIN_WORDS):
        self.first_clause_min_words = first_clause_min_words
        self._text = ""  # prose waiting to be cut (code removed)
        self._raw = ""  # tail that may still be part of a ``` fence
        self._in_code = False
        self.pieces_out = 0

    def feed(self, delta: str) -> list[str]:
        self._raw += delta
        self._strip_code_fences()
        return self._cut(final=False)

    def flush(self) -> list[str]:
        if not self._in_code:
            self._text += self._raw
        self._raw, self._in_code = "", False
        return self._cut(final=True)

    def retract(self, chars: int) -> int:
        """Take back the last `chars` characters fed that are not in a piece yet (the reply
        was cut short); returns how many could still be taken back."""
        taken = min(chars, len(self._raw))
        self._raw = self._raw[: len(self._raw) - taken]
        more = min(chars - taken, len(self._text))
        self._text = self._text[: len(self._text) - more]
        return taken + more

    def _strip_code_fences(self) -> None:
        while True:
            fence = self._raw.find("```")
            if self._in_code:
                if fence < 0:
                    # drop code, keep a possible partial closing fence
                    keep = len(self._raw) - len(self._raw.rstrip("`"))
                    self._raw = self._raw[len(self._raw) - min(keep, 2):] if keep else ""
                    return
                self._raw, self._in_code = self._raw[fence + 3:], False
                # the rest of the fence line (```python) is gone with the block
            else:
                if fence < 0:
                    break
                self._text += self._raw[:fence] + "\n"
                self._raw, self._in_code = self._raw[fence + 3:], True
        keep = min(len(self._raw) - len(self._raw.rstrip("`")), 2)
        self._text += self._raw[: len(self._raw) - keep]
        self._raw = self._raw[len(self._raw) - keep:]

    def _boundary(self) -> int:
        """End index of the next piece in self._text, or -1 if none is ready."""
        text = self._text
        best = -1
        for m in _SENTENCE_END.finditer(text):
            if not _is_abbreviation(text, m.start()) and text[: m.end()].strip():
                best = m.end()
                break
        newline = text.find("\n")
        while newline >= 0 and not text[:newline].strip():
            newline = text.find("\n", newline + 1)
        if newline >= 0 and (best < 0 or newline < best):
            best = newline
        min_words = self.first_clause_min_words if self.pieces_out == 0 else LONG_SENTENCE_WORDS
        clause = -1
        for m in _CLAUSE_END.finditer(text):
            if best >= 0 and m.end() >= best:
                break
            if len(text[: m.start()].split()) >= min_words:
                clause = m.end()
                break
        if self.pieces_out == 0:
            # the earliest cut, so a reply given whole is cut where its stream would be
            word = self._first_word_cut(text, best)
            if word >= 0 and (clause < 0 or word < clause):
                return word
        return clause if clause >= 0 else best

    @staticmethod
    def _first_word_cut(text: str, best: int) -> int:
        """Where the first piece may end before a word (a verb after its subject, a joining
        word, a preposition with a long tail) in the sentence ending at `best`; -1: nowhere."""
        # the sentence is still being written, or too long to wait for whole
        open_or_long = best < 0 or len(text[:best].split()) > FIRST_PIECE_MAX_WORDS
        for m in _JOINING_WORD.finditer(text):
            if best >= 0 and m.start() >= best:
                break
            before = len(text[: m.start()].split())
            word = m.group(1).lower()
            tail = text[m.start():best] if best >= 0 else text[m.start():]
            if (word in VERB_WORDS and before >= FIRST_SUBJECT_MIN_WORDS
                    and len(tail.split()) >= VERB_TAIL_WORDS):
                return m.start()
            if before < FIRST_JOIN_MIN_WORDS:
                continue
            if word in JOINING_WORDS or (
                    word in PHRASE_WORDS and open_or_long
                    and len(tail.split()) > PHRASE_TAIL_WORDS):
                return m.start()
        return -1

    def _cut(self, final: bool) -> list[str]:
        out = []
        while True:
            end = self._boundary()
            if end < 0:
                break
            piece, self._text = self._text[:end], self._text[end:]
            self._emit(piece, out)
        if final:
            piece, self._text = self._text, ""
            self._emit(piece, out)
        return out

    def _emit(self, piece: str, out: list[str]) -> None:
        spoken = clean_for_speech(piece)
        if spoken:
            out.append(spoken)
            self.pieces_out += 1
