"""A 2 % copy of transformers' model sources, for bundles without torch.

transformers 5 builds its lazy top-level namespace by *reading* every file under
`transformers/models/` (their `__all__` lists and `@requires` decorators), so a bundle with the
package in PyInstaller's archive only fails at import ("No such file … transformers/models").
PyInstaller's hook therefore also copies all 2,500 sources (~50 MB), which the app never runs:
the code is imported from the archive. This writes, instead, each file's top-level lines and its
`__all__` / `@requires` blocks (what that reader looks at), and checks with transformers' own
reader that the namespace it builds is the same; the spec falls back to the full sources if not.
"""

from __future__ import annotations

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
