"""Estimate a flavour's bundle size on another OS from the wheels it would bundle.

    pip download --no-deps --only-binary=:all: --platform win_amd64 --python-version 3.11 \
        -d wheels/win PACKAGE...
    python packaging/estimate_size.py wheels/win --os windows [--extra-mb 30]

Counts what PyInstaller would copy: native libraries and data in full (fat macOS binaries as
their arm64 slice only, as the spec's target_arch thins them), Python sources at the size of
their compressed bytecode (~35 %), and leaves out what the spec does not collect: metadata
beyond dist-info, headers, static/import libraries, tests, the Qt modules the app never
imports, piper's Hebrew/Arabic/training extras. An estimate, not a build: check it against a
real one where that OS is at hand.
"""

from __future__ import annotations

import argparse
import re
import struct
import sys
import zipfile
from pathlib import Path

import transformers_skeleton as skel

PY_RATIO = 0.35  # .py → compiled and zlib-compressed in the PYZ archive (Linux build: ~0.3-0.4)
QT_MODULES = ("Core", "Gui", "Widgets", "Network", "DBus", "OpenGL")
QT_PLUGIN_DIRS = (  # imageformats and iconengines: the spec drops them
    "platforms",
    "platformthemes",
    "styles",
    "tls",
    "generic",
    "networkinformation",
    "platforminputcontexts",
)
SKIP = re.compile(
    r"(^|/)(__pycache__|tests?|include|share/cmake|lib/cmake|examples|docs?)/"
    r"|\.(pyi|h|hpp|a|lib|pdb|cmake|pc)$"
    r"|\.dSYM/|^PyObjCTest/"  # macOS debug symbols and pyobjc's tests: never collected
    r"|^piper/(hebrew|tashkeel/.*\.onnx|train)/?"
    r"|^torch/(bin|share|testing)/"
    r"|^silero_vad/data/(?!silero_vad\.jit$)"  # the spec keeps the TorchScript model only
    r"|/opengl32sw\.dll$"  # Qt's software OpenGL renderer: the spec drops it
    # the C API library: the Python extension has the runtime linked in (the spec drops it)
    r"|^onnxruntime/capi/(lib)?onnxruntime(\.[\d.]+)?\.(dylib|dll|so[\d.]*)$"
)
FAT_MAGIC = 0xCAFEBABE
CPU_TYPE_ARM64 = 0x0100000C


def qt_file_kept(name: str) -> bool:
    """Only the Qt parts PyInstaller's PySide6 hooks collect for Core/Gui/Widgets/Network."""
    rest = name.split("/", 1)[1] if "/" in name else name
    if "/plugins/" in f"/{rest}":
        return any(f"plugins/{d}/" in rest for d in QT_PLUGIN_DIRS)
    binding = re.match(r"Qt(\w+)\.(abi3\.so|pyd|abi3\.pyd)$", rest)  # PySide6/QtX python module
    if binding:
        return binding.group(1) in ("Core", "Gui", "Widgets", "Network", "DBus")
    if re.match(
        r"(Qt/)?(metatypes|qml|libexec|modules|typesystems|glue|scripts|support|"
        r"include|resources)/",
        rest,
    ):
        return False
    if "translations/" in rest or ".app/" in rest:  # the spec drops Qt's translations
        return False
    if re.search(
        r"Qt6?(3D|Quick|Qml|Web|Multimedia|Designer|Help|Pdf|Sql|Test|Xml|Bluetooth|"
        r"Nfc|Sensors|Serial|Positioning|Location|Charts|DataVis|Graphs|Spatial|"
        r"Remote|Scxml|StateMachine|Concurrent|PrintSupport|UiTools|Uitools|"
        r"ShaderTools|Labs|VirtualKeyboard|Lottie|TextToSpeech|Http|Protobuf|Grpc|"
        r"Opcua|Coap|Mqtt|Insight|Canvas|NetworkAuth|Svg|"
        r"OpenGLWidgets|WaylandCompositor|Xml)",
        rest,
    ):
        return False
    if re.search(
        r"(assistant|designer|linguist|lupdate|lrelease|qmlls|qmlformat|uic|rcc|"
        r"balsam|qsb|metaobjectdump|qmllint|qmlcachegen|qtpaths)(\.exe)?$",
        rest,
    ):
        return False
    return True


