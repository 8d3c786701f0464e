"""Which torch dtype an engine loads its weights in, by device (a helper for the torch engines;
devices.py, above the engines, decides the device itself)."""

from __future__ import annotations


def torch_dtype_name(device: str) -> str:
    """float16/bfloat16 by GPU capability; float32 on the CPU (half is slow there)."""
    if device.startswith("cuda"):
        import torch

        index = int(device.partition(":")[2] or 0)
        major, _ = torch.cuda.get_device_capability(index)
        return "bfloat16" if major >= 8 else "float16"
    return "float16" if device == "mps" else "float32"
