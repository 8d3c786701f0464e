"""Static portability checks (run by .ci/run and CI's lint job): what would break on Windows or
macOS, found on Linux before a push, since nothing in this project runs on those locally.

1. mypy over the app and the scripts CI runs on every OS, once per platform (`--platform`),
   against typeshed, which marks the modules and attributes each OS lacks (`resource`,
   `fcntl`, `os.getuid`, `os.sysconf` on Windows; `winreg`, `os.startfile` off it). A
   finding is an error of the kinds typeshed gives for a missing module or attribute that
   the win32 or darwin run has and the Linux run does not: the whole suite runs on Linux, so
   what is left is what only the other platforms would meet, and untyped code elsewhere
   (errors on every platform alike) cannot drown it. Third-party packages are left out
   (`--no-site-packages`): this is about the standard library, and it keeps each run to
   seconds. Not seen: code that fails on Linux and macOS alike (the Linux tests see it).
2. Every shell script (`*.sh`, or a `#!` line naming sh or bash) is LF in the index and has
   `eol=lf` from .gitattributes: without it Git for Windows checks it out with CRLF, and bash
   stops at `set -o pipefail\\r`.

Exit status 1 with one line per finding and what to do; 0 when there is none.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE, TARGETS = "linux", ("win32", "darwin")
# what typeshed's platform guards produce: `Module has no attribute "getrusage"`, `Name ...`
PLATFORM_ERROR_CODES = frozenset({"attr-defined", "name-defined"})
# Uses that are safe where the attribute is missing, with why: (file, its source line).
HANDLED = {
    ("s2s_desktop/assistant/local_commands.py", "fmt = locale.nl_langinfo(locale.T_FMT)"):
        "Windows has no nl_langinfo: the AttributeError is caught and strftime asked instead",
    ("s2s_desktop/devices.py",
     'return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")'):
        "Windows has no sysconf: the AttributeError is caught and the RAM is reported unknown",
}
MYPY_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)\s+"
                        r"\[(?P<code>[a-z-]+)\]$")
SHELL_SHEBANG = re.compile(rb"^#!\s*\S*\b(?:env\s+)?(?:ba|da|z)?sh\b")
EOL_ROW = re.compile(r"^i/(?P<index>\S*)\s+w/\S*\s+attr/(?P<attr>.*?)\s*\t(?P<path>.+)$")


@dataclass(frozen=True)
class TypeFinding:
    path: str
    line: int
    message: str

    def source_line(self, root: Path) -> str:
        lines = (root / self.path).read_text(encoding="utf-8").splitlines()
        return lines[self.line - 1].strip() if 0 < self.line <= len(lines) else ""


def checked_paths(root: Path) -> list[str]:
    """The app, plus the scripts CI runs on Windows and macOS (each a top-level module)."""
    scripts = sorted(p.relative_to(root).as_posix() for folder in ("packaging", ".ci")
                     for p in (root / folder).glob("*.py"))
    return ["s2s_desktop", *scripts]


def mypy_errors(platform: str, paths: list[str], root: Path) -> set[TypeFinding]:
    """mypy's errors of the platform kinds for one `--platform`."""
    with tempfile.TemporaryDirectory() as cache:
        proc = subprocess.run(
            [sys.executable, "-m", "mypy", "--platform", platform, "--python-version", "3.11",
             "--no-site-packages", "--ignore-missing-imports", "--check-untyped-defs",
             "--show-error-codes", "--no-error-summary", "--no-pretty", "--no-color-output",
             "--cache-dir", cache, *paths],
            cwd=root, capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, 1) or "No module named mypy" in proc.stderr:
        raise RuntimeError(f"mypy --platform {platform} could not run ({proc.returncode}): "
                           f"{(proc.stderr or proc.stdout)[-2000:]}\n"
                           "install it with the test extra: pip install -e '.[test]'")
    found = set()
    for row in proc.stdout.splitlines():
        m = MYPY_ERROR.match(row.strip())
        if m and m["code"] in PLATFORM_ERROR_CODES:
            found.add(TypeFinding(Path(m["path"]).as_posix(), int(m["line"]), m["message"]))
    return found


def platform_findings(root: Path = ROOT, paths: list[str] | None = None,
                      handled: dict | None = None) -> list[str]:
    """One line per use of a module or attribute that Windows or macOS lacks and Linux has."""
    paths = checked_paths(root) if paths is None else paths
    handled = HANDLED if handled is None else handled
    platforms = (BASELINE, *TARGETS)
    with ThreadPoolExecutor() as pool:  # three mypy processes at once where cores allow
        runs = dict(zip(platforms, pool.map(lambda p: mypy_errors(p, paths, root), platforms),
                        strict=True))
    problems, used = [], set()
    for platform in TARGETS:
        for f in sorted(runs[platform] - runs[BASELINE],
                        key=lambda f: (f.path, f.line, f.message)):
            key = (f.path, f.source_line(root))
            if key in handled:
                used.add(key)
                continue
            problems.append(f"{f.path}:{f.line}: on {platform}: {f.message}. Guard it with "
                            f"`if sys.platform ...` (type checkers understand that), or "
                            f"import it where only that platform runs")
    problems += [f"{path}: `{line}` is listed as handled in .ci/portability.py but no longer "
                 "needs it: remove it from HANDLED" for path, line in handled.keys() - used]
    return problems


def shell_scripts(root: Path = ROOT) -> list[str]:
    """Tracked shell scripts: `*.sh`, or any file whose `#!` line names sh or bash."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True,
                             check=True).stdout.decode().split("\0")
    scripts = []
    for path in filter(None, tracked):
        file = root / path
        if path.endswith(".sh"):
            scripts.append(path)
        elif file.is_file():
            with open(file, "rb") as f:
                if SHELL_SHEBANG.match(f.readline()):
                    scripts.append(path)
    return scripts


def eol_problems(root: Path = ROOT) -> list[str]:
    """Shell scripts that are CRLF in the index, or that a Windows checkout would make CRLF."""
    scripts = shell_scripts(root)
    if not scripts:
        return []
    rows = subprocess.run(["git", "ls-files", "--eol", "--", *scripts], cwd=root,
                          capture_output=True, text=True, check=True).stdout.splitlines()
    problems = []
    for row in rows:
        m = EOL_ROW.match(row)
        if m is None:
            problems.append(f"unexpected `git ls-files --eol` row: {row!r}")
        elif m["index"] != "lf":
            problems.append(f"{m['path']}: {m['index'] or 'not text'} in the index; commit it "
                            "with LF line endings (dos2unix, then git add)")
        elif "eol=lf" not in m["attr"].split():
            problems.append(f"{m['path']}: no `eol=lf` attribute, so Windows checks it out "
                            "with CRLF and bash fails on it: add it to .gitattributes")
    return problems


def main() -> int:
    checks = (("shell scripts are LF everywhere", eol_problems),
              (f"no module or attribute missing on {' or '.join(TARGETS)}", platform_findings))
    failed = False
    for title, check in checks:
        problems = check()
        print(f"{'FAILED' if problems else 'ok'}: {title}")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
