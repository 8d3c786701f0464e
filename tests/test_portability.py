"""Portability, checked on Linux before a push: the workflows name runners GitHub still has and
each action's current major (.ci/supported_runners.json), and run every step under a shell
that fails on a failed pipe; .ci/portability.py's static checks find what they guard (a
Unix-only module used where Windows runs, a shell script a Windows checkout makes CRLF)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SUPPORTED = json.loads((ROOT / ".ci" / "supported_runners.json").read_text(encoding="utf-8"))
MATRIX_LABEL = re.compile(r"\$\{\{\s*matrix\.(\w+)\s*\}\}")


def load_portability():
    """.ci/portability.py (.ci is no package); registered, as its dataclass needs."""
    if "ci_portability" not in sys.modules:
        spec = importlib.util.spec_from_file_location("ci_portability",
                                                      ROOT / ".ci" / "portability.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["ci_portability"]


def workflows(folder: Path = ROOT / ".github" / "workflows") -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text(encoding="utf-8"))
            for p in sorted(folder.glob("*.yml"))}


def runner_labels(job: dict) -> list[str]:
    """`runs-on`, with a `${{ matrix.x }}` expanded to every value the matrix gives x."""
    runs_on = job["runs-on"]
    labels = []
    for label in runs_on if isinstance(runs_on, list) else [runs_on]:
        m = MATRIX_LABEL.fullmatch(label)
        if m is None:
            labels.append(label)
            continue
        matrix = job["strategy"]["matrix"]
        labels += list(matrix.get(m[1], []))
        labels += [extra[m[1]] for extra in matrix.get("include", []) if m[1] in extra]
    return labels


def runner_problems(flows: dict[str, dict]) -> list[str]:
    problems = []
    for file, flow in flows.items():
        for name, job in flow["jobs"].items():
            for label in runner_labels(job):
                if label not in SUPPORTED["runners"]:
                    why = SUPPORTED["refused"].get(
                        label, "not in .ci/supported_runners.json: check it against "
                               "actions/runner-images, then add it there with its source")
                    problems.append(f"{file} job {name}: runs-on {label}: {why}")
    return problems


def action_problems(flows: dict[str, dict]) -> list[str]:
    problems = []
    for file, flow in flows.items():
        for name, job in flow["jobs"].items():
            for step in job.get("steps", []):
                uses = step.get("uses", "")
                if not uses or uses.startswith(("./", "docker://")):
                    continue
                path, _, ref = uses.partition("@")
                action = "/".join(path.split("/")[:2])  # actions/cache/save is actions/cache
                major = SUPPORTED["actions"].get(action)
                if major is None:
                    problems.append(f"{file} job {name}: {uses}: not in "
                                    ".ci/supported_runners.json: add its current major")
                elif not re.fullmatch(rf"v{major}(\.\d+)*", ref):
                    problems.append(f"{file} job {name}: {uses}: the current major is "
                                    f"v{major} (.ci/supported_runners.json)")
    return problems


def shell_problems(flows: dict[str, dict]) -> list[str]:
    """A `run:` without a shell is `bash -e` on Linux and macOS: no pipefail, so a failing
    command before `| tee` shows green. GitHub's `bash` is `bash -eo pipefail`; pwsh stops on
    the first error."""
    problems = []
    for file, flow in flows.items():
        default = flow.get("defaults", {}).get("run", {}).get("shell")
        for name, job in flow["jobs"].items():
            job_default = job.get("defaults", {}).get("run", {}).get("shell", default)
            for step in job.get("steps", []):
                shell = step.get("shell", job_default)
                if "run" in step and shell not in ("bash", "pwsh"):
                    problems.append(f"{file} job {name}: step {step.get('name', step['run'][:40])!r} "
                                    f"runs under {shell or 'the default shell'}: give the job "
                                    "`defaults: run: shell: bash`")
    return problems


def mlx_probe_problems(flows: dict[str, dict]) -> list[str]:
    """A step that runs the app on MLX (Metal) must wait for .ci/mlx_device.py to say MLX's GPU
    device works: the hosted Macs' Metal is paravirtual, and a refused Metal may abort."""
    problems = []
    for file, flow in flows.items():
        for name, job in flow["jobs"].items():
            steps = job.get("steps", [])
            probed = any(s.get("id") == "mlx" and "mlx_device.py" in s.get("run", "")
                         for s in steps)
            for step in steps:
                if re.search(r"backend=mlx", step.get("run", "")) and not (
                        probed and "steps.mlx.outputs.device == 'gpu'" in str(step.get("if"))):
                    problems.append(f"{file} job {name}: step {step.get('name')!r} runs the app "
                                    "on MLX without .ci/mlx_device.py's answer: give the job a "
                                    "step `id: mlx` running it, and this step "
                                    "`if: steps.mlx.outputs.device == 'gpu'`")
    return problems