def slice_size(data_head: bytes, total: int) -> int:
    """Size of the arm64 slice of a fat Mach-O file (the whole file otherwise)."""
    if len(data_head) < 8 or struct.unpack(">I", data_head[:4])[0] != FAT_MAGIC:
        return total
    (count,) = struct.unpack(">I", data_head[4:8])
    for i in range(count):
        off = 8 + 20 * i
        if off + 20 > len(data_head):
            break
        cputype, _sub, _offset, size, _align = struct.unpack(">iiIII", data_head[off : off + 20])
        if cputype == CPU_TYPE_ARM64:
            return size
    return total


def skeleton_bytes(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """A transformers model source as the spec bundles it without torch: its skeleton file,
    plus its bytecode unless it is torch-only model code (packaging/transformers_skeleton.py)."""
    module = info.filename[: -len(".py")].replace("/", ".")
    archived = 0 if skel.TORCH_ONLY_MODEL_CODE.match(module) else int(info.file_size * PY_RATIO)
    text = skel.skeleton_of(zf.read(info).decode("utf-8"))
    kept = info.filename.endswith("/__init__.py") or any(b in text for b in skel.KEPT_BLOCKS)
    return archived + (len(text.encode("utf-8")) if kept else 0)


def wheel_bytes(path: Path, with_sources: bool = False, skeleton: bool = False) -> tuple[str, int]:
    name = path.name.split("-")[0].lower()
    total = 0
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            n = info.filename
            if n.endswith("/") or ".dist-info/" in n or ".data/" in n or SKIP.search(n):
                continue
            if name in ("pyside6_essentials", "pyside6") and not qt_file_kept(n):
                continue
            if skeleton and n.startswith("transformers/models/") and n.endswith(".py"):
                total += skeleton_bytes(zf, info)
                continue
            if n.endswith(".py"):
                total += int(info.file_size * (1 + PY_RATIO if with_sources else PY_RATIO))
                continue
            size = info.file_size
            if info.file_size > 4096:
                with zf.open(info) as f:
                    size = slice_size(f.read(4096), info.file_size)
            total += size
    return name, total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("wheels", type=Path)
    p.add_argument(
        "--extra-mb",
        type=float,
        default=0.0,
        help="what is not a wheel: the Python runtime, a locally built llama.cpp",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        help="wheel name to leave out (repeat, or comma-separated)",
    )
    p.add_argument(
        "--with-sources",
        action="append",
        default=[],
        help="wheel whose .py files are also copied as sources (transformers, when with torch)",
    )
    p.add_argument(
        "--transformers-skeleton",
        action="store_true",
        help="transformers as bundled without torch: its skeleton, no torch-only model code",
    )
    args = p.parse_args(argv)
    rows = []
    sources = {e.strip().lower().replace("-", "_") for x in args.with_sources for e in x.split(",")}
    for whl in sorted(args.wheels.glob("*.whl")):
        name = whl.name.split("-")[0].lower()
        name, size = wheel_bytes(
            whl, with_sources=name in sources, skeleton=args.transformers_skeleton
        )
        left_out = {e.strip().lower().replace("-", "_") for x in args.exclude for e in x.split(",")}
        if name not in left_out:
            rows.append((size, name))
    rows.sort(reverse=True)
    for size, name in rows:
        print(f"{size / 2**20:8.1f} MiB  {name}")
    total = sum(s for s, _ in rows) / 2**20 + args.extra_mb
    print(f"{args.extra_mb:8.1f} MiB  (runtime, locally built libraries)")
    print(f"{total:8.1f} MiB  estimated bundle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
