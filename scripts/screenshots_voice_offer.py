"""Screenshots of the offer that comes with a reply no installed voice speaks: the floating
window after a German question (the notice and "Download German Voice…"), and the model manager
that button opens, the German catalog voice selected and Download ready.

    xvfb-run -s "-screen 0 1280x800x24" env QT_QPA_PLATFORM=xcb \\
        python scripts/screenshots_voice_offer.py [--out docs/screenshots]

The app runs on the scripted test engines (tests/helpers/scripted_engines) with a recognizer
that hears German, so no model loads; the catalog, the model manager and the voice routing are
the real ones, over an empty Hugging Face cache (only the starter's English voice installed).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.take_screenshots import output_and_private_dirs, pump, wait_for  # noqa: E402


def main() -> int:
    out, tmp = output_and_private_dirs()
    os.environ["HF_HOME"] = str(tmp / "hf")
    os.environ.pop("HF_HUB_CACHE", None)

    from PySide6.QtWidgets import QApplication

    from s2s_desktop.app import DesktopApp
    from s2s_desktop.audio.sink import CaptureSink
    from s2s_desktop.engines import registry
    from tests.helpers import scripted_engines as scripted
    from tests.helpers.fake_mic import FakeMicrophone

    for stage, (name, cls) in scripted.BACKENDS.items():
        registry.BACKENDS[stage][name] = f"{cls.__module__}:{cls.__name__}"
    registry.BACKENDS["stt"]["fixed-text"] = "tests.test_voice_offer:GermanSTT"

    qapp = QApplication(sys.argv[:1])
    qapp.setQuitOnLastWindowClosed(False)
    settings = scripted.settings(reply="Berlin ist die Hauptstadt von Deutschland.",
                                 heard="Was ist die Hauptstadt von Deutschland?")
    settings.hotkey.enabled = False
    settings.audio.earcons = False
    app = DesktopApp(qapp, settings, use_tray=False, mic=FakeMicrophone(), speaker=CaptureSink())
    assert app.start()
    wait_for(qapp, lambda: app.controller.state == "idle", 60, "the scripted models")
    app.actions.talk.trigger()
    pump(qapp, 0.3)
    app.actions.talk.trigger()
    wait_for(qapp, lambda: app.voice_offer.action.isVisible()
             and app.controller.state == "idle", 30, "the German reply")
    floating = app.floating
    floating.move(900, 300)
    pump(qapp, 0.5)
    floating.grab().save(str(out / "voice-offer-floating.png"))

    floating.tool_buttons["offer"].click()
    window = app._dialogs["models"]
    window.move(20, 20)
    pump(qapp, 1.0)
    window.grab().save(str(out / "voice-offer-models.png"))
    chosen = window.selected()
    print(f"selected: {chosen.id if chosen else None}; download enabled: "
          f"{window.buttons['download'].isEnabled()}; {window.languages_label.text()}")
    app.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
