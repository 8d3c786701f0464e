"""Check a built bundle's installed size against its goal (the issue's: macOS MLX 400 MB,
Windows CPU 700 MB): prints the figure, and over the goal prints a GitHub Actions error and
exits 1, so the release job fails rather than shipping an installer over its goal.

    python packaging/check_size.py "dist/S2S Desktop.app" --goal-mb 400
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def folder_size(folder: Path) -> int:
    """Bytes of the files in `folder` (links not followed: what the installer writes once)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--goal-mb", type=float, required=True, help="goal in MB (10^6 bytes)")
    args = p.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a built bundle folder", file=sys.stderr)
        return 2
    size = folder_size(args.folder)
    line = (
        f"{args.folder.name}: {size / 1e6:.0f} MB ({size / 2**20:.0f} MiB) installed, "
        f"goal {args.goal_mb:.0f} MB"
    )
    if size <= args.goal_mb * 1e6:
        print(line + ": met")
        return 0
    over = size / 1e6 - args.goal_mb
    print(f"::error title=bundle size::{line}: over by {over:.0f} MB (docs/packaging.md says "
          "what each part weighs and what was left out)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
