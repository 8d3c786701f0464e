"""Device resolution on every simulated platform, refusals with reasons, CPU fallback, listing."""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys

import pytest

from s2s_desktop import devices
from s2s_desktop.commands import devices as devices_cmd
from s2s_desktop.config import Settings
from s2s_desktop.devices import Platform, load_with_fallback, resolve_device, validate_devices
from s2s_desktop.errors import (
    BackendUnavailable,
    DeviceUnavailable,
    ModelLoadError,
    ModelNotFound,
    SettingsError,
)

PLATFORMS = {
    "mac_arm": Platform("Darwin", "arm64", cuda_count=0, has_mps=True, has_mlx=True),
    "mac_arm_bare": Platform("Darwin", "arm64"),  # neither torch nor mlx installed
    "mac_intel": Platform("Darwin", "x86_64", has_mps=False),
    "linux_cuda2": Platform("Linux", "x86_64", cuda_count=2),
    "linux_cpu": Platform("Linux", "x86_64"),
    "linux_mlx": Platform("Linux", "x86_64", has_mlx=True),  # pip install "mlx[cpu]"
    "win_cuda1": Platform("Windows", "AMD64", cuda_count=1),
}
P = list(PLATFORMS)


def settings_for(stage: str, backend: str, device: str, per_stage: bool = False) -> Settings:
    s = Settings()
    getattr(s, stage).backend = backend
    if per_stage:
        getattr(s, stage).device = device
    else:
        s.device = device
    return s


# Expected device per platform (in P order); "!text" = DeviceUnavailable whose message has text.
MAC = "!CUDA does not exist on macOS"
NO_GPU = "!no usable NVIDIA GPU"
NOT_APPLE = "!needs a Mac with Apple Silicon"
CASES = {
    # llama-cpp: cuda, mps (Metal offload), cpu
    ("llm", "llama-cpp", "auto"): ["mps", "cpu", "cpu", "cuda", "cpu", "cpu", "cuda"],
    ("llm", "llama-cpp", "cpu"): ["cpu"] * 7,
    ("llm", "llama-cpp", "cuda"): [MAC, MAC, MAC, "cuda", NO_GPU, NO_GPU, "cuda"],
    ("llm", "llama-cpp", "cuda:1"): [MAC, MAC, MAC, "cuda:1", NO_GPU, NO_GPU, "!cuda:1 does not"],
    ("llm", "llama-cpp", "mps"): ["mps", "!PyTorch with MPS", NOT_APPLE] + [NOT_APPLE] * 4,
    ("llm", "llama-cpp", "mlx"): ["!choose the mlx-lm backend"] * 2
    + [NOT_APPLE, NOT_APPLE, NOT_APPLE, "!choose the mlx-lm backend", NOT_APPLE],
    # mlx-lm: MLX only (Metal on Apple Silicon; MLX's CPU build elsewhere)
    ("llm", "mlx-lm", "auto"): [
        "mlx",
        "mlx",
        "!choose llama-cpp",
        "!choose llama-cpp",
        "!choose llama-cpp",
        "mlx",
        "!choose llama-cpp",
    ],
    ("llm", "mlx-lm", "mlx"): ["mlx", "mlx", NOT_APPLE, NOT_APPLE, NOT_APPLE, "mlx", NOT_APPLE],
    ("llm", "mlx-lm", "cpu"): ["!choose the llama-cpp backend"] * 7,
    ("llm", "mlx-lm", "cuda"): [
        MAC,
        MAC,
        MAC,
        "!cannot run on cuda",
        NO_GPU,
        NO_GPU,
        "!cannot run on cuda",
    ],
    # faster-whisper: cuda, cpu (CTranslate2 has no Metal)
    ("stt", "faster-whisper", "auto"): ["cpu", "cpu", "cpu", "cuda", "cpu", "cpu", "cuda"],
    ("stt", "faster-whisper", "mps"): ["!choose the transformers backend", "!PyTorch with MPS"]
    + [NOT_APPLE] * 5,
    ("stt", "mlx-whisper", "auto"): [
        "mlx",
        "mlx",
        "!choose faster-whisper",
        "!choose faster-whisper",
        "!choose faster-whisper",
        "mlx",
        "!choose faster-whisper",
    ],
    # kokoro (torch): cuda, mps, cpu
    ("tts", "kokoro", "auto"): ["mps", "cpu", "cpu", "cuda", "cpu", "cpu", "cuda"],
    ("tts", "piper", "auto"): ["cpu", "cpu", "cpu", "cuda", "cpu", "cpu", "cuda"],
    ("tts", "mlx-audio", "auto"): [
        "mlx",
        "mlx",
        "!choose piper",
        "!choose piper",
        "!choose piper",
        "mlx",
        "!choose piper",
    ],
    ("tts", "mlx-audio", "mps"): ["!choose the kokoro backend", "!PyTorch with MPS"]
    + [NOT_APPLE] * 5,
}
MATRIX = [(key, p, want) for key, wants in CASES.items() for p, want in zip(P, wants, strict=True)]


