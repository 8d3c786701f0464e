"""Which device MLX really runs on here (CI's macOS job). GitHub's arm64 macOS runners are
virtual machines: no MPS, and Metal is a paravirtual device. This tries MLX's GPU device in a
child process (a refused Metal may abort rather than raise), checks its answer against numpy,
times it and MLX's CPU device, and says which one the MLX tests will use and why, in the log,
the job summary and as the step output `device` (gpu or cpu). Never a silent fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

N, REPEATS = 1024, 10


def measure(kind: str) -> dict:
    """Matrix products on one MLX device: GFLOP/s and whether the result is right."""
    import mlx.core as mx
    import numpy as np

    mx.set_default_device(mx.gpu if kind == "gpu" else mx.cpu)
    a = np.random.default_rng(0).standard_normal((N, N)).astype(np.float32)
    x = mx.array(a)
    got = np.array(x @ x)  # first use: compiles kernels, allocates
    right = bool(np.allclose(got, a @ a, rtol=1e-3, atol=1e-2))
    t0 = time.perf_counter()
    for _ in range(REPEATS):
        mx.eval(x @ x)
    seconds = time.perf_counter() - t0
    out = {"device": str(mx.default_device()), "right": right,
           "gflops": round(2 * N**3 * REPEATS / seconds / 1e9, 1)}
    metal = getattr(mx, "metal", None)
    if kind == "gpu" and metal is not None and hasattr(metal, "device_info"):
        info = metal.device_info()
        out["gpu"] = {k: info[k] for k in ("device_name", "architecture", "memory_size")
                      if k in info}
    return out


def try_in_child(kind: str) -> tuple[dict | None, str]:
    proc = subprocess.run([sys.executable, __file__, "--measure", kind], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if not result["right"]:
        return None, f"wrong results on {result['device']}"
    return result, ""


def main() -> int:
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure(sys.argv[2])))
        return 0
    import mlx.core as mx

    metal = getattr(mx, "metal", None)
    available = bool(metal is not None and hasattr(metal, "is_available") and metal.is_available())
    gpu, why = try_in_child("gpu") if available else (None, "mx.metal.is_available() is False")
    cpu, cpu_why = try_in_child("cpu")
    if cpu is None:
        print(f"MLX's CPU device failed too: {cpu_why}", file=sys.stderr)
        return 1
    device = "gpu" if gpu else "cpu"
    lines = [f"MLX {getattr(mx, '__version__', '?')}, Metal available: {available}"]
    if gpu:
        lines.append(f"GPU device ran: {gpu['device']} {gpu.get('gpu', {})}, "
                     f"{gpu['gflops']} GFLOP/s on {N}x{N} float32 products")
    else:
        lines.append(f"**GPU device refused: {why}. The MLX tests run on MLX's CPU device.**")
    lines.append(f"CPU device: {cpu['gflops']} GFLOP/s on the same products")
    lines.append(f"MLX tests run with S2S_TEST_MLX_DEVICE={device}")
    print("\n".join(lines))
    for var, text in (("GITHUB_OUTPUT", f"device={device}\n"),
                      ("GITHUB_STEP_SUMMARY", "### MLX device\n\n"
                       + "\n".join(f"- {x}" for x in lines) + "\n\n")):
        if os.environ.get(var):
            with open(os.environ[var], "a", encoding="utf-8") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
