"""`s2s-desktop cuda status|install|remove`: NVIDIA's CUDA libraries for faster-whisper.

Wired into the main CLI with `add_cuda_parser(subparsers)` and `cuda_command(args)`.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

from ..cuda import install, store, wheels
from ..cuda.install import CudaProgress, Plan
from ..models.download import human_size
from .progress import ProgressLine, percent


def add_cuda_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "cuda", help="NVIDIA CUDA libraries for faster-whisper on a GPU: status, install, remove"
    )
    sub = p.add_subparsers(dest="cuda_cmd", metavar="COMMAND")
    sub.required = True
    st = sub.add_parser("status", help="are the CUDA libraries installed, which, how large")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    ins = sub.add_parser("install", help="download NVIDIA's CUDA libraries from PyPI")
    ins.add_argument("--yes", "-y", action="store_true", help="download without asking")
    ins.add_argument("--dry-run", action="store_true", help="show what would be downloaded")
    ins.add_argument(
        "--with-cudnn",
        action="store_true",
        help="add cuDNN 9 even when this CTranslate2 does not use it",
    )
    ins.add_argument("--json", action="store_true", help="print the plan as JSON")
    sub.add_parser("remove", help="delete the downloaded CUDA libraries")
    return p


class _Progress(ProgressLine):
    """Per wheel: its download, then its unpacking."""

    def line(self, p: CudaProgress) -> str:
        speed = f" {human_size(p.speed_bps)}/s" if p.step == "download" else ""
        return (
            f"[{p.index}/{p.count}] {p.step:8} {percent(p.fraction)} {human_size(p.done)} / "
            f"{human_size(p.total)}{speed}  {p.name}"
        )

    def step(self, p: CudaProgress):
        return (p.index, p.step, int(10 * p.fraction) if p.fraction is not None else 0)


def _print_plan(plan: Plan) -> None:
    ct2 = f", ctranslate2 {plan.ctranslate2}" if plan.ctranslate2 else ""
    print(f"CUDA libraries for faster-whisper on an NVIDIA GPU ({plan.platform}{ct2}):")
    for w in plan.wheels:
        print(
            f"  {w.package.name} {w.package.version:12} {human_size(w.size):>9}  {w.package.what}"
        )
    print(
        f"download {human_size(plan.download_bytes)} from {wheels.host_of(plan.index)}; about "
        f"{human_size(plan.disk_bytes)} on disk in {plan.folder} "
        f"({human_size(plan.free_bytes)} free)"
    )


def _install(args) -> int:
    plan = install.plan(with_cudnn=True if args.with_cudnn else None)
    if args.json:
        print(json.dumps(plan.to_json(), indent=2))
    else:
        _print_plan(plan)
    if plan.up_to_date:
        print(f"already installed in {plan.folder}")
        return 0
    if args.dry_run:
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            print("error: not downloading without --yes (no terminal to ask)", file=sys.stderr)
            return 1
        answer = input(f"Download {human_size(plan.download_bytes)}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("nothing downloaded")
            return 1
    bar, cancel = _Progress(), threading.Event()
    try:
        st = install.install(progress=bar, cancel=cancel, from_plan=plan)
    except KeyboardInterrupt:
        cancel.set()
        bar.end()
        print(
            "cancelled; partial downloads are kept: run the same command to resume",
            file=sys.stderr,
        )
        return 130
    finally:
        bar.end()
    versions = ", ".join(f"{n} {v}" for n, v in st.versions.items())
    print(f"installed in {st.folder}: {versions} ({human_size(st.size_bytes)} on disk)")
    print("faster-whisper uses them when stt.device (or device) is cuda or auto")
    return 0


def _gpu_count() -> int | None:
    try:
        import ctranslate2

        return int(ctranslate2.get_cuda_device_count())
    except Exception:  # noqa: BLE001 - informational only
        return None


def _status(args) -> int:
    st = store.status()
    ct2, gpus = wheels.ctranslate2_version(), _gpu_count()
    if args.json:
        print(json.dumps({**st.to_json(), "ctranslate2": ct2, "cuda_devices": gpus}, indent=2))
        return 0
    if st.installed:
        print(f"CUDA libraries: installed in {st.folder}")
        for name, version in st.versions.items():
            print(f"  {name} {version}")
        print(f"  size on disk: {human_size(st.size_bytes)}")
    elif st.problem:
        print(f"CUDA libraries: not usable: {st.problem}")
    else:
        print(f"CUDA libraries: not installed ({st.folder})")
        print("  `s2s-desktop cuda install` downloads them from PyPI (it shows the size first)")
    if ct2:
        seen = "?" if gpus is None else str(gpus)
        print(f"ctranslate2 {ct2}; NVIDIA GPUs it sees: {seen}")
    return 0


def _remove(args) -> int:
    st = store.status()
    freed = store.remove()
    if st.installed or st.problem or freed:
        print(f"removed {st.folder} ({human_size(freed)} freed)")
    else:
        print("nothing to remove: the CUDA libraries are not installed")
    return 0


def cuda_command(args) -> int:
    return {"status": _status, "install": _install, "remove": _remove}[args.cuda_cmd](args)