@pytest.mark.parametrize("per_stage", [False, True], ids=["global", "per-stage"])
@pytest.mark.parametrize(
    ("key", "plat", "want"), MATRIX, ids=[f"{k[1]}-{k[2]}-{p}" for k, p, _ in MATRIX]
)
def test_resolution_matrix(key, plat, want, per_stage):
    stage, backend, device = key
    s = settings_for(stage, backend, device, per_stage)
    if want.startswith("!"):
        with pytest.raises(DeviceUnavailable) as info:
            resolve_device(stage, s, PLATFORMS[plat])
        assert want[1:] in str(info.value)
        # the message names where to fix it
        where = f"{stage}.device" if per_stage else "device"
        assert where in str(info.value) or backend in str(info.value)
    else:
        assert resolve_device(stage, s, PLATFORMS[plat]) == want


def test_stage_device_wins_over_global():
    s = Settings()
    s.device = "cuda"
    s.stt.device = "cpu"
    plat = PLATFORMS["linux_cuda2"]
    assert resolve_device("stt", s, plat) == "cpu"
    assert resolve_device("llm", s, plat) == "cuda"
    assert resolve_device("tts", s, plat) == "cuda"


def test_mixed_devices_on_one_mac():
    """The reference pipeline cannot mix: here MLX STT + torch TTS on MPS + llama.cpp on CPU."""
    s = Settings()
    s.stt.backend, s.tts.backend, s.llm.device = "mlx-whisper", "kokoro", "cpu"
    plat = PLATFORMS["mac_arm"]
    got = {st: resolve_device(st, s, plat) for st in ("vad", "stt", "llm", "tts")}
    assert got == {"vad": "cpu", "stt": "mlx", "llm": "cpu", "tts": "mps"}


def test_vad_stays_on_cpu_under_a_global_gpu_device():
    s = Settings()
    s.device = "cuda"
    assert resolve_device("vad", s, PLATFORMS["linux_cuda2"]) == "cpu"
    s.vad.device = "cuda"  # asked for explicitly: refused, the ONNX VAD is CPU-only here
    with pytest.raises(DeviceUnavailable, match="silero-onnx"):
        resolve_device("vad", s, PLATFORMS["linux_cuda2"])


@pytest.mark.parametrize("plat", P)
def test_remote_and_passthrough_backends_take_any_device(plat):
    s = Settings()
    s.device = "cuda"
    s.llm.backend = s.stt.backend = "openai"
    s.vad.backend = "none"
    for stage in ("vad", "stt", "llm"):
        assert resolve_device(stage, s, PLATFORMS[plat]) == "cpu"


def test_bad_device_strings_are_settings_errors():
    s = Settings()
    s.llm.device = "gpu"
    with pytest.raises(SettingsError, match="llm.device"):
        resolve_device("llm", s, PLATFORMS["linux_cpu"])
    s.llm.device = "cuda:x"
    with pytest.raises(SettingsError, match="cuda:0"):
        resolve_device("llm", s, PLATFORMS["linux_cuda2"])


