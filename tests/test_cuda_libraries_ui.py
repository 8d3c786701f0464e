"""The "NVIDIA GPU libraries" group of Settings → Compute (pytest-qt, offscreen) against the fake
PyPI index on loopback (tests/helpers/fake_pypi.py): what it says before and after an install,
the progress bar filling, the libraries landing in the (temporary) install folder, a cancel
mid-download leaving nothing installed, the reason when the index is unreachable, a download is
cut or the disk is full, remove asking first, and "not needed" where the download cannot run."""

from __future__ import annotations

import shutil
import threading
from collections import namedtuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QGroupBox, QMessageBox

from s2s_desktop import config, cuda
from s2s_desktop.devices import Platform
from s2s_desktop.models.download import human_size
from s2s_desktop.ui.cuda_libraries import TITLE, CudaLibrariesBox
from s2s_desktop.ui.settings_dialog import SettingsDialog
from tests.helpers.fake_pypi import (
    INSTALLED_LINUX,
    LINUX_TAG,
    installed_files,
    publish,
    serve_index,
    wheel_name,
)
from tests.helpers.fake_sounddevice import FakeSoundDevice

WAIT_MS = 30_000  # generous: a loaded CI machine must not fail these
CUBLAS_WHEEL = f"/packages/{wheel_name(cuda.wheels.CUBLAS, LINUX_TAG)}"


@pytest.fixture(autouse=True)
def widgets_possible(qapp):
    """Widgets need a QApplication; a headless test run first may have made a QCoreApplication."""
    if not isinstance(qapp, QApplication):
        pytest.skip("a QCoreApplication exists (a headless test ran first in this process)")


@pytest.fixture
def index(tmp_path, monkeypatch):
    fake = serve_index(tmp_path, monkeypatch)
    yield fake
    fake.stop()


@pytest.fixture
def box(qtbot, index):
    widget = CudaLibrariesBox(gpu_count=1)
    qtbot.addWidget(widget)
    widget.show()
    yield widget
    widget.stop()


def click(qtbot, box, key):
    qtbot.mouseClick(box.buttons[key], Qt.MouseButton.LeftButton)


def wait_idle(qtbot, box):
    qtbot.waitUntil(lambda: box.task is None, timeout=WAIT_MS)


def test_install_shows_the_download_fills_the_bar_and_reports_the_versions(qtbot, index, box):
    wheels = publish(index)
    assert box.status.text().startswith("Not installed.")
    assert index.requests == []  # opening Settings asks nothing of the network
    assert not box.buttons["remove"].isEnabled() and not box.buttons["cancel"].isEnabled()

    click(qtbot, box, "check")
    qtbot.waitUntil(lambda: box.details.isVisible(), timeout=WAIT_MS)
    wait_idle(qtbot, box)
    details = box.details.text()
    assert "nvidia-cublas-cu12 12.8.4.1" in details and "nvidia-cudnn-cu12 9.10.2.21" in details
    assert f"Download {human_size(sum(len(b) for b in wheels.values()))} from 127.0.0.1" in details
    assert index.wheel_gets() == []  # showing the size downloads nothing

    values = []
    box.bar.valueChanged.connect(values.append)
    click(qtbot, box, "install")
    assert box.bar.isVisible() and box.buttons["cancel"].isEnabled()
    assert not box.buttons["install"].isEnabled()
    qtbot.waitUntil(lambda: box.status.text().startswith("Installed:"), timeout=WAIT_MS)
    wait_idle(qtbot, box)

    assert values and max(values) == box.bar.maximum()  # the bar reached the end
    assert not box.bar.isVisible()
    assert installed_files() == INSTALLED_LINUX
    st = cuda.store.status()
    assert st.installed
    assert (
        "nvidia-cublas-cu12 12.8.4.1, nvidia-cudnn-cu12 9.10.2.21 "
        f"({human_size(st.size_bytes)} in {cuda.store.install_dir()})" in box.status.text()
    )
    assert box.message.text().startswith("Done. Speech to text uses them")
    assert not box.buttons["install"].isEnabled() and box.buttons["remove"].isEnabled()


def test_new_pinned_versions_offer_an_update(qtbot, index, box, monkeypatch):
    publish(index)
    cuda.install.install()
    box.refresh()
    assert box.buttons["install"].text() == "Install" and not box.buttons["install"].isEnabled()
    monkeypatch.setattr(
        cuda.wheels,
        "CUBLAS",
        cuda.wheels.Package(cuda.wheels.CUBLAS.name, "12.9.1.4", cuda.wheels.CUBLAS.what),
    )
    box.refresh()
    assert box.buttons["install"].text() == "Update" and box.buttons["install"].isEnabled()
    assert "Update downloads them" in box.status.text()


