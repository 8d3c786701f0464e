"""The progress line the download commands print (models, cuda)."""

from __future__ import annotations

import sys
import time

from ..models.download import DownloadProgress, human_size


class ProgressLine:
    """One line that updates in place on a terminal; a line every ~10% otherwise. Subclasses
    say what a progress report reads as (`line`) and when a new line is due off a terminal
    (`step`)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_step = None
        self.last_t = 0.0
        self.open = False  # a line is drawn on the terminal and wants its newline at the end

    def line(self, p: DownloadProgress) -> str:
        return (
            f"{percent(p.fraction)} {human_size(p.done)} / {human_size(p.total)} "
            f"{human_size(p.speed_bps)}/s  {p.filename}"
        )

    def step(self, p: DownloadProgress):
        return int(10 * p.fraction) if p.fraction is not None else p.done // (50 * 10**6)

    def __call__(self, p) -> None:
        if self.tty:
            now = time.monotonic()
            if now - self.last_t >= 0.2 or p.done == p.total:
                self.last_t = now
                self.stream.write("\r" + self.line(p)[:120].ljust(120))
                self.stream.flush()
                self.open = True
            return
        step = self.step(p)
        if step != self.last_step:
            self.last_step = step
            print(self.line(p), file=self.stream, flush=True)

    def end(self) -> None:
        if self.tty and self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False


def percent(fraction: float | None) -> str:
    return f"{100 * fraction:5.1f}%" if fraction is not None else "     "
