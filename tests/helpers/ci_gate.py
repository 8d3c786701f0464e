"""A pytest plugin for CI runs (loaded by tests/conftest.py).

- `@pytest.mark.required(*modules, platforms=(...))`: with env `CI` set, the test may not skip
  where it applies (every listed module importable, and on one of `platforms` when given):
  a skip there fails the run, so a missing model or package cannot turn CI green untested.
- `@pytest.mark.optional(backend)`: its skips are listed, with their reasons, in the summary.
- `S2S_TEST_MLX_DEVICE=cpu|gpu` makes that MLX's default device for the run; the device MLX
  actually used is printed in the summary.
- The summary (test counts, required and optional outcomes) goes to the terminal and, on
  GitHub Actions, to the job summary ($GITHUB_STEP_SUMMARY).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections import Counter

import pytest

COUNTED = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected")


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing or broken
        return False


def required_here(marker: pytest.Mark) -> bool:
    """Whether a `required` test applies on this machine (its modules are installed, and it
    is on one of its platforms)."""
    platforms = marker.kwargs.get("platforms", ())
    if platforms and not any(sys.platform.startswith(p) for p in platforms):
        return False
    return all(_installed(m) for m in marker.args)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_OUTCOMES] = {"required": [], "optional": []}
    device = os.environ.get("S2S_TEST_MLX_DEVICE", "").strip().lower()
    if device and _installed("mlx"):
        import mlx.core as mx

        if device not in ("cpu", "gpu"):
            raise pytest.UsageError(f"S2S_TEST_MLX_DEVICE={device!r}: use cpu or gpu")
        mx.set_default_device(mx.cpu if device == "cpu" else mx.gpu)


_OUTCOMES = pytest.StashKey[dict]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    skipped = report.skipped and not hasattr(report, "wasxfail")
    if not skipped and report.when != "call":
        return
    outcomes = item.config.stash[_OUTCOMES]
    required = item.get_closest_marker("required")
    optional = item.get_closest_marker("optional")
    if skipped:
        reason = _skip_reason(report)
        if required is not None and in_ci() and required_here(required):
            report.outcome = "failed"
            report.longrepr = (
                f"a required test skipped under CI: {reason}\n"
                "(install what it needs on this runner; tests/helpers/ci_gate.py)"
            )
            outcomes["required"].append((item.nodeid, "failed: skipped", reason))
        elif required is not None:
            outcomes["required"].append((item.nodeid, "skipped", reason))
        elif optional is not None:
            outcomes["optional"].append((item.nodeid, optional.args[0], reason))
    elif report.when == "call" and required is not None:
        outcomes["required"].append((item.nodeid, report.outcome, ""))


def _mlx_device() -> str:
    if "mlx.core" not in sys.modules:
        return ""
    import mlx.core as mx

    device = str(mx.default_device())
    metal = getattr(mx, "metal", None)
    gpu = metal.is_available() if metal is not None and hasattr(metal, "is_available") else None
    return f"{device} (Metal available: {gpu})"


def summary_lines(stats: dict, outcomes: dict) -> list[str]:
    counts = {k: len(stats.get(k, [])) for k in COUNTED}
    lines = ["| " + " | ".join(COUNTED) + " |", "|" + "---|" * len(COUNTED)]
    lines.append("| " + " | ".join(str(counts[k]) for k in COUNTED) + " |")
    if outcomes["required"]:
        tally = Counter(state for _, state, _ in outcomes["required"])
        lines += ["", "**Required tests:** " + ", ".join(f"{n} {s}" for s, n in tally.items())]
        lines += [f"- `{nodeid}`: {state} ({why})" for nodeid, state, why in
                  outcomes["required"] if why]
    if outcomes["optional"]:
        lines += ["", "**Optional backends skipped:**"]
        for reason, n in Counter((b, why) for _, b, why in outcomes["optional"]).items():
            lines.append(f"- {reason[0]}: {n} test(s) skipped: {reason[1]}")
    device = _mlx_device()
    if device:
        lines += ["", f"**MLX default device at the end of the run:** {device}"]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not any(terminalreporter.stats.get(k) for k in COUNTED):
        return  # nothing ran (--collect-only)
    lines = summary_lines(terminalreporter.stats, config.stash[_OUTCOMES])
    terminalreporter.section("s2s-desktop CI summary")
    for line in lines:
        terminalreporter.write_line(line)
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        title = os.environ.get("S2S_TEST_LANE", "pytest")
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"### {title} on {sys.platform}, Python {sys.version.split()[0]}\n\n")
            f.write("\n".join(lines) + "\n\n")
