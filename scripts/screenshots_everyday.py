"""Screenshots of the everyday controls for docs/screenshots: the conversation window's
question box, Stop button and per-message copy links (mid-reply and done), the tray menu with
Stop Speaking, Copy Last Answer and a running timer, the earcon rows in Settings → Audio, and
the dictation shortcut and "Free memory" in Settings → General.

    xvfb-run -s "-screen 0 1280x800x24" env QT_QPA_PLATFORM=xcb \\
        python scripts/screenshots_everyday.py [--out docs/screenshots]

The app is the real one on the offline starter models: the questions are typed into the
window's box, the replies are really generated (and the time and the timer answered on the
device). Settings and history live in a temp folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.take_screenshots import (  # noqa: E402
    output_and_private_dirs,
    pump,
    realtime_sink,
    wait_for,
)


def main() -> int:
    out, _ = output_and_private_dirs()

    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QApplication

    from s2s_desktop import profiles
    from s2s_desktop.app import DesktopApp
    from tests.helpers.fake_mic import FakeMicrophone

    qapp = QApplication(sys.argv[:1])
    qapp.setQuitOnLastWindowClosed(False)
    settings = profiles.for_profile("starter")
    settings.hotkey.enabled = False
    app = DesktopApp(qapp, settings, use_tray=True, mic=FakeMicrophone(),
                     speaker=realtime_sink())
    assert app.start()
    app.window.move(40, 40)
    app.window.show()
    wait_for(qapp, lambda: app.controller.state in ("idle", "error"), 300, "models to load")
    c, box = app.controller, app.window.ask_bar.input

    def ask(text: str) -> None:
        box.setText(text)
        box.returnPressed.emit()

    for question in ("What is the capital of Japan?", "What time is it?",
                     "Set a timer for 5 minutes"):
        ask(question)
        wait_for(qapp, lambda: c.state == "idle", 300, f"the answer to {question!r}")
    ask("Tell me about Tokyo.")
    wait_for(qapp, lambda: c.state == "speaking", 300, "the reply to be spoken")
    pump(qapp, 0.3)
    box.setText("And what is the capital of France?")
    app.window.grab().save(str(out / "conversation-type-and-stop.png"))

    app.tray.menu.popup(QPoint(900, 60))
    app.tray.menu.aboutToShow.emit()
    pump(qapp, 0.3)
    app.tray.menu.grab().save(str(out / "tray-menu-everyday.png"))
    app.tray.menu.hide()

    app.window.ask_bar.stop_button.click()
    wait_for(qapp, lambda: c.state == "idle", 30, "the stop")
    box.clear()
    pump(qapp, 0.2)
    app.window.grab().save(str(out / "conversation-stopped.png"))

    from s2s_desktop.ui.settings_dialog import SettingsDialog

    shown = settings.copy()
    shown.hotkey.dictation_combo = "ctrl+alt+d"
    shown.ui.unload_after_minutes = 15
    dialog = SettingsDialog(shown, on_apply=lambda s: [])
    dialog.tabs.setCurrentWidget(dialog.audio)
    dialog.show()
    pump(qapp, 0.4)
    dialog.grab().save(str(out / "settings-audio-sounds.png"))
    dialog.tabs.setCurrentIndex(0)
    pump(qapp, 0.3)
    dialog.grab().save(str(out / "settings-general-dictation.png"))
    dialog.close()
    app.shutdown()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
