"""A real X screen (Xvfb) and a real sound server (PulseAudio with null sinks) for tests and
screenshots, each private to the caller and always stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np


def missing(*programs: str) -> str:
    """The first program not on PATH ('' when all are there)."""
    return next((p for p in programs if shutil.which(p) is None), "")


@contextlib.contextmanager
def xvfb(size: str = "1280x800x24", timeout_s: float = 15.0):
    """Start Xvfb on a free display; yields the DISPLAY string (":N")."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", size, "-nolisten", "tcp"],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    try:
        number = b""
        deadline = time.monotonic() + timeout_s
        os.set_blocking(read_fd, False)
        while not number.endswith(b"\n"):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("Xvfb did not start")
            try:
                chunk = os.read(read_fd, 16)
            except BlockingIOError:
                time.sleep(0.05)
                continue
            if not chunk:
                raise RuntimeError("Xvfb closed its display pipe")
            number += chunk
        yield f":{number.decode().strip()}"
    finally:
        os.close(read_fd)
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def pulseaudio(root: Path, sinks: tuple[str, ...] = ("spk", "micsrc"), timeout_s: float = 15.0):
    """A private PulseAudio server with null sinks; yields the env a client needs
    (PULSE_SERVER, plus PULSE_RUNTIME_PATH so nothing touches the user's own server)."""
    root.mkdir(parents=True, exist_ok=True)
    sock = root / "native"
    env = dict(
        os.environ,
        PULSE_RUNTIME_PATH=str(root / "run"),
        PULSE_STATE_PATH=str(root / "state"),
        HOME=str(root),
    )
    cmd = [
        "pulseaudio",
        "-n",
        "--daemonize=no",
        "--exit-idle-time=-1",
        "--log-target=stderr",
        f"--load=module-native-protocol-unix auth-anonymous=1 socket={sock}",
    ]
    cmd += [f"--load=module-null-sink sink_name={name} rate=48000" for name in sinks]
    log = open(root / "pulseaudio.log", "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
    client_env = {"PULSE_SERVER": f"unix:{sock}", "PULSE_RUNTIME_PATH": str(root / "run")}
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            ok = (
                subprocess.run(
                    ["pactl", "info"], env=dict(os.environ, **client_env), capture_output=True
                ).returncode
                == 0
            )
            if ok:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "pulseaudio did not start: " + (root / "pulseaudio.log").read_text()[-500:]
                )
            time.sleep(0.1)
        yield client_env
    finally:
        subprocess.run(
            ["pactl", "exit"], env=dict(os.environ, **client_env), capture_output=True, timeout=10
        )
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


RATE = 16000  # what the speaker's monitor is recorded at
LOUD = 0.01  # |sample| above this is sound (the null sink's monitor is exact zeros otherwise)


class MonitorRecorder:
    """parec on spk.monitor, read in a thread; every chunk is stamped with the monotonic time
    it arrived, so a sample's time is known to about one chunk (20 ms)."""

    def __init__(self, env: dict, device: str = "spk.monitor"):
        self.proc = subprocess.Popen(
            [
                "parec",
                f"--device={device}",
                "--raw",
                f"--rate={RATE}",
                "--channels=1",
                "--format=s16le",
                "--latency-msec=10",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._lock = threading.Lock()
        self.chunks: list[tuple[float, np.ndarray]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            data = (
                self.proc.stdout.read1(640)
                if hasattr(self.proc.stdout, "read1")
                else self.proc.stdout.read(640)
            )
            if not data:
                return
            now = time.monotonic()
            pcm = np.frombuffer(data[: len(data) // 2 * 2], np.int16).astype(np.float32) / 32768
            with self._lock:
                self.chunks.append((now, pcm))

    def samples(self, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
        """(times, samples) of what was heard between t0 and t1."""
        with self._lock:
            chunks = list(self.chunks)
        times, parts = [], []
        for arrived, pcm in chunks:
            t = arrived - (len(pcm) - np.arange(len(pcm))) / RATE
            keep = (t >= t0) & (t <= t1)
            if keep.any():
                times.append(t[keep])
                parts.append(pcm[keep])
        if not parts:
            return np.zeros(0), np.zeros(0, np.float32)
        return np.concatenate(times), np.concatenate(parts)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def onset(times: np.ndarray, pcm: np.ndarray) -> float | None:
    loud = np.flatnonzero(np.abs(pcm) > LOUD)
    return float(times[loud[0]]) if loud.size else None
