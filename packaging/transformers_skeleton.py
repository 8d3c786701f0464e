"""A 2 % copy of transformers' model sources, for bundles without torch.

transformers 5 builds its lazy top-level namespace by *reading* every file under
`transformers/models/` (their `__all__` lists and `@requires` decorators), so a bundle with the
package in PyInstaller's archive only fails at import ("No such file … transformers/models").
PyInstaller's hook therefore also copies all 2,500 sources (~50 MB), which the app never runs:
the code is imported from the archive. This writes, instead, each file's top-level lines and its
`__all__` / `@requires` blocks (what that reader looks at), and checks with transformers' own
reader that the namespace it builds is the same; the spec falls back to the full sources if not.
The per-model code that needs torch (modeling_*, …: 27 MB of source) also leaves the archive:
without torch, transformers never imports it.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

KEPT_BLOCKS = ("__all__", "@requires")


def skeleton_of(source: str) -> str:
    """Top-level code lines (no comments, no blank lines), and every line of a top-level
    `__all__ = [...]` or `@requires(...)`."""
    kept, depth = [], 0
    for line in source.split("\n"):
        if depth > 0 or line.startswith(KEPT_BLOCKS):
            kept.append(line)
            depth = max(
                0, depth + sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
            )
        elif line[:1] not in (" ", "\t", "#") and line.strip():
            kept.append(line)
    return "\n".join(kept)


def write_skeleton(models: Path, out: Path) -> int:
    """Skeletons of every .py under `models` into `out` (emptied first); returns the bytes."""
    shutil.rmtree(out, ignore_errors=True)
    total = 0
    for src in sorted(models.rglob("*.py")):
        if "__pycache__" in src.parts:
            continue
        dest = out / src.relative_to(models)
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = skeleton_of(src.read_text(encoding="utf-8"))
        if src.name != "__init__.py" and not any(block in text for block in KEPT_BLOCKS):
            continue  # the reader takes nothing from it (__init__.py keeps the folder listed)
        dest.write_text(text, encoding="utf-8")
        total += len(text.encode("utf-8"))
    return total


def same_namespace(models: Path, skeleton: Path) -> bool:
    """transformers' reader finds the same exported names and backends in both folders."""
    from transformers.utils.import_utils import create_import_structure_from_path

    return create_import_structure_from_path(str(models)) == create_import_structure_from_path(
        str(skeleton)
    )


# Per-model code that needs torch (or image/video libraries) and that bundles without torch never
# import: tokenizers, configurations and feature extractors stay. `auto` stays whole: its
# processing_auto imports image_processing_auto at import time.
TORCH_ONLY_MODEL_CODE = re.compile(
    r"transformers\.models\.(?!auto\.)[^.]+\.(modeling_|modular_|image_processing|video_processing|convert_)"
)


def _imported_at_top(source: str, module: str, is_package: bool) -> set[str]:
    """Modules a source imports when it is imported (not inside functions or TYPE_CHECKING)."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(sub, ast.Import):
                found.update(alias.name for alias in sub.names)
            elif isinstance(sub, ast.ImportFrom):
                base = sub.module or ""
                if sub.level:
                    parent = package.rsplit(".", sub.level - 1)[0] if sub.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in sub.names)
    return found


def model_code_to_leave_out(pure_toc) -> set[str]:
    """Names in PyInstaller's pure-module list matching TORCH_ONLY_MODEL_CODE that no kept
    module imports at import time (a kept module that does keeps it)."""
    sources = {name: src for name, src, _kind in pure_toc if name.startswith("transformers.")}
    dropped = {name for name in sources if TORCH_ONLY_MODEL_CODE.match(name)}
    changed = True
    while changed:
        changed = False
        for name, src in sources.items():
            if name in dropped or not src or not src.endswith(".py"):
                continue
            text = Path(src).read_text(encoding="utf-8")
            needed = _imported_at_top(text, name, src.endswith("__init__.py")) & dropped
            if needed:
                dropped -= needed
                changed = True
    return dropped
