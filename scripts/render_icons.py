"""Render the tray icons (resources/icons/<state>-<size>.png) with QPainter.

    QT_QPA_PLATFORM=offscreen python scripts/render_icons.py [--sheet docs/screenshots/icons.png]

Each state has its own colour *and* shape, with a dark rim and a light halo, so it reads on
light and dark menu bars and for colour-blind users: idle (slate disc, microphone), listening
(red disc, filled microphone), thinking (blue disc, three dots), speaking (green disc, speaker
with waves), error (yellow triangle, "!"), loading (grey disc, a ring not yet closed),
hands-free (purple disc, filled microphone between sound waves: open, waiting for a voice).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QGuiApplication, QImage, QPainter, QPainterPath, QPen

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "resources" / "icons"
SIZES = (16, 22, 32, 48, 64, 128)
STATES = ("idle", "listening", "thinking", "speaking", "error", "loading", "hands-free")
FILL = {
    "idle": "#52657d",
    "listening": "#e53935",
    "thinking": "#1e7fd8",
    "speaking": "#2e9e4f",
    "error": "#ffc107",
    "loading": "#8a8f96",
    "hands-free": "#7b3fb5",
}
GLYPH = {"error": "#1b1b1b"}  # everything else draws its glyph in white
RIM = QColor(0, 0, 0, 150)
HALO = QColor(255, 255, 255, 110)


def _pen(color, width):
    pen = QPen(QColor(color), width)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    return pen


def _badge(p: QPainter, s: float, state: str) -> None:
    rim = max(1.0, s / 22)
    if state == "error":
        path = QPainterPath()
        m = s * 0.06
        path.moveTo(s / 2, m)
        path.lineTo(s - m, s - m * 1.3)
        path.lineTo(m, s - m * 1.3)
        path.closeSubpath()
        p.setPen(_pen(HALO, rim * 2.6))
        p.drawPath(path)
        p.setPen(_pen(RIM, rim))
        p.setBrush(QColor(FILL[state]))
        p.drawPath(path)
        return
    r = QRectF(s * 0.05, s * 0.05, s * 0.9, s * 0.9)
    p.setPen(QPen(HALO, rim * 2.2))
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawEllipse(r)
    p.setPen(QPen(RIM, rim))
    p.setBrush(QColor(FILL[state]))
    p.drawEllipse(r)


def _microphone(p: QPainter, s: float, color: str, filled: bool) -> None:
    w = max(1.4, s * 0.075)
    cap = QRectF(s * 0.40, s * 0.20, s * 0.20, s * 0.36)
    p.setPen(_pen(color, w))
    p.setBrush(QColor(color) if filled else Qt.BrushStyle.NoBrush)
    p.drawRoundedRect(cap, s * 0.10, s * 0.10)
    p.setBrush(Qt.BrushStyle.NoBrush)
    arc = QRectF(s * 0.31, s * 0.30, s * 0.38, s * 0.36)
    p.drawArc(arc, 200 * 16, 140 * 16)  # the holder, under the capsule
    p.drawLine(QPointF(s * 0.5, s * 0.66), QPointF(s * 0.5, s * 0.76))
    p.drawLine(QPointF(s * 0.39, s * 0.77), QPointF(s * 0.61, s * 0.77))


def _waves(p: QPainter, s: float, color: str) -> None:
    """A sound wave on each side of the microphone: it hears the room, no key needed."""
    p.setPen(_pen(color, max(1.2, s * 0.06)))
    p.setBrush(Qt.BrushStyle.NoBrush)
    for inset in (0.19, 0.10):  # two waves a side, clear of the microphone's holder
        box = QRectF(s * inset, s * (inset + 0.10), s * (1 - 2 * inset), s * (0.66 - 2 * inset))
        p.drawArc(box, 145 * 16, 70 * 16)  # left
        p.drawArc(box, -35 * 16, 70 * 16)  # right


def _dots(p: QPainter, s: float, color: str) -> None:
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(color))
    rad = max(1.3, s * 0.075)
    for x in (0.30, 0.50, 0.70):
        p.drawEllipse(QPointF(s * x, s * 0.5), rad, rad)


def _speaker(p: QPainter, s: float, color: str) -> None:
    body = QPainterPath()
    body.moveTo(s * 0.24, s * 0.42)
    body.lineTo(s * 0.34, s * 0.42)
    body.lineTo(s * 0.48, s * 0.29)
    body.lineTo(s * 0.48, s * 0.71)
    body.lineTo(s * 0.34, s * 0.58)
    body.lineTo(s * 0.24, s * 0.58)
    body.closeSubpath()
    p.setPen(_pen(color, max(1.0, s * 0.04)))
    p.setBrush(QColor(color))
    p.drawPath(body)
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.setPen(_pen(color, max(1.3, s * 0.06)))
    for rad in (0.12, 0.22):
        box = QRectF(s * (0.50 - rad), s * (0.5 - rad), s * rad * 2, s * rad * 2)
        p.drawArc(box, -50 * 16, 100 * 16)


def _exclamation(p: QPainter, s: float, color: str) -> None:
    w = max(1.6, s * 0.10)
    p.setPen(_pen(color, w))
    p.drawLine(QPointF(s * 0.5, s * 0.36), QPointF(s * 0.5, s * 0.60))
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(color))
    p.drawEllipse(QPointF(s * 0.5, s * 0.74), w * 0.6, w * 0.6)


def _ring(p: QPainter, s: float, color: str) -> None:
    p.setPen(_pen(color, max(1.4, s * 0.08)))
    p.setBrush(Qt.BrushStyle.NoBrush)
    box = QRectF(s * 0.28, s * 0.28, s * 0.44, s * 0.44)
    p.drawArc(box, 90 * 16, -270 * 16)
    # the arrow head where the ring stops
    a = math.radians(0)
    tip = QPointF(s * 0.5 + s * 0.22 * math.cos(a), s * 0.5 - s * 0.22 * math.sin(a))
    p.setBrush(QColor(color))
    head = QPainterPath()
    head.moveTo(tip + QPointF(-s * 0.09, -s * 0.02))
    head.lineTo(tip + QPointF(s * 0.09, -s * 0.02))
    head.lineTo(tip + QPointF(0, s * 0.10))
    head.closeSubpath()
    p.drawPath(head)


def draw(state: str, size: int) -> QImage:
    img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = float(size)
    _badge(p, s, state)
    color = GLYPH.get(state, "#ffffff")
    if state in ("idle", "listening", "hands-free"):
        _microphone(p, s, color, filled=state != "idle")
        if state == "hands-free":
            _waves(p, s, color)
    elif state == "thinking":
        _dots(p, s, color)
    elif state == "speaking":
        _speaker(p, s, color)
    elif state == "error":
        _exclamation(p, s, color)
    else:
        _ring(p, s, color)
    p.end()
    return img


def contact_sheet(path: Path) -> None:
    """All icons at 22 and 64 px on a light and a dark bar, to look at."""
    cell = 80
    sheet = QImage(cell * len(STATES), cell * 2, QImage.Format.Format_ARGB32)
    p = QPainter(sheet)
    for row, bar in enumerate(("#f2f2f2", "#202124")):
        p.fillRect(0, row * cell, sheet.width(), cell, QBrush(QColor(bar)))
        for col, state in enumerate(STATES):
            p.drawImage(col * cell + 4, row * cell + 8, draw(state, 64))
            p.drawImage(col * cell + 54, row * cell + 52, draw(state, 22))
    p.end()
    sheet.save(str(path))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sheet", help="also write a contact sheet PNG here")
    args = parser.parse_args()
    app = QGuiApplication.instance() or QGuiApplication(sys.argv)  # noqa: F841
    OUT.mkdir(parents=True, exist_ok=True)
    for state in STATES:
        for size in SIZES:
            draw(state, size).save(str(OUT / f"{state}-{size}.png"))
    if args.sheet:
        Path(args.sheet).parent.mkdir(parents=True, exist_ok=True)
        contact_sheet(Path(args.sheet))
    print(f"wrote {len(STATES) * len(SIZES)} icons to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
