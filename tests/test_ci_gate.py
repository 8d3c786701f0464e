"""The CI gate (tests/helpers/ci_gate.py): under CI a required test may not skip where it
applies; optional backends' skips and the test counts reach the job summary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
import pytest

@pytest.mark.required()
def test_required_without_its_model():
    pytest.skip("starter set not installed")

@pytest.mark.required("no_such_backend_module")
def test_required_backend_not_installed():
    pytest.skip("needs no_such_backend_module")

@pytest.mark.required(platforms=("no-such-os",))
def test_required_elsewhere():
    pytest.skip("runs on another OS")

@pytest.mark.required()
def test_required_that_runs():
    pass

@pytest.mark.optional("parakeet-mlx")
def test_optional_backend():
    pytest.skip("parakeet-mlx is not installed")
'''


def run_probe(tmp_path: Path, ci: bool) -> tuple[subprocess.CompletedProcess, str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's settings
    summary = tmp_path / "summary.md"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    env.update(PYTHONPATH=str(ROOT), GITHUB_STEP_SUMMARY=str(summary), S2S_TEST_LANE="probe")
    if ci:
        env["CI"] = "true"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.helpers.ci_gate", "-p",
         "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    return proc, summary.read_text() if summary.exists() else ""


def test_under_ci_a_required_skip_fails_the_run_where_it_applies(tmp_path):
    proc, summary = run_probe(tmp_path, ci=True)
    assert proc.returncode == 1, proc.stdout
    assert "FAILED test_probe.py::test_required_without_its_model" in proc.stdout
    assert "a required test skipped under CI: starter set not installed" in proc.stdout
    # not installed, or another platform: not required here, so the skip stands
    assert "1 failed, 1 passed, 3 skipped" in proc.stdout
    assert "| 1 | 1 | 0 | 3 | 0 | 0 | 0 |" in summary
    assert "- parakeet-mlx: 1 test(s) skipped: parakeet-mlx is not installed" in summary
    assert summary.startswith("### probe on ")


def test_outside_ci_a_required_skip_is_only_a_skip(tmp_path):
    proc, summary = run_probe(tmp_path, ci=False)
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 4 skipped" in proc.stdout
    assert "`test_probe.py::test_required_without_its_model`: skipped" in summary
