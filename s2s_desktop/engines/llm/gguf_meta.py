"""One metadata value of a GGUF file read from its header, without loading the model (the
chat template, to tell whether the model can call tools before it is loaded)."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

# GGUF value types → struct format of a scalar (8 = string, 9 = array)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
STRING, ARRAY = 8, 9
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


class _Header:
    """Reads values at a moving offset of the mapped file (no copies: the token list of a
    150k-word vocabulary is skipped in a fraction of a second)."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def u32(self) -> int:
        value = _U32.unpack_from(self.data, self.at)[0]
        self.at += 4
        return value

    def u64(self) -> int:
        value = _U64.unpack_from(self.data, self.at)[0]
        self.at += 8
        return value

    def string(self) -> bytes:
        n = self.u64()
        value = self.data[self.at : self.at + n]
        self.at += n
        return bytes(value)

    def skip(self, kind: int) -> None:
        if kind == STRING:
            n = self.u64()  # read before the offset moves on
            self.at += n
        elif kind == ARRAY:
            item, count = self.u32(), self.u64()
            if item in _SCALARS:
                self.at += struct.calcsize("<" + _SCALARS[item]) * count
            else:
                for _ in range(count):
                    self.skip(item)
        elif kind in _SCALARS:
            self.at += struct.calcsize("<" + _SCALARS[kind])
        else:
            raise ValueError(f"unknown GGUF value type {kind}")
        if self.at > len(self.data):
            raise ValueError("the GGUF header ends early")


def gguf_string(path: Path, key: str) -> str | None:
    """The string value of `key` in the GGUF file's metadata; None when it has none. Raises
    OSError or ValueError for a file that is not a readable GGUF."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"GGUF":
            raise ValueError(f"{path.name} is not a GGUF file")
        head = _Header(memoryview(data))
        try:
            head.at = 4
            if head.u32() < 2:
                raise ValueError(f"{path.name} is a GGUF file too old to read (version 1)")
            head.u64()  # tensor count
            for _ in range(head.u64()):
                name = head.string().decode("utf-8", "replace")
                kind = head.u32()
                if name == key and kind == STRING:
                    return head.string().decode("utf-8", "replace")
                head.skip(kind)
        except struct.error as exc:
            raise ValueError(f"{path.name}: the GGUF header ends early") from exc
        finally:
            head.data.release()
    return None
