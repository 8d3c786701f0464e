"""Can the LLM the settings choose call tools? Told before it is loaded (`s2s-desktop tools`):
the catalog says for its models; a local GGUF or model folder is asked for its chat template
(a template that lists `tools` calls them); a server behind the OpenAI backend decides itself.
Where it cannot, the advice names a catalog model that can."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..engines.llm.gguf_meta import gguf_string
from ..engines.llm.tool_calls import template_takes_tools
from ..errors import S2SError
from ..models.catalog import Catalog, CatalogEntry, load_catalog
from ..models.resolve import resolve_model

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelToolSupport:
    model: str  # its name as the user knows it
    can_call_tools: bool | None  # None: cannot tell before it is loaded
    advice: str  # what to do ("" where it can)


def _matches(entry: CatalogEntry, settings: Settings) -> bool:
    llm = settings.llm
    keys = {"llm.backend": llm.backend, "llm.model": llm.model, "llm.model_file": llm.model_file}
    return bool(entry.settings) and all(
        keys.get(k, v) == v for k, v in entry.settings.items())


def tool_model(catalog: Catalog) -> CatalogEntry | None:
    """The catalog model to suggest for tools: one recommended for a profile that runs here."""
    able = [e for e in catalog if e.stage == "llm" and e.tools and e.runs_here()]
    able.sort(key=lambda e: not e.profiles)
    return able[0] if able else None


def _template(settings: Settings) -> str | None:
    """The local model's chat template, read from its files (no download, no load)."""
    path = resolve_model(settings.llm.model, "llm", settings.llm.model_file)
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            path = ggufs[0]
    if path.is_file() and path.suffix == ".gguf":
        return gguf_string(path, "tokenizer.chat_template")
    folder = path if path.is_dir() else path.parent
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    config = folder / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, list):  # named templates: the "tool_use" one counts
            return " ".join(t.get("template", "") for t in template if isinstance(t, dict))
        return template if isinstance(template, str) else None
    return None


def model_tool_support(settings: Settings, catalog: Catalog | None = None) -> ModelToolSupport:
    catalog = catalog if catalog is not None else load_catalog()
    llm = settings.llm
    if llm.backend == "openai":
        name = llm.model or "the server's model"
        return ModelToolSupport(name, True, "")
    entry = next((e for e in catalog if e.stage == "llm" and _matches(e, settings)), None)
    if entry is not None:
        name, able = entry.name, entry.tools
    else:
        name = Path(llm.model_file or llm.model.rstrip("/")).name or "(none)"
        try:
            template = _template(settings)
            able = template_takes_tools(template) if template is not None else None
        except (S2SError, OSError, ValueError) as exc:
            log.info("cannot read the chat template of %s: %s", name, exc)
            able = None
    return ModelToolSupport(name, able, "" if able else _advice(name, able, catalog))


def _advice(name: str, able: bool | None, catalog: Catalog) -> str:
    better = tool_model(catalog)
    fix = (f"choose {better.name} in Settings → Models (or `s2s-desktop models download "
           f"{better.id}`)" if better else "choose a model whose chat template takes tools "
           "(Qwen2.5, Llama 3.1) in Settings → Models")
    if able is None:
        return (f"Whether the current model ({name}) can call tools shows once it is loaded; "
                f"to be sure, {fix}.")
    return f"The current model ({name}) cannot call tools: {fix}."
