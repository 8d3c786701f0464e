"""The CPU shared by the LLM and TTS while a reply plays.

After the first piece the LLM writes the next pieces while TTS speaks the earlier ones; on few
cores both at full width slow each other (2 cores, starter set: LLM 54 tokens/s, TTS 0.10 s
per s of audio). With the LLM on half the cores while TTS synthesizes, both do better (68
tokens/s, 0.08), and alone each keeps every core (scripts/measure_contention.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .. import host


class CoreShare:
    def __init__(self, cpus: int | None = None):
        self.cpus = cpus or host.cpu_count()
        self._synthesizing = threading.Event()

    @contextmanager
    def synthesizing(self, on_cpu: bool) -> Iterator[None]:
        """Around one piece of CPU speech synthesis (a GPU voice leaves the cores alone)."""
        if not on_cpu:
            yield
            return
        self._synthesizing.set()
        try:
            yield
        finally:
            self._synthesizing.clear()

    def llm_threads(self, configured: int) -> int:
        """Threads for the LLM's next token: half the cores while TTS synthesizes on the CPU,
        else what it was loaded with (0). A user's own llm.threads is left alone."""
        if configured or not self._synthesizing.is_set():
            return 0
        return max(1, self.cpus // 2)
