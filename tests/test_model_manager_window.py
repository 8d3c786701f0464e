"""The model manager window (pytest-qt, offscreen) against a real HTTP server on loopback that
paces its bytes: the progress bar moves with bytes and speed, cancel keeps the part and the next
download resumes it with a Range request, verify finds a damaged file, delete asks first,
offline / unreachable say so at once with the import path, and a folder can be imported."""

from __future__ import annotations

import hashlib
import json
import random
import socket
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from s2s_desktop import config
from s2s_desktop.models import manager as manager_module
from s2s_desktop.models.catalog import Catalog, CatalogEntry, CatalogFile, load_catalog
from s2s_desktop.models.manager import ModelManager
from s2s_desktop.ui.model_manager import ModelManagerWindow
from tests.helpers.slow_hub import COMMIT, SlowHub

BIG = random.Random(11).randbytes(3_000_000)
CONFIG = json.dumps({"model_type": "whisper"}).encode()
REPO = "test-org/tiny-whisper"
MODEL = "tiny-whisper-test"


@pytest.fixture(scope="module")
def hub():
    h = SlowHub({REPO: {"model.bin": BIG, "config.json": CONFIG}}).start()
    yield h
    h.stop()


@pytest.fixture(autouse=True)
def widgets_possible(qapp):
    """Widgets need a QApplication; a headless test run first may have made a QCoreApplication."""
    if not isinstance(qapp, QApplication):
        pytest.skip("a QCoreApplication exists (a headless test ran first in this process)")


@pytest.fixture(autouse=True)
def env(hub, tmp_path, monkeypatch):
    hub.requests.clear()
    hub.rate_bps = None
    hub.flowing.set()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    for var in ("S2S_CONFIG_DIR", "S2S_DATA_DIR", "S2S_CACHE_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    return tmp_path


def catalog() -> Catalog:
    tiny = CatalogEntry(
        id=MODEL,
        name="Tiny test Whisper",
        stage="stt",
        backend="faster-whisper",
        source="hf",
        repo=REPO,
        revision="main",
        files=(
            CatalogFile("model.bin", len(BIG), hashlib.sha256(BIG).hexdigest()),
            CatalogFile("config.json"),
        ),
        size_bytes=len(BIG) + len(CONFIG),
        size_approx=False,
        license="MIT",
        settings={"stt.backend": "faster-whisper", "stt.model": REPO},
    )
    return Catalog([tiny, load_catalog().get("silero-vad-onnx")])  # + a package-shipped one


@pytest.fixture
def window(qtbot):
    settings = config.Settings()
    settings.stt.model = REPO
    w = ModelManagerWindow(settings, ModelManager(catalog=catalog()))
    qtbot.addWidget(w)
    w.show()
    return w


def cell(w, model_id, column):
    return w.table.item(w.row_of(model_id), column).text()


def click(qtbot, w, name):
    assert w.buttons[name].isEnabled(), name
    qtbot.mouseClick(w.buttons[name], Qt.MouseButton.LeftButton)


def wait_idle(qtbot, w, timeout=15000):
    qtbot.waitUntil(lambda: w.task is None, timeout=timeout)


def blobs(env):
    return env / "hf" / "hub" / "models--test-org--tiny-whisper" / "blobs"


def test_the_list_shows_catalog_and_disk_with_sizes_and_what_settings_use(window):
    # chosen in the settings, but not on disk: not "in use" (nothing of it runs)
    assert cell(window, MODEL, 5) == "Not downloaded"
    assert cell(window, MODEL, 6) == "chosen, not downloaded"
    assert cell(window, MODEL, 3) == "3.0 MB" and cell(window, MODEL, 4) == "—"
    assert cell(window, "silero-vad-onnx", 4) == "package faster-whisper"
    assert cell(window, "silero-vad-onnx", 5).startswith("Installed")
    window.select("silero-vad-onnx")
    assert not window.buttons["download"].isEnabled()
    assert not window.buttons["delete"].isEnabled()  # pip owns it
    window.select(MODEL)
    assert window.buttons["download"].isEnabled() and not window.buttons["cancel"].isEnabled()
    assert "Download: 3.0 MB" in window.details.text() and "fits" in window.details.text()


def test_download_moves_a_real_progress_bar_with_bytes_and_speed(qtbot, window, env, hub):
    hub.rate_bps = 3_000_000  # about a second
    got = []
    window.downloaded.connect(got.append)
    window.select(MODEL)
    click(qtbot, window, "download")
    assert window.buttons["cancel"].isEnabled() and not window.buttons["download"].isEnabled()
    values, labels, states = set(), set(), set()

    def moving():
        assert window.bar.isVisible()
        values.add(window.bar.value())
        labels.add(window.progress_label.text())
        states.add(cell(window, MODEL, 5))
        return len({v for v in values if 0 < v < 1000}) >= 3

    qtbot.waitUntil(moving, timeout=10000)
    assert any(" of 3.0 MB" in t and "/s" in t and "left" in t for t in labels), labels
    assert any(t.startswith("Downloading ") and t.endswith("%") for t in states), states
    wait_idle(qtbot, window)
    assert cell(window, MODEL, 5) == "Installed, verified"
    assert cell(window, MODEL, 4) == "Hugging Face cache"
    assert got == [MODEL] and "Downloaded Tiny test Whisper" in window.message.text()
    snap = env / "hf" / "hub" / "models--test-org--tiny-whisper" / "snapshots" / COMMIT
    assert (snap / "model.bin").read_bytes() == BIG
    assert not window.bar.isVisible()


def test_cancel_keeps_the_part_and_the_next_download_resumes(qtbot, window, env, hub):
    hub.rate_bps = 1_000_000
    window.select(MODEL)
    click(qtbot, window, "download")
    qtbot.waitUntil(lambda: window.bar.value() > 50, timeout=10000)
    click(qtbot, window, "cancel")
    wait_idle(qtbot, window, timeout=5000)
    assert "cancelled" in window.message.text() and "resumes" in window.message.text()
    assert cell(window, MODEL, 5) == "Not downloaded"
    (part,) = [p for p in blobs(env).iterdir() if p.name.endswith(".part")]
    kept = part.stat().st_size
    assert 0 < kept < len(BIG)

    hub.rate_bps = None
    window.select(MODEL)
    click(qtbot, window, "download")
    wait_idle(qtbot, window)
    assert cell(window, MODEL, 5) == "Installed, verified"
    ranges = [r["range"] for r in hub.requests if r["path"].endswith("/model.bin")]
    assert ranges[-1] is not None and int(ranges[-1].split("=")[1].rstrip("-")) >= kept


def test_verify_finds_a_damaged_file_and_delete_asks_first(qtbot, window, env, monkeypatch):
    window.select(MODEL)
    click(qtbot, window, "download")
    wait_idle(qtbot, window)
    blob = blobs(env) / hashlib.sha256(BIG).hexdigest()
    with open(blob, "r+b") as f:  # bit rot
        f.seek(1000)
        f.write(b"\x00\x01")
    click(qtbot, window, "verify")
    wait_idle(qtbot, window)
    assert "damaged" in window.message.text() and "model.bin" in window.message.text()
    assert cell(window, MODEL, 5) == "Installed, CHECK FAILED"

    asked = []
    monkeypatch.setattr(
        QMessageBox,
        "question",
        lambda parent, title, text, *a: (asked.append(text), QMessageBox.StandardButton.No)[1],
    )
    click(qtbot, window, "delete")
    assert blob.exists() and "The current settings use it" in asked[0]
    assert "Other Hugging Face tools" in asked[0]
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.StandardButton.Yes)
    click(qtbot, window, "delete")
    assert cell(window, MODEL, 5) == "Not downloaded"
    assert not blobs(env).parent.exists()
    assert "Deleted Tiny test Whisper" in window.message.text()


