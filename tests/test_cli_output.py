"""What the command line prints when things go wrong for a script: `run --json` answers with
JSON even when no turn could run, and a reader that stops early (`| head`) ends the output
quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.test_ipc import isolated, running_app  # noqa: F401  (fixtures)


def s2s(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "s2s_desktop", *args], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120, **kw)


def test_run_json_reports_a_file_that_is_not_audio_as_a_json_object(isolated):  # noqa: F811
    res = s2s("run", "--input", "/etc/passwd", "--json")
    assert res.returncode == 1
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1, res.stdout
    error = json.loads(lines[0])
    assert "/etc/passwd" in error["error"]
    assert "Traceback" not in res.stderr

    plain = s2s("run", "--input", "/etc/passwd")  # without --json: the same line on stderr
    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.strip() == f"error: {error['error']}"


def test_a_question_missing_is_a_json_object_too(isolated):  # noqa: F811
    res = s2s("run", "--json")
    assert res.returncode == 2 and "give a question" in json.loads(res.stdout)["error"]


def test_status_into_a_reader_that_left_ends_quietly(qtbot, running_app):  # noqa: F811
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `| head -c 100` does once it has its 100 bytes
    try:
        proc = subprocess.Popen([sys.executable, "-m", "s2s_desktop", "status", "--json"],
                                env=dict(os.environ), stdout=write_end,
                                stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    qtbot.waitUntil(lambda: proc.poll() is not None, timeout=30000)  # the app keeps answering
    err = proc.stderr.read()
    assert err == "", err
    assert proc.returncode == 141  # as a program stopped by SIGPIPE ends
