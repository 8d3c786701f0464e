"""Read an Inno Setup script as the compiler does: its preprocessor (#define, #ifdef/#ifndef/
#else/#endif, {#Name}) first, then the [Setup] directives and the entries of each section."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ENTRY_PARAM = re.compile(r'\s*(\w+):\s*("(?:[^"]|"")*"|[^;]*)\s*(?:;|$)')


def preprocess(text: str, defines: dict[str, str] | None = None) -> str:
    """The script after ISPP's conditionals and `{#Name}` expansion (a bare `#if EXPR` keeps
    its first branch: the scripts use it only for compiler-version checks)."""
    names = dict(defines or {})
    keep: list[bool] = []
    out = []
    for line in text.splitlines():
        word, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if word in ("#ifdef", "#ifndef"):
            keep.append((rest in names) == (word == "#ifdef"))
        elif word == "#if":
            keep.append(True)
        elif word == "#else":
            keep[-1] = not keep[-1]
        elif word == "#endif":
            keep.pop()
        elif not all(keep):
            continue
        elif word == "#define":
            name, _, value = rest.partition(" ")
            names[name] = value.strip().strip('"')
        else:
            out.append(re.sub(r"\{#(\w+)\}", lambda m: names[m.group(1)], line))
    assert not keep, "an #if without its #endif"
    return "\n".join(out)


@dataclass
class Script:
    setup: dict[str, str] = field(default_factory=dict)
    sections: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    code: str = ""

    def entries(self, section: str, **match: str) -> list[dict[str, str]]:
        return [e for e in self.sections.get(section, [])
                if all(e.get(k) == v for k, v in match.items())]


def parse(text: str, defines: dict[str, str] | None = None) -> Script:
    script, section, code = Script(), "", []
    for line in preprocess(text, defines).splitlines():
        stripped = line.strip()
        if re.fullmatch(r"\[\w+\]", stripped):
            section = stripped[1:-1]
            continue
        if section == "Code":
            code.append(line)
        elif not stripped or stripped.startswith(";"):
            continue
        elif section == "Setup":
            key, _, value = stripped.partition("=")
            script.setup[key.strip()] = value.strip()
        else:
            params = {m.group(1): m.group(2).strip().removeprefix('"').removesuffix('"')
                      for m in _ENTRY_PARAM.finditer(stripped)}
            script.sections.setdefault(section, []).append(params)
    script.code = "\n".join(code)
    return script
