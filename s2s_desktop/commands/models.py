"""`s2s-desktop models …`: list, download, verify, delete, import, path.

Wired into the main CLI with `add_models_parser(subparsers)` and `models_command(args)`; also
runs alone as `python -m s2s_desktop.commands.models …`.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

from ..errors import S2SError
from ..models.download import human_size
from .progress import ProgressLine


def add_models_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("models", help="list, download, verify, delete or import models")
    sub = p.add_subparsers(dest="models_cmd", metavar="COMMAND")
    sub.required = True
    ls = sub.add_parser("list", help="catalog and installed models")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.add_argument("--all", action="store_true", help="include models for other platforms")
    dl = sub.add_parser("download", help="download a model into the Hugging Face cache")
    dl.add_argument("id", help="catalog id or Hub repo id (org/name)")
    dl.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="NAME",
        help="only this file of the repo (repeatable)",
    )
    vf = sub.add_parser("verify", help="check sha256 of a model's files (all installed if no ID)")
    vf.add_argument("id", nargs="?", help="the model to check (see `models list`)")
    rm = sub.add_parser("delete", help="delete a model's files from the cache")
    rm.add_argument("id", help="the model to delete, or an imported model to forget")
    im = sub.add_parser("import", help="add a local model folder or file")
    im.add_argument("path", help="a model folder, or one .gguf / .onnx / .safetensors file")
    im.add_argument("--copy", action="store_true", help="copy it into the app's data folder")
    im.add_argument(
        "--as", dest="as_id", metavar="ID", help="the catalog model these files are a copy of"
    )
    ph = sub.add_parser("path", help="print the folder of an installed model")
    ph.add_argument("id", help="the installed model (see `models list`)")
    return p


def _manager():
    from ..launch import resolve_launch
    from ..models.manager import ModelManager

    # what a plain `s2s-desktop` runs: at first start the starter set stands in for the
    # recommended models until they are downloaded, and "use" must say so
    settings = resolve_launch(None).settings
    return ModelManager(settings=settings)


def _yes_no(v: bool | None) -> str:
    return {True: "yes", False: "NO", None: "-"}[v]


def _list(mgr, args) -> int:
    items = [m for m in mgr.list() if args.all or m.runs_here or m.installed]
    if args.json:
        print(json.dumps([m.to_json() for m in items], indent=2))
        return 0
    print(f"{'id':34} {'stage':5} {'backend':15} {'size':>10} {'inst':4} {'ok':3} use  path")
    for m in items:
        size = ("~" if m.size_approx else "") + human_size(m.size_bytes)
        print(
            f"{m.id[:34]:34} {m.stage:5} {m.backend[:15]:15} {size:>10} "
            f"{_yes_no(m.installed):4} {_yes_no(m.verified):3} "
            f"{'*' if m.used_by_settings else ' ':4} {m.path or ''}"
        )
    return 0


def _download(mgr, args) -> int:
    plan = mgr.plan(args.id, args.file or None)
    need = ("about " if plan.approx else "") + human_size(plan.need_bytes)
    print(
        f"downloading {plan.id} into {plan.folder}: {need}, {human_size(plan.free_bytes)} free",
        file=sys.stderr,
    )
    bar, cancel = ProgressLine(), threading.Event()
    try:
        path = mgr.download(args.id, progress=bar, cancel=cancel, files=args.file or None)
    except KeyboardInterrupt:
        cancel.set()
        bar.end()
        print(
            "cancelled; the partial download is kept: run the same command to resume",
            file=sys.stderr,
        )
        return 130
    bar.end()
    print(path)
    return 0


def _verify(mgr, args) -> int:
    reports = [mgr.verify(args.id)] if args.id else mgr.verify_all()
    failed = False
    for r in reports:
        state = {True: "ok", False: "FAILED", None: "not fully checked"}[r.ok]
        print(f"{r.id}: {state}")
        for f in r.files:
            if f.status != "ok":
                print(f"  {f.status}: {f.name} ({f.detail})")
        failed |= r.ok is False
    if failed:
        bad = [f"{r.id}/{f.name}" for r in reports for f in r.bad]
        print(
            f"error: verification failed for {', '.join(bad)}: delete and download again",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _delete(mgr, args) -> int:
    """Say what went and what stayed: forgetting an import leaves the user's own files."""
    for path in mgr.delete(args.id):
        if path.exists():
            print(f"forgot the imported model at {path} (your files there were not deleted)")
        else:
            print(f"deleted {path}")
    return 0


def _import(mgr, args) -> int:
    m = mgr.import_folder(args.path, copy=args.copy, as_id=args.as_id)
    print(f"imported {m.id} ({m.stage}, {m.backend}) at {m.path}")
    return 0


def _path(mgr, args) -> int:
    print(mgr.folder(args.id))
    return 0


COMMANDS = {
    "list": _list,
    "download": _download,
    "verify": _verify,
    "delete": _delete,
    "import": _import,
    "path": _path,
}


def models_command(args) -> int:
    """Run one `models` subcommand; errors become one line on stderr and exit status 1."""
    try:
        return COMMANDS[args.models_cmd](_manager(), args)
    except S2SError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(
            f"error: {exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="s2s-desktop")
    add_models_parser(parser.add_subparsers(dest="command", required=True))
    return models_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] if sys.argv[1:2] == ["models"] else ["models", *sys.argv[1:]]))
