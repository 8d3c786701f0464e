"""A real X screen (Xvfb) and a real sound server (PulseAudio with null sinks) for tests and
screenshots, each private to the caller and always stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path


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