def test_cancel_mid_download_installs_nothing_and_install_resumes(qtbot, index, box):
    publish(index)
    index.hold[CUBLAS_WHEEL] = threading.Event()  # half the wheel arrives, then it waits
    click(qtbot, box, "install")
    qtbot.waitUntil(
        lambda: box.bar.value() > 0 and box.progress_label.text().startswith("Downloading"),
        timeout=WAIT_MS,
    )
    assert "nvidia-cublas-cu12 12.8.4.1 (1 of 2)" in box.progress_label.text()
    click(qtbot, box, "cancel")
    wait_idle(qtbot, box)

    assert "Cancelled" in box.message.text() and "nothing was installed" in box.message.text()
    assert not cuda.store.install_dir().exists() and not cuda.store.status().installed
    assert box.status.text().startswith("Not installed.")
    assert not box.bar.isVisible() and box.buttons["install"].isEnabled()
    assert list(cuda.store.download_dir().glob("*.part"))  # the half is kept for a resume

    index.hold.pop(CUBLAS_WHEEL).set()
    click(qtbot, box, "install")
    qtbot.waitUntil(lambda: box.status.text().startswith("Installed:"), timeout=WAIT_MS)
    wait_idle(qtbot, box)
    assert installed_files() == INSTALLED_LINUX
    resumed = [r for r in index.wheel_gets() if r[0] == CUBLAS_WHEEL and r[1]]
    assert resumed and resumed[-1][1].startswith("bytes=")  # only the rest came again


def test_an_unreachable_index_says_so_and_installs_nothing(qtbot, index, box, monkeypatch):
    dead = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = dead.server_address[1]
    dead.server_close()  # nothing listens there now
    monkeypatch.setenv(cuda.wheels.INDEX_ENV, f"http://127.0.0.1:{port}")
    for key in ("check", "install"):
        box.say("")
        click(qtbot, box, key)
        qtbot.waitUntil(lambda: "Cannot reach" in box.message.text(), timeout=WAIT_MS)
        wait_idle(qtbot, box)
        assert box.message.text().startswith(f"Cannot reach 127.0.0.1:{port}")
        assert "check the network" in box.message.text()
        assert box.message.styleSheet()  # shown as an error
    assert not cuda.store.install_dir().exists()
    assert box.status.text().startswith("Not installed.")


def test_a_cut_download_and_a_full_disk_say_what_happened(qtbot, index, box, monkeypatch):
    publish(index)
    monkeypatch.setattr(cuda.install, "RETRIES", 0)
    index.cut.add(CUBLAS_WHEEL)
    click(qtbot, box, "install")
    qtbot.waitUntil(lambda: "was cut at" in box.message.text(), timeout=WAIT_MS)
    wait_idle(qtbot, box)
    assert "nothing was installed" in box.message.text()
    assert "s2s-desktop models import" not in box.message.text()
    assert not cuda.store.install_dir().exists()

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    click(qtbot, box, "install")
    qtbot.waitUntil(lambda: "Not enough free space" in box.message.text(), timeout=WAIT_MS)
    wait_idle(qtbot, box)
    assert "the CUDA libraries need about" in box.message.text()
    assert not cuda.store.install_dir().exists()


def test_remove_asks_first_then_deletes_the_libraries(qtbot, index, box, monkeypatch):
    publish(index)
    cuda.install.install()
    box.refresh()
    assert box.status.text().startswith("Installed:")
    asked = []

    def answer(reply):
        def question(parent, title, text, *args):
            asked.append(text)
            return reply

        return question

    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.No))
    click(qtbot, box, "remove")
    assert str(cuda.store.install_dir()) in asked[0] and installed_files() == INSTALLED_LINUX

    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
    click(qtbot, box, "remove")
    assert not cuda.store.install_dir().exists()
    assert box.message.text().startswith("Removed (")
    assert box.status.text().startswith("Not installed.")
    assert not box.buttons["remove"].isEnabled()


def test_not_needed_where_the_download_cannot_run(qtbot, monkeypatch):
    real = cuda.wheels.platform_key
    monkeypatch.setattr(cuda.wheels, "platform_key", lambda: real("darwin", "arm64"))  # as on a Mac
    widget = CudaLibrariesBox(gpu_count=0)
    qtbot.addWidget(widget)
    assert widget.status.text().startswith("Not needed on this platform: ")
    assert "faster-whisper runs on the CPU here" in widget.status.text()
    assert all(b.isHidden() for b in widget.buttons.values())


def test_the_compute_tab_holds_the_group(qtbot, index, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    dialog = SettingsDialog(
        config.Settings(),
        platform=Platform("Linux", "x86_64"),
        sd=FakeSoundDevice(),
        path=tmp_path / "cfg" / "settings.json",
    )
    qtbot.addWidget(dialog)
    groups = dialog.compute.findChildren(QGroupBox)
    assert TITLE in [g.title() for g in groups]
    assert isinstance(dialog.compute.cuda_libraries, CudaLibrariesBox)
    assert "No NVIDIA GPU was found" in dialog.compute.cuda_libraries.status.text()
    assert index.requests == []  # opening Settings stays offline
