"""`s2s-desktop set KEY=VALUE…` / `s2s-desktop get [KEY]` against a running app (scripted
engines, the real local socket, the real CLI in a subprocess), and a second launch with --set
that must leave the running app alone."""

from __future__ import annotations

import json

import pytest

from s2s_desktop import config
from tests.test_ipc import cli, isolated, running_app  # noqa: F401  (fixtures)


def ask_and_wait(qtbot, app, text: str) -> str:
    turn = app.everyday.ask(text)
    qtbot.waitUntil(lambda: turn in app.everyday.records, timeout=10000)
    return app.everyday.records[turn].reply


def saved_file() -> dict:
    return json.loads(config.settings_path().read_text())


def test_set_a_live_key_applies_now_is_saved_and_reloads_nothing(qtbot, running_app):  # noqa: F811
    app = running_app
    res = cli(qtbot, "set", "tts.speed=1.6")
    assert res.returncode == 0, res.stderr
    assert "tts.speed: 1.0 → 1.6" in res.stdout
    assert "no model reloads" in res.stdout
    assert app.settings.tts.speed == 1.6 and app.controller.settings.tts.speed == 1.6
    assert saved_file()["tts"]["speed"] == 1.6  # as Settings → Apply saves it
    assert all(s == "ready" for s in app.controller.status()["stages"].values())

    got = cli(qtbot, "get", "tts.speed")
    assert got.returncode == 0 and got.stdout.strip() == "1.6"


def test_set_a_model_key_reloads_that_stage_and_the_next_answer_uses_it(
    qtbot, running_app  # noqa: F811
):
    app = running_app
    assert ask_and_wait(qtbot, app, "Capital of France?") == "Paris."
    res = cli(qtbot, "set", "llm.model=Tokyo.", "llm.max_new_tokens=120")
    assert res.returncode == 0, res.stderr
    assert "llm.model: Paris. → Tokyo." in res.stdout
    assert "llm.max_new_tokens: " in res.stdout and "→ 120" in res.stdout
    assert "reloading: llm" in res.stdout
    qtbot.waitUntil(lambda: app.controller.state == "idle", timeout=10000)
    assert ask_and_wait(qtbot, app, "Capital of Japan?") == "Tokyo."
    assert saved_file()["llm"]["max_new_tokens"] == 120


@pytest.mark.parametrize(
    ("pair", "error"),
    [
        ("nope.key=1", "unknown setting 'nope.key'"),
        ("llm.max_new_tokens=many", "llm.max_new_tokens: expected int, got 'many'"),
        ("tts.speed=9", "tts.speed must be between 0.25 and 4"),
    ],
)
def test_a_bad_key_or_value_gets_the_same_error_as_set_and_changes_nothing(
    qtbot, running_app, pair, error  # noqa: F811
):
    app = running_app
    before = app.settings.to_dict()
    res = cli(qtbot, "set", "audio.max_record_s=9", pair)
    assert res.returncode == 1
    assert res.stderr.strip() == f"error: {error}"
    # the launch option says the very same line
    launch = cli(qtbot, "run", "--set", pair, "--text", "hello")
    assert launch.returncode == 1 and launch.stderr.strip() == f"error: {error}"
    assert app.settings.to_dict() == before  # the good key beside it did not apply either
    assert not config.settings_path().exists()


def test_a_model_path_that_does_not_exist_is_refused_and_the_app_keeps_answering(
    qtbot, running_app  # noqa: F811
):
    app = running_app
    res = cli(qtbot, "set", "llm.model=/nonexistent.gguf")
    assert res.returncode == 1
    assert res.stderr.startswith("error: ") and "/nonexistent.gguf" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert app.settings.llm.model == "Paris." and not config.settings_path().exists()
    assert ask_and_wait(qtbot, app, "Capital of France?") == "Paris."


def test_an_api_key_is_not_taken_from_the_command_line_nor_shown(qtbot, running_app):  # noqa: F811
    app = running_app
    app.settings.llm.api_key = "sk-very-secret"
    res = cli(qtbot, "set", "llm.api_key=sk-other")
    assert res.returncode == 1 and "keychain" in res.stderr
    assert app.settings.llm.api_key == "sk-very-secret"
    shown = cli(qtbot, "get")
    assert shown.returncode == 0 and "sk-very-secret" not in shown.stdout
    assert "llm.api_key = (set)" in shown.stdout


def test_get_prints_all_a_section_or_one_value(qtbot, running_app):  # noqa: F811
    every = cli(qtbot, "get")
    assert every.returncode == 0, every.stderr
    assert "tts.speed = 1.0" in every.stdout and "llm.model = Paris." in every.stdout
    assert "hotkey.enabled = false" in every.stdout

    section = cli(qtbot, "get", "llm", "--json")
    values = json.loads(section.stdout)
    assert values["llm.model"] == "Paris." and all(k.startswith("llm.") for k in values)

    unknown = cli(qtbot, "get", "llm.nope")
    assert unknown.returncode == 1 and unknown.stderr.strip() == "error: unknown setting 'llm.nope'"


def test_set_without_a_running_app_or_without_a_value_says_what_to_do(qtbot, isolated):  # noqa: F811
    res = cli(qtbot, "set", "tts.speed=1.2")
    assert res.returncode == 1 and "s2s-desktop is not running" in res.stderr
    res = cli(qtbot, "set", "tts.speed")
    assert res.returncode == 2 and "set expects KEY=VALUE, got 'tts.speed'" in res.stderr


def test_a_second_launch_with_set_leaves_the_running_app_alone(qtbot, running_app):  # noqa: F811
    app = running_app
    before = app.settings.to_dict()
    res = cli(qtbot, "--set", "llm.model=/nonexistent.gguf", "--set", "llm.max_new_tokens=120")
    assert res.returncode == 1
    assert "already running" in res.stderr and "nothing changed" in res.stderr
    assert "s2s-desktop set KEY=VALUE" in res.stderr
    assert app.settings.to_dict() == before
    assert all(s == "ready" for s in app.controller.status()["stages"].values())
    assert ask_and_wait(qtbot, app, "Capital of France?") == "Paris."

    plain = cli(qtbot)  # a plain second launch still just shows the running app
    assert plain.returncode == 0 and "already running" in plain.stdout