def test_the_supported_list_says_when_and_where_it_was_checked():
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", SUPPORTED["checked"])
    assert any("actions/runner-images" in source for source in SUPPORTED["sources"])
    assert not set(SUPPORTED["runners"]) & set(SUPPORTED["refused"])


def test_every_workflow_runs_on_a_runner_github_still_has():
    assert runner_problems(workflows()) == []


def test_every_action_is_on_its_current_major():
    assert action_problems(workflows()) == []


def test_every_run_step_fails_when_a_piped_command_fails():
    assert shell_problems(workflows()) == []


def test_the_app_runs_on_mlx_only_where_the_probe_found_mlx_gpu_device():
    assert mlx_probe_problems(workflows()) == []


def test_the_workflow_checks_catch_what_they_guard():
    """The mistakes issue 29 found in the first workflows, each caught with what to do."""
    flow = {"jobs": {
        "mlx": {"runs-on": "macos-14",
                "steps": [{"uses": "actions/checkout@v4"}, {"run": "pytest | tee out.txt"}]},
        "release": {"runs-on": "macos-15", "defaults": {"run": {"shell": "bash"}},
                    "steps": [{"name": "MLX smoke", "run": "smoke --set llm.backend=mlx-lm"}]},
        "fast": {"runs-on": "${{ matrix.os }}", "defaults": {"run": {"shell": "bash"}},
                 "strategy": {"matrix": {"os": ["ubuntu-latest", "windows-2025"],
                                         "include": [{"os": "macos-15"}]}},
                 "steps": [{"uses": "actions/cache/save@v6"}, {"run": "true"}]},
    }}
    assert runner_problems({"ci.yml": flow}) == [
        f"ci.yml job mlx: runs-on macos-14: {SUPPORTED['refused']['macos-14']}",
        f"ci.yml job fast: runs-on ubuntu-latest: {SUPPORTED['refused']['ubuntu-latest']}",
    ]
    assert action_problems({"ci.yml": flow}) == [
        "ci.yml job mlx: actions/checkout@v4: the current major is v7 "
        "(.ci/supported_runners.json)"]
    assert mlx_probe_problems({"ci.yml": flow}) == [
        "ci.yml job release: step 'MLX smoke' runs the app on MLX without .ci/mlx_device.py's "
        "answer: give the job a step `id: mlx` running it, and this step "
        "`if: steps.mlx.outputs.device == 'gpu'`"]
    assert shell_problems({"ci.yml": flow}) == [
        "ci.yml job mlx: step 'pytest | tee out.txt' runs under the default shell: give the "
        "job `defaults: run: shell: bash`"]


# ---------------------------------------------------------------- .ci/portability.py

MEMORY = '''\
import os
import resource
import sys


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_kib_where_there_is_one() -> int:
    if sys.platform == "win32":
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def cpus() -> int:
    return len(os.sched_getaffinity(0))
'''


@pytest.mark.required()  # mypy comes with the test extra
def test_type_check_finds_what_windows_or_macos_lacks(tmp_path):
    pytest.importorskip("mypy")
    portability = load_portability()
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "memory.py").write_text(MEMORY)
    found = portability.platform_findings(tmp_path, ["app"], handled={})
    assert [line.split(". Guard")[0] for line in found] == [
        'app/memory.py:7: on win32: Module has no attribute "RUSAGE_SELF"',
        'app/memory.py:7: on win32: Module has no attribute "getrusage"',
        'app/memory.py:17: on win32: Module has no attribute "sched_getaffinity"',
        'app/memory.py:17: on darwin: Module has no attribute "sched_getaffinity"',
    ]
    handled = {("app/memory.py", "return len(os.sched_getaffinity(0))"): "why",
               ("app/memory.py", "return 1"): "a stale entry"}
    found = portability.platform_findings(tmp_path, ["app"], handled=handled)
    assert all(":17:" not in line for line in found)
    assert any("`return 1` is listed as handled" in line for line in found)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_eol_check_finds_scripts_a_windows_checkout_breaks(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    portability = load_portability()
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "core.autocrlf", "false")  # Git for Windows' default would fix CRLF
    (tmp_path / "build.sh").write_bytes(b"#!/usr/bin/env bash\nset -euo pipefail\n")
    (tmp_path / "run").write_bytes(b"#!/usr/bin/env bash\r\nset -euo pipefail\r\n")
    (tmp_path / "tool.py").write_bytes(b"#!/usr/bin/env python3\r\nprint(1)\r\n")
    git(tmp_path, "add", ".")
    assert portability.shell_scripts(tmp_path) == ["build.sh", "run"]
    problems = portability.eol_problems(tmp_path)
    assert len(problems) == 2
    assert problems[0].startswith("build.sh: no `eol=lf` attribute")
    assert problems[1].startswith("run: crlf in the index")
    (tmp_path / ".gitattributes").write_text("*.sh text eol=lf\nrun text eol=lf\n")
    git(tmp_path, "add", "--renormalize", ".")
    assert portability.eol_problems(tmp_path) == []