def test_validate_devices_lists_each_problem_once():
    s = Settings()
    s.device = "cuda"
    s.llm.backend = "mlx-lm"
    problems = validate_devices(s, PLATFORMS["mac_arm"])
    assert len(problems) == 3  # stt, llm, tts; vad stays on the CPU
    assert all("macOS" in p for p in problems)
    s.device = "auto"
    assert validate_devices(s, PLATFORMS["mac_arm"]) == []
    problems = validate_devices(s, PLATFORMS["linux_cpu"])
    assert problems == [p for p in problems if p.startswith("llm:")] and len(problems) == 1
    assert "llama-cpp" in problems[0]


# ---------------------------------------------------------------- fallback to CPU


class FakeEngine:
    def __init__(self, device, fail_load=None, fail_warmup=None):
        self.name, self.device = "faster-whisper", device
        self.fail_load, self.fail_warmup = fail_load, fail_warmup
        self.loaded = self.warmed = self.unloaded = False

    def load(self):
        if self.fail_load and self.device != "cpu":
            raise self.fail_load
        self.loaded = True

    def warmup(self):
        if self.fail_warmup and self.device != "cpu":
            raise self.fail_warmup
        self.warmed = True

    def unload(self):
        self.unloaded = True


GPU_FAILURES = [
    RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    OSError("libcublas.so.12: cannot open shared object file: No such file or directory"),
    RuntimeError("Library libcudnn_ops.so.9 is not found or cannot be loaded"),
    RuntimeError("CUDA driver version is insufficient for CUDA runtime version"),
    DeviceUnavailable("no usable NVIDIA GPU found"),
    RuntimeError("[metal::malloc] Attempting to allocate 9000000000 bytes"),
    RuntimeError("MPS backend out of memory"),
]


@pytest.mark.parametrize("failure", GPU_FAILURES, ids=lambda e: str(e)[:30])
@pytest.mark.parametrize("when", ["load", "warmup"])
def test_gpu_failure_falls_back_to_cpu_with_a_notice(failure, when):
    made, notices = [], []

    def make(device):
        kw = {"fail_load": failure} if when == "load" else {"fail_warmup": failure}
        made.append(FakeEngine(device, **kw))
        return made[-1]

    engine = load_with_fallback(make, "cuda", notices.append)
    assert engine.device == "cpu" and engine.loaded and engine.warmed
    assert [e.device for e in made] == ["cuda", "cpu"]
    assert made[0].unloaded  # GPU memory handed back before the CPU copy
    assert len(notices) == 1
    assert notices[0].startswith("faster-whisper could not use cuda (")
    assert notices[0].endswith("; running on CPU instead")
    assert str(failure).split()[0] in notices[0]


@pytest.mark.parametrize(
    "error",
    [
        ModelNotFound("stt model not found"),
        ModelLoadError("corrupt"),
        BackendUnavailable("mlx-lm", "mlx-lm", "mlx"),
        ValueError("bad vocabulary"),
    ],
)
def test_non_gpu_errors_are_raised_unchanged(error):
    made, notices = [], []

    def make(device):
        made.append(FakeEngine(device, fail_load=error))
        return made[-1]

    with pytest.raises(type(error)) as info:
        load_with_fallback(make, "cuda", notices.append)
    assert info.value is error
    assert len(made) == 1 and notices == []


def test_no_fallback_from_cpu_itself():
    def make(device):
        e = FakeEngine(device)
        e.load = lambda: (_ for _ in ()).throw(RuntimeError("out of memory"))
        return e

    with pytest.raises(RuntimeError, match="out of memory"):
        load_with_fallback(make, "cpu", lambda m: pytest.fail(m))


def test_failure_while_building_the_engine_falls_back_too():
    def make(device):
        if device != "cpu":
            raise OSError("libcudart.so.12: cannot open shared object file")
        return FakeEngine(device)

    notices = []
    engine = load_with_fallback(make, "cuda:1", notices.append, label="stt/faster-whisper")
    assert engine.device == "cpu"
    assert notices[0].startswith("stt/faster-whisper could not use cuda:1 (libcudart")


def test_backend_without_cpu_mode_reports_both_reasons():
    def make(device):
        if device != "mlx":
            raise DeviceUnavailable("backend 'mlx-lm' runs only on mlx, not cpu")
        return FakeEngine(device, fail_load=RuntimeError("[metal::Device] out of memory"))

    with pytest.raises(DeviceUnavailable) as info:
        load_with_fallback(make, "mlx", lambda m: pytest.fail(m), label="llm/mlx-lm")
    assert "could not use mlx" in str(info.value) and "runs only on mlx" in str(info.value)


