"""Memory when idle: ui.unload_after_minutes frees every model after that long idle, and the
next turn (typed, spoken or dictated) loads them again before it is answered."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from s2s_desktop.config import STAGES
from s2s_desktop.pipeline.runner import HeadlessSession
from tests.helpers import scripted_engines as scripted
from tests.test_ui import desktop  # noqa: F401  (the fixture)

# An unload runs a full gc.collect() (one for the stages that unload together): ~0.1 s in
# the app, but seconds late in the whole suite, whose heap holds millions of objects (CI once
# took over 5 s for the four stages, when each still collected on its own).
UNLOAD_S = 30_000


@pytest.fixture
def session(monkeypatch):
    scripted.install(monkeypatch)
    s = HeadlessSession(scripted.settings(reply="Tokyo is the capital."))
    yield s
    s.close()


def test_unloaded_models_load_again_for_the_next_turn(session, qtbot):
    states: list[tuple[str, str]] = []
    notices: list[str] = []
    ev = session.pipeline.events
    ev.stage_state.connect(lambda st, state, d: states.append((st, state)),
                           Qt.ConnectionType.DirectConnection)
    ev.notice.connect(notices.append, Qt.ConnectionType.DirectConnection)
    assert sorted(session.pipeline.unload_models()) == sorted(STAGES)
    qtbot.waitUntil(lambda: {(n, "unloaded") for n in STAGES} <= set(states), timeout=UNLOAD_S)
    assert all(session.pipeline.stages[n].engine is None for n in STAGES)
    assert session.pipeline.unload_models() == []  # nothing left to free
    rec = session.ask("What is the capital of Japan?")
    assert rec["reason"] == "ok" and rec["reply"] == "Tokyo is the capital."
    assert len(rec["pcm"]) > 0
    assert all(session.pipeline.stages[n].engine is not None for n in STAGES)
    assert any("Loading the models again" in n for n in notices)


def test_the_app_frees_the_models_after_the_idle_time_and_answers_after(qtbot, desktop):  # noqa: F811
    app = desktop(reply="Paris is the capital of France.")
    settings = app.settings.copy()
    settings.ui.unload_after_minutes = 0.01  # 0.6 s here; the dialog offers 5, 15 or 60
    app.apply_settings(settings)
    qtbot.waitUntil(lambda: all(app.controller.stage_states[n] == "unloaded" for n in STAGES),
                    timeout=UNLOAD_S)
    assert app.controller.state == "idle"
    assert all(app.pipeline.stages[n].engine is None for n in STAGES)
    app.actions.talk.trigger()
    qtbot.wait(300)
    app.actions.talk.trigger()
    turn = app.controller.current_turn
    qtbot.waitUntil(lambda: app.everyday.records.get(turn) is not None, timeout=10000)
    assert app.everyday.records[turn].reply == "Paris is the capital of France."
    assert np.asarray(app.speaker.audio(turn)).size > 0
    qtbot.waitUntil(lambda: app.controller.stage_states["llm"] == "ready", timeout=5000)
