"""Screenshots of a new user's first run for docs/screenshots, on a real X screen (Xvfb):

- first-run.png: plain start with no settings file and only the starter set installed: the
  floating window at the screen edge, the conversation window, and the model manager offering
  the recommended models pre-selected with their sizes;
- floating-beside-settings.png: the floating window beside the Settings dialog;
- conversation-after-restart.png: the conversation window of the next start, at the newest turn.

    python scripts/first_run_screenshots.py [--out docs/screenshots]

It starts its own Xvfb; questions (espeak-ng) go in through a stand-in microphone and are
really answered by the starter models. User folders live in a temp folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.take_screenshots import (  # noqa: E402
    RecordingMicrophone,
    pump,
    realtime_sink,
    spoken,
    wait_for,
)

QUESTIONS = (
    "What is the capital of France?",
    "What is the capital of Japan?",
    "How many legs does a spider have?",
    "What colour is the sky?",
    "Who wrote Romeo and Juliet?",
    "What is the largest planet?",
)


def screen(path: Path) -> None:
    from PySide6.QtGui import QGuiApplication

    QGuiApplication.primaryScreen().grabWindow(0).save(str(path))


def start_app(qapp, tmp: Path):
    from s2s_desktop.app import DesktopApp
    from s2s_desktop.launch import resolve_launch

    launch = resolve_launch(None, {})  # plain `s2s-desktop`
    mic = RecordingMicrophone()
    app = DesktopApp(
        qapp, launch.settings, use_tray=False, mic=mic, speaker=realtime_sink(), launch=launch
    )
    app.hotkey.info = lambda: {
        "combo": launch.settings.hotkey.combo, "mode": "hold", "available": True,
        "paused": False,
    }  # fmt: skip
    app.window.move(24, 24)
    assert app.start()
    return app, mic


def first(out: Path, tmp: Path) -> None:
    from PySide6.QtWidgets import QApplication

    qapp = QApplication(sys.argv[:1])
    qapp.setQuitOnLastWindowClosed(False)
    app, mic = start_app(qapp, tmp)
    models = app._dialogs.get("models")
    if models is not None:
        models.move(250, 140)
    wait_for(qapp, lambda: app.controller.state in ("idle", "error"), 300, "models to load")
    pump(qapp, 0.5)
    screen(out / "first-run.png")
    if models is not None:
        models.close()
    c = app.controller
    for question in QUESTIONS:
        mic.audio = spoken(question, tmp)
        c.talk_start("tray")
        pump(qapp, 0.2)
        c.talk_stop("tray")
        wait_for(qapp, lambda: c.state in ("idle", "error"), 300, "the reply")
    app.open_settings()
    dialog = app._dialogs["settings"]
    dialog.move(240, 70)  # where a window manager centres it
    pump(qapp, 0.5)
    screen(out / "floating-beside-settings.png")
    dialog.close()
    stop(app)


def restart(out: Path, tmp: Path) -> None:
    from PySide6.QtWidgets import QApplication

    qapp = QApplication(sys.argv[:1])
    qapp.setQuitOnLastWindowClosed(False)
    app, _mic = start_app(qapp, tmp)
    wait_for(qapp, lambda: app.controller.state in ("idle", "error"), 300, "models to load")
    pump(qapp, 0.5)
    app.window.grab().save(str(out / "conversation-after-restart.png"))
    stop(app)


def stop(app) -> None:
    """Shut down and wait for every stage (the LLM may be evaluating the next prompt)."""
    app.shutdown()
    for stage in app.pipeline.stages.values():
        stage.wait(120_000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    parser.add_argument("--phase", choices=("first", "restart"), help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.phase:
        tmp = Path(args.home)
        (first if args.phase == "first" else restart)(out, tmp)
        return 0
    from tests.helpers.desktop_env import xvfb

    tmp = Path(tempfile.mkdtemp(prefix="s2s-first-run-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("S2S_", "XDG_"))}
    env.update(
        QT_QPA_PLATFORM="xcb", HF_HUB_OFFLINE="1", HF_HOME=str(tmp / "hf"),
        XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(tmp / "data"),
        XDG_CACHE_HOME=str(tmp / "cache"), XDG_STATE_HOME=str(tmp / "state"),
    )  # fmt: skip
    with xvfb() as display:
        env["DISPLAY"] = display
        for phase in ("first", "restart"):
            subprocess.run(
                [sys.executable, __file__, "--out", str(out), "--phase", phase, "--home", str(tmp)],
                env=env, check=True, timeout=900,
            )  # fmt: skip
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
