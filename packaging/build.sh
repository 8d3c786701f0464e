#!/usr/bin/env bash
# Build the one-folder bundle of one flavour with PyInstaller: dist/s2s-desktop/.
#
#   packaging/build.sh [starter|mlx|cpu|full]      (default: $S2S_FLAVOUR, else starter)
#
# Uses $PYTHON, else the active venv's python, else python3 — the environment the app and the
# flavour's packages are installed in (pip install -e ".[starter]") — and installs PyInstaller
# into it when missing. Runs on Linux (the smoke build), macOS and Windows (Git Bash).
# $S2S_DIST / $S2S_WORK move the output and work folders (default dist/, build/pyinstaller-*).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

FLAVOUR=${1:-${S2S_FLAVOUR:-starter}}
PY=${PYTHON:-}
if [[ -z $PY && -n ${VIRTUAL_ENV:-} ]]; then
  PY=$VIRTUAL_ENV/bin/python
  [[ -x $PY ]] || PY=$VIRTUAL_ENV/Scripts/python.exe
fi
PY=${PY:-python3}
DIST=${S2S_DIST:-$ROOT/dist}
WORK=${S2S_WORK:-$ROOT/build/pyinstaller-$FLAVOUR}

if ! "$PY" -c "import s2s_desktop" 2>/dev/null; then
  echo "error: $PY cannot import s2s_desktop: pip install -e \".[starter]\" into it first" >&2
  exit 2
fi
if ! "$PY" -c "import PyInstaller" 2>/dev/null; then
  echo "installing PyInstaller into $("$PY" -c 'import sys; print(sys.prefix)')"
  "$PY" -m pip install -q "pyinstaller>=6.10"
fi

start=$(date +%s)
S2S_FLAVOUR=$FLAVOUR "$PY" -m PyInstaller --noconfirm --log-level "${PYI_LOG_LEVEL:-WARN}" \
  --distpath "$DIST" --workpath "$WORK" packaging/s2s_desktop.spec
seconds=$(($(date +%s) - start))

out=$DIST/s2s-desktop
size=$(du -sh "$out" | cut -f1)
echo "built $out ($FLAVOUR flavour, $size) in ${seconds}s"
if [[ -d "$DIST/S2S Desktop.app" ]]; then
  echo "built $DIST/S2S Desktop.app ($(du -sh "$DIST/S2S Desktop.app" | cut -f1))"
fi
