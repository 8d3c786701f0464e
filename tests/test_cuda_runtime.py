"""CUDA libraries downloaded on first use: a fake PyPI JSON API on loopback serves tiny wheels
built here (fake .so/.dll files under nvidia/<lib>/..., tests/helpers/fake_pypi.py), and the
real code downloads, checks, unpacks, activates and removes them."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from s2s_desktop import cli, cuda
from s2s_desktop.models.download import human_size
from tests.helpers.fake_pypi import (
    CUBLAS_LIBS,
    INSTALLED_LINUX,
    LINUX_TAG,
    installed_files,
    publish,
    serve_index,
    wheel_name,
)


@pytest.fixture
def index(tmp_path, monkeypatch):
    fake = serve_index(tmp_path, monkeypatch)
    yield fake
    fake.stop()


def leftovers() -> list[str]:
    parent = cuda.store.install_dir().parent
    return [p.name for p in parent.iterdir() if p.name.startswith(".")] if parent.exists() else []


# ---------------------------------------------------------------- plan


def test_plan_resolves_this_platforms_wheels_and_their_sizes(index):
    wheels = publish(index)
    plan = cuda.install.plan(ct2_version="4.6.0")
    assert [w.package.name for w in plan.wheels] == ["nvidia-cublas-cu12", "nvidia-cudnn-cu12"]
    assert [w.filename for w in plan.wheels] == list(wheels)  # the Linux ones, not Windows
    assert plan.download_bytes == sum(len(b) for b in wheels.values())
    assert plan.wheels[0].url == f"{index.url}/packages/{plan.wheels[0].filename}"  # joined
    assert plan.wheels[0].sha256 == hashlib.sha256(wheels[plan.wheels[0].filename]).hexdigest()
    assert plan.folder == cuda.store.install_dir() and not plan.up_to_date
    assert index.wheel_gets() == []  # planning downloads nothing

    newer = cuda.install.plan(ct2_version="4.8.5")  # CTranslate2 4.6.3+ has no cuDNN in it
    assert [w.package.name for w in newer.wheels] == ["nvidia-cublas-cu12"]
    assert len(cuda.install.plan(ct2_version="4.8.5", with_cudnn=True).wheels) == 2
    with pytest.raises(cuda.CudaUnsupported, match="cuDNN 8.*4.5 or later"):
        cuda.install.plan(ct2_version="4.4.0")


def test_wheel_choice_follows_os_cpu_and_glibc():
    files = [
        {"filename": "x-1-py3-none-win_amd64.whl", "packagetype": "bdist_wheel"},
        {"filename": "x-1-py3-none-manylinux_2_27_aarch64.whl", "packagetype": "bdist_wheel"},
        {"filename": "x-1-py3-none-manylinux_2_27_x86_64.whl", "packagetype": "bdist_wheel"},
        {"filename": "x-1.tar.gz", "packagetype": "sdist"},
    ]
    assert cuda.wheels.pick_wheel(files, "win_amd64")["filename"].endswith("win_amd64.whl")
    assert cuda.wheels.pick_wheel(files, "linux_x86_64", glibc=(2, 36))["filename"].endswith(
        "2_27_x86_64.whl"
    )
    legacy = [{"filename": "x-1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"}]
    assert cuda.wheels.pick_wheel(legacy, "linux_x86_64", glibc=(2, 17)) is legacy[0]
    with pytest.raises(cuda.CudaUnsupported, match="glibc 2.27 or newer.*glibc 2.17"):
        cuda.wheels.pick_wheel(files, "linux_x86_64", glibc=(2, 17))
    assert cuda.wheels.platform_key("win32", "AMD64") == "win_amd64"
    assert cuda.wheels.platform_key("linux", "x86_64") == "linux_x86_64"
    for system, machine in (("darwin", "arm64"), ("linux", "aarch64")):
        with pytest.raises(cuda.CudaUnsupported, match="stt.device=cpu"):
            cuda.wheels.platform_key(system, machine)
    # dependencies load first: cudart, cublasLt, cublas, then cuDNN's parts, its shim last
    names = ["libcudnn.so.9", "libcublas.so.12", "libcudnn_ops.so.9", "libcublasLt.so.12"]
    assert sorted(names, key=cuda.activate.load_rank) == [
        "libcublasLt.so.12",
        "libcublas.so.12",
        "libcudnn_ops.so.9",
        "libcudnn.so.9",
    ]
    dlls = ["cudnn64_9.dll", "cublas64_12.dll", "cublasLt64_12.dll", "cudart64_12.dll"]
    assert sorted(dlls, key=cuda.activate.load_rank) == [
        "cudart64_12.dll",
        "cublasLt64_12.dll",
        "cublas64_12.dll",
        "cudnn64_9.dll",
    ]


# ---------------------------------------------------------------- install


def test_install_keeps_only_libraries_and_licences_and_writes_a_manifest(index):
    publish(index)
    events = []
    st = cuda.install.install(progress=events.append)
    assert installed_files() == INSTALLED_LINUX  # no headers, no __init__.py, no NVBLAS
    assert (cuda.store.install_dir() / "libcublasLt.so.12").read_bytes() == CUBLAS_LIBS[
        "libcublasLt.so.12"
    ]
    manifest = json.loads((cuda.store.install_dir() / "manifest.json").read_text())
    assert {p["name"]: p["version"] for p in manifest["packages"]} == {
        "nvidia-cublas-cu12": "12.8.4.1",
        "nvidia-cudnn-cu12": "9.10.2.21",
    }
    assert {f["name"]: f["size"] for f in manifest["files"]}["libcublas.so.12"] == 96_000
    assert st.installed and st.versions == cuda.store.status().versions
    assert st.size_bytes > 96_000 + 160_000
    assert leftovers() == [] and list(cuda.store.download_dir().iterdir()) == []  # wheels deleted
    assert {(e.step, e.index) for e in events} == {
        ("download", 1),
        ("download", 2),
        ("unpack", 1),
        ("unpack", 2),
    }
    assert events[-1].step == "unpack" and events[-1].done == events[-1].total
    assert cuda.install.plan().up_to_date  # a second install has nothing to do
    assert cuda.install.install().installed and len(index.wheel_gets()) == 2


def test_a_cut_download_resumes_with_a_range_request(index):
    wheels = publish(index)
    cublas = next(iter(wheels))
    index.cut.add(f"/packages/{cublas}")
    assert cuda.install.install().installed
    gets = [r for r in index.wheel_gets() if r[0].endswith(cublas)]
    assert len(gets) == 2 and gets[0][1] is None
    assert gets[1][1] == f"bytes={len(wheels[cublas]) // 2}-"  # only the rest came again


def test_a_partial_file_from_an_earlier_run_is_resumed(index):
    wheels = publish(index)
    cublas, data = next(iter(wheels.items()))
    cuda.store.download_dir().mkdir(parents=True)
    (cuda.store.download_dir() / f"{cublas}.part").write_bytes(data[:10_000])
    assert cuda.install.install().installed
    assert (f"/packages/{cublas}", "bytes=10000-") in index.wheel_gets()


def test_a_hash_mismatch_is_refused_and_nothing_is_installed(index):
    publish(index, sha="0" * 64)
    with pytest.raises(cuda.CudaError, match="does not match the sha256.*nothing was installed"):
        cuda.install.install()
    st = cuda.store.status()
    assert not st.installed and not cuda.store.install_dir().exists()
    assert leftovers() == []
    assert [p.name for p in cuda.store.download_dir().iterdir()] == []  # the bad bytes are gone


def test_a_failed_update_leaves_the_working_install_alone(index):
    publish(index)
    before = cuda.install.install()
    publish(index, cublas_libs={"libcublas.so.12": b"new"}, sha="f" * 64)
    plan = cuda.install.plan()
    plan.up_to_date = False  # as if the pinned versions had changed
    with pytest.raises(cuda.CudaError, match="sha256"):
        cuda.install.install(from_plan=plan)
    after = cuda.store.status()
    assert after.installed and after.files == before.files
    assert (cuda.store.install_dir() / "libcublas.so.12").read_bytes() == CUBLAS_LIBS[
        "libcublas.so.12"
    ]
    assert leftovers() == []


def test_remove_deletes_the_libraries(index):
    publish(index)
    size = cuda.install.install().size_bytes
    assert cuda.store.remove() >= size
    assert not cuda.store.install_dir().exists() and not cuda.store.status().installed
    assert cuda.store.remove() == 0  # nothing left: still fine


# ---------------------------------------------------------------- activate


def _gcc(src: str, out: Path, *args: str) -> None:
    """A shared library with its soname set, as NVIDIA's are (the loader matches by it)."""
    c = out.with_name(out.name.split(".")[0] + ".c")
    c.write_text(src)
    cmd = ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{out.name}", "-o", str(out), str(c), *args]
    subprocess.run(cmd, check=True)