def test_offline_says_so_at_once_and_names_the_import_path(qtbot, window, monkeypatch, hub):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    window.select(MODEL)
    t0 = time.monotonic()
    click(qtbot, window, "download")
    wait_idle(qtbot, window, timeout=3000)
    assert time.monotonic() - t0 < 3
    text = window.message.text()
    assert "HF_HUB_OFFLINE" in text and "models import PATH" in text
    assert "Import Folder…" in text
    assert hub.requests == []


def test_an_unreachable_server_fails_fast_with_the_import_path(qtbot, window, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    window.select(MODEL)
    t0 = time.monotonic()
    click(qtbot, window, "download")
    wait_idle(qtbot, window, timeout=5000)
    assert time.monotonic() - t0 < 5
    assert f"cannot reach 127.0.0.1:{port}" in window.message.text()
    assert "Import Folder…" in window.message.text()
    assert window.message.styleSheet()  # shown as an error


def test_import_a_folder_then_open_it(qtbot, window, env, monkeypatch):
    folder = env / "downloads" / "my-llm"
    folder.mkdir(parents=True)
    (folder / "tiny.Q4_0.gguf").write_bytes(b"GGUF" * 100)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(folder))
    click(qtbot, window, "import")
    wait_idle(qtbot, window)
    m = window.selected()
    assert m is not None and m.source == "imported" and m.stage == "llm"
    assert cell(window, m.id, 5).startswith("Installed") and cell(window, m.id, 4) == str(folder)
    assert f"Imported {folder}" in window.message.text()
    opened = []
    monkeypatch.setattr(manager_module.subprocess, "Popen", lambda args, **kw: opened.append(args))
    click(qtbot, window, "open")
    assert opened and opened[0][-1] == str(folder)
    assert window.message.text() == f"Opened {folder}"