def test_is_gpu_failure_follows_the_cause_chain():
    try:
        try:
            raise RuntimeError("CUDA error: no kernel image is available for execution")
        except RuntimeError as inner:
            raise ValueError("model could not start") from inner
    except ValueError as exc:
        assert devices.is_gpu_failure(exc)
    assert not devices.is_gpu_failure(ValueError("bad config"))
    assert not devices.is_gpu_failure(ModelLoadError("CUDA-format file is corrupt"))


# ---------------------------------------------------------------- listing


def test_describe_is_json_and_tells_each_stage(monkeypatch):
    s = Settings()
    s.llm.backend = "mlx-lm"
    info = devices_cmd.describe(s, PLATFORMS["mac_arm"])
    json.dumps(info)  # the --json output
    assert info["stages"]["llm"]["device"] == "mlx"
    assert info["stages"]["tts"]["device"] == "cpu"  # piper has no Metal path
    kinds = [d["kind"] for d in info["compute"]]
    assert kinds[0] == "cpu" and "mlx" in kinds and "mps" in kinds
    assert info["compute"][0]["memory_bytes"] > 2**28
    assert "audio" in info or "audio_error" in info


def test_describe_without_portaudio_reports_audio_error(monkeypatch):
    class NoPortAudio:
        def find_spec(self, name, path=None, target=None):
            if name == "sounddevice":
                raise OSError("PortAudio library not found")
            return None

    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    monkeypatch.setattr(sys, "meta_path", [NoPortAudio(), *sys.meta_path])
    info = devices_cmd.describe(Settings(), PLATFORMS["linux_cpu"])
    assert "PortAudio" in info["audio_error"] and "libportaudio2" in info["audio_error"]
    assert info["stages"]["stt"]["device"] == "cpu"


def test_devices_command_prints_table_and_json(capsys):
    s = Settings()
    assert devices_cmd.devices_command(False, s, PLATFORMS["linux_cuda2"]) == 0
    out = capsys.readouterr().out
    assert "Compute devices:" in out and "Audio devices:" in out
    assert "faster-whisper" in out and "→ cuda" in out
    s.llm.device = "mps"
    assert devices_cmd.devices_command(True, s, PLATFORMS["linux_cpu"]) == 1
    info = json.loads(capsys.readouterr().out)
    assert "Apple Silicon" in info["stages"]["llm"]["error"]


@pytest.mark.parametrize("mps_works", [False, True])
def test_mps_is_what_torch_says_on_apple_silicon(tmp_path, monkeypatch, mps_works):
    """A Mac VM (GitHub's arm64 runners) or an old macOS has torch but no MPS: `auto` must not
    pick mps there. A stand-in torch, not yet imported, answers the question."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "import types\n"
        f"backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: {mps_works}))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "torch", None)  # the real torch (or none) comes back after
    del sys.modules["torch"]
    assert devices._has_mps("Darwin", "arm64") is mps_works
    assert devices._has_mps("Darwin", "x86_64") is False  # mps is offered on Apple Silicon only
    assert devices._has_mps("Linux", "x86_64") is False


def test_real_detection_is_cheap_and_does_not_import_torch():
    """Except on Apple Silicon with torch installed: only torch can say whether MPS works."""
    code = (
        "import sys, time; t = time.monotonic();"
        "from s2s_desktop import devices; p = devices.detect_platform();"
        "assert devices.detect_platform() is p;"  # cached
        "print(p.system, p.cuda_count, 'torch' in sys.modules, round(time.monotonic() - t, 2))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    asks_torch = (sys.platform == "darwin" and platform.machine() == "arm64"
                  and importlib.util.find_spec("torch") is not None)
    assert out[2] == str(asks_torch)
    assert float(out[3]) < 10


def test_gpu_check_script_refuses_without_cuda():
    if devices.detect_platform().cuda_count:
        pytest.skip("this machine has CUDA: run scripts/gpu_check.py itself")
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "no CUDA device found" in res.stderr and res.stdout == ""