def test_activate_preloads_real_libraries_so_a_lookup_by_name_finds_them(index, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    build = tmp_path / "build"
    build.mkdir()
    _gcc("int lt_answer(void) { return 42; }\n", build / "libcublasLt.so.12")
    # libcublas needs libcublasLt, without an rpath: it loads only if Lt is loaded first
    _gcc(
        "int lt_answer(void);\nint cublas_answer(void) { return lt_answer() + 1; }\n",
        build / "libcublas.so.12",
        f"-L{build}",
        "-l:libcublasLt.so.12",
    )
    libs = {n: (build / n).read_bytes() for n in ("libcublas.so.12", "libcublasLt.so.12")}
    publish(index, cublas_libs=libs)
    cuda.install.install(from_plan=cuda.install.plan(ct2_version="4.8.5"))  # cuBLAS only
    folder = cuda.store.install_dir()
    probe = (
        "import ctypes, json, sys\n"
        "from s2s_desktop import cuda\n"
        "print(repr(cuda.activate.activate()))\n"
        "maps = open('/proc/self/maps').read()\n"
        "print(json.dumps(sorted({l.split()[-1] for l in maps.splitlines() if sys.argv[1] in l})))\n"
        "print(ctypes.CDLL('libcublas.so.12').cublas_answer())\n"  # as CTranslate2 does
        "print(repr(cuda.activate.activate()))\n"
    )
    env = {**os.environ, "LD_LIBRARY_PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", probe, str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=Path(__file__).parents[1],
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "None"
    mapped = json.loads(lines[1])  # both are in the process's memory map
    assert mapped == [str(folder / "libcublas.so.12"), str(folder / "libcublasLt.so.12")]
    assert lines[2] == "43" and lines[3] == "None"


def test_activate_gives_a_reason_instead_of_raising(index):
    assert "not installed" in cuda.activate.activate()
    publish(index, cublas_libs={"libcublas.so.12": b"not an ELF file", "libcublasLt.so.12": b"x"})
    cuda.install.install(from_plan=cuda.install.plan(ct2_version="4.8.5"))
    reason = cuda.activate.activate()
    assert "libcublas.so.12" in reason and "s2s-desktop cuda install" in reason
    (cuda.store.install_dir() / "libcublas.so.12").unlink()
    assert not cuda.store.status().installed and "missing or damaged" in cuda.store.status().problem


def test_faster_whisper_activates_the_download_on_cuda_only(monkeypatch, tmp_path):
    from s2s_desktop.config import STTSettings
    from s2s_desktop.engines.stt import faster_whisper as fw
    from s2s_desktop.errors import DeviceUnavailable, ModelLoadError

    pytest.importorskip("faster_whisper")
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.bin").write_bytes(b"")
    (model / "tokenizer.json").write_text("{}")
    calls = []
    monkeypatch.setattr(cuda.store, "is_installed", lambda: True)
    monkeypatch.setattr(cuda.activate, "activate", lambda folder=None: calls.append(folder))
    with pytest.raises((DeviceUnavailable, ModelLoadError)):
        fw.FasterWhisperSTT(STTSettings(model=str(model)), "cuda").load()
    assert calls == [None]
    with pytest.raises(ModelLoadError):  # the empty model.bin
        fw.FasterWhisperSTT(STTSettings(model=str(model)), "cpu").load()
    assert calls == [None]
    monkeypatch.setattr(cuda.store, "is_installed", lambda: False)
    assert "s2s-desktop cuda install" in fw.cuda_hint("Library libcublas.so.12 is not found")
    assert fw.cuda_hint("out of memory") == ""


def test_cublas_missing_at_the_first_encode_falls_back_naming_the_download(monkeypatch):
    """CTranslate2 opens cuBLAS at the first encode (the warm-up), not at load: seen on an H200
    with CUDA 13 only. The CPU fallback's notice still says how to get CUDA 12's cuBLAS."""
    from types import SimpleNamespace

    from s2s_desktop import devices
    from s2s_desktop.config import STTSettings
    from s2s_desktop.engines.stt import faster_whisper as fw

    class Model:  # stands for a loaded WhisperModel: only the encode needs cuBLAS
        def __init__(self, device: str):
            self.device = device
            self.model = SimpleNamespace(is_multilingual=False)  # its CTranslate2 model

        def transcribe(self, audio, **kwargs):
            if self.device == "cuda":
                raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")
            return iter([SimpleNamespace(text=" hello")]), SimpleNamespace(language="en")

    class Engine(fw.FasterWhisperSTT):
        def load(self):
            self.model, self.loaded = Model(self.device), True

    monkeypatch.setattr(cuda.store, "is_installed", lambda: False)
    notices: list[str] = []
    engine = devices.load_with_fallback(
        # the stand-in has no encoder of its own: faster-whisper's decode warms up
        lambda device: Engine(STTSettings(short_window=False), device), "cuda", notices.append,
        "stt",
    )
    assert engine.device == "cpu"
    assert len(notices) == 1
    assert "libcublas.so.12" in notices[0] and "s2s-desktop cuda install" in notices[0]
    assert "running on CPU" in notices[0]


# ---------------------------------------------------------------- CLI


def test_cli_install_shows_the_plan_then_installs_and_status_reports_it(index, capsys):
    wheels = publish(index)
    assert cli.main(["cuda", "install", "--yes"]) == 0
    out = capsys.readouterr()
    assert "nvidia-cublas-cu12 12.8.4.1" in out.out and "nvidia-cudnn-cu12 9.10.2.21" in out.out
    total = human_size(sum(len(b) for b in wheels.values()))
    assert f"download {total} from 127.0.0.1" in out.out
    assert f"installed in {cuda.store.install_dir()}" in out.out
    assert "[1/2] download" in out.err and "[2/2] unpack" in out.err  # progress lines

    assert cli.main(["cuda", "status"]) == 0
    out = capsys.readouterr().out
    assert f"CUDA libraries: installed in {cuda.store.install_dir()}" in out
    assert "nvidia-cublas-cu12 12.8.4.1" in out and "size on disk:" in out
    assert cli.main(["cuda", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["installed"] is True

    assert cli.main(["cuda", "remove"]) == 0
    assert "removed" in capsys.readouterr().out
    assert cli.main(["cuda", "status"]) == 0
    assert "not installed" in capsys.readouterr().out


def test_cli_dry_run_and_no_terminal_download_nothing(index, capsys, monkeypatch):
    publish(index)
    assert cli.main(["cuda", "install", "--dry-run"]) == 0
    assert "nvidia-cublas-cu12" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert cli.main(["cuda", "install"]) == 1
    assert "--yes" in capsys.readouterr().err
    assert index.wheel_gets() == [] and not cuda.store.is_installed()


def test_cli_failures_exit_1_with_a_clear_message(index, capsys, monkeypatch):
    publish(index, sha="0" * 64)
    assert cli.main(["cuda", "install", "--yes"]) == 1
    assert "does not match the sha256" in capsys.readouterr().err

    publish(index)
    monkeypatch.setattr(cuda.install, "RETRIES", 0)
    index.cut.add(f"/packages/{wheel_name(cuda.wheels.CUBLAS, LINUX_TAG)}")
    assert cli.main(["cuda", "install", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "was cut at" in err and "nothing was installed" in err and "models import" not in err

    dead = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = dead.server_address[1]
    dead.server_close()  # nothing listens there now
    monkeypatch.setenv(cuda.wheels.INDEX_ENV, f"http://127.0.0.1:{port}")
    assert cli.main(["cuda", "install", "--yes"]) == 1
    assert "cannot reach 127.0.0.1" in capsys.readouterr().err
    assert not cuda.store.is_installed()
