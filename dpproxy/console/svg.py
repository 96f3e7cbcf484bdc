"""Small server-side SVG charts for the console: error bars and spend over time.

Pure functions from numbers to SVG text (no script, no external asset); every text they embed
is escaped. The pages inline them, so the console needs no JavaScript.
"""

from __future__ import annotations

import html
import math
from typing import Any

WIDTH, ROW, LEFT, RIGHT = 720, 26, 200, 40
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step) + 1)]


def error_bars(column: str, bars: list[dict[str, Any]]) -> str:
    """One row per released value: a dot at the value and a line over its 95% interval."""
    finite = [b for b in bars if math.isfinite(b["value"]) and math.isfinite(b["half_width"])]
    lo = min((b["value"] - b["half_width"] for b in finite), default=0.0)
    hi = max((b["value"] + b["half_width"] for b in finite), default=1.0)
    lo, hi = min(lo, 0.0) if lo >= 0 else lo, hi
    if hi <= lo:
        hi = lo + 1.0
    span = WIDTH - LEFT - RIGHT
    height = ROW * len(bars) + 40

    def x(v: float) -> float:
        return LEFT + (v - lo) / (hi - lo) * span

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="95% intervals of {_esc(column)}" class="errorbars">'
    ]
    for t in _ticks(lo, hi):
        parts.append(
            f'<line x1="{x(t):.1f}" y1="10" x2="{x(t):.1f}" y2="{height - 25}" stroke="#ddd"/>'
            f'<text x="{x(t):.1f}" y="{height - 8}" font-size="11" text-anchor="middle">'
            f"{_esc(f'{t:.4g}')}</text>"
        )
    for i, b in enumerate(bars):
        y = 20 + i * ROW
        parts.append(
            f'<text x="{LEFT - 8}" y="{y + 4}" font-size="12" text-anchor="end">'
            f"{_esc(b['label'])[:40]}</text>"
        )
        if not (math.isfinite(b["value"]) and math.isfinite(b["half_width"])):
            continue
        a, c = x(b["value"] - b["half_width"]), x(b["value"] + b["half_width"])
        parts.append(
            f'<line x1="{a:.1f}" y1="{y}" x2="{c:.1f}" y2="{y}" stroke="#555" stroke-width="2"/>'
            f'<line x1="{a:.1f}" y1="{y - 5}" x2="{a:.1f}" y2="{y + 5}" stroke="#555"/>'
            f'<line x1="{c:.1f}" y1="{y - 5}" x2="{c:.1f}" y2="{y + 5}" stroke="#555"/>'
            f'<circle cx="{x(b["value"]):.1f}" cy="{y}" r="4" fill="{PALETTE[0]}">'
            f"<title>{_esc(b['label'])}: {b['value']:.6g} ± {b['half_width']:.3g}</title>"
            "</circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def spend_lines(series: dict[str, list[tuple[float, float]]], height: int = 280) -> str:
    """Cumulative ε per analyst against time, one coloured step line each, with a legend."""
    points = [p for s in series.values() for p in s]
    if not points:
        return '<p class="empty">No release yet.</p>'
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    if t1 <= t0:
        t1 = t0 + 1.0
    top = max(max(p[1] for p in points), 1e-9)
    span_x, span_y = WIDTH - 80 - RIGHT, height - 60

    def x(t: float) -> float:
        return 60 + (t - t0) / (t1 - t0) * span_x

    def y(e: float) -> float:
        return 20 + (1 - e / top) * span_y

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        'role="img" aria-label="cumulative epsilon spent per analyst" class="spend">'
    ]
    for t in _ticks(0.0, top):
        parts.append(
            f'<line x1="60" y1="{y(t):.1f}" x2="{60 + span_x}" y2="{y(t):.1f}" stroke="#eee"/>'
            f'<text x="54" y="{y(t) + 4:.1f}" font-size="11" text-anchor="end">{t:.3g}</text>'
        )
    for k, (analyst, pts) in enumerate(sorted(series.items())):
        colour = PALETTE[k % len(PALETTE)]
        path = []
        last = 0.0
        for t, e in pts:
            path.append(f"{x(t):.1f},{y(last):.1f} {x(t):.1f},{y(e):.1f}")
            last = e
        path.append(f"{x(t1):.1f},{y(last):.1f}")
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(path)}"/>'
            f'<text x="{70 + span_x}" y="{30 + 16 * k}" font-size="12" fill="{colour}">'
            f"{_esc(analyst)}</text>"
        )
    parts.append(
        f'<text x="60" y="{height - 10}" font-size="11">ε spent (cumulative) over time, '
        f"{_esc(_day(t0))} … {_esc(_day(t1))}</text></svg>"
    )
    return "".join(parts)


def _day(t: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M")
