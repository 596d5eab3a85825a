"""The store page's charts, drawn as SVG on the server (no script, no library, nothing fetched):
a series of values becomes a line or bars with a value axis, gridlines and labels; a store's
state changes become a timeline with one lane per run. Pure functions of plain values.

Every mark carries a <title> (the browser shows it on hover) and the chart's root says what it
holds (data-kind, data-count), so a test counts what was drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 600, 170
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 12, 34
STATE_COLOURS = {
    "starting": "#a0aec0",
    "waiting_for_lease": "#ecc94b",
    "recovering": "#ed8936",
    "running": "#38a169",
    "stopping": "#718096",
    "stopped": "#4a5568",
    "failed": "#e53e3e",
    "refused": "#d53f8c",
}
TERMINAL = ("stopped", "failed", "refused")  # a run's last change of these is a tick, not a span


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at least `value` (1 for nothing)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value * (1 - 1e-12))


def figure(value: float) -> str:
    """A value as an axis or hover label: grouped digits, at most two decimals, no trailing zeros."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Point:
    value: float
    label: str  # what the point is, shown on hover with its value (e.g. "batch 12 · 04:41:07 UTC")


def series_chart(
    chart_id: str,
    points: Sequence[Point],
    *,
    title: str,
    unit: str,
    kind: str = "line",
    first: str = "",
    last: str = "",
    width: int = WIDTH,
    height: int = HEIGHT,
) -> Markup:
    """`points` (oldest first) as a line or as bars, with a value axis from 0 (ticks at 0, half
    and the top) and the first and last x labels under the plot (one point: its label once,
    under it)."""
    if kind not in ("line", "bars"):
        raise ValueError(f"kind is line or bars, not {kind!r}")
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    top = nice_ceiling(max((p.value for p in points), default=0.0))

    def y(value: float) -> float:
        return TOP + plot_h - max(0.0, value) / top * plot_h

    parts = [
        f'<svg class="chart" id="{escape(chart_id)}" data-kind="{kind}" data-count="{len(points)}"'
        f' width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img"'
        f' aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in (0.0, top / 2, top):
        ty = y(tick)
        parts.append(
            f'<line class="grid" x1="{LEFT}" y1="{ty:.1f}" x2="{width - RIGHT}" y2="{ty:.1f}"'
            ' stroke="#e2e8f0" stroke-width="1"/>'
            f'<text x="{LEFT - 6}" y="{ty + 4:.1f}" text-anchor="end" font-size="11" fill="#4a5568">'
            f"{escape(figure(tick))}</text>"
        )
    parts.append(
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#718096"/>'
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{width - RIGHT}" y2="{TOP + plot_h}"'
        ' stroke="#718096"/>'
        f'<text x="12" y="{TOP + plot_h / 2:.1f}" font-size="11" fill="#4a5568" text-anchor="middle"'
        f' transform="rotate(-90 12 {TOP + plot_h / 2:.1f})">{escape(unit)}</text>'
    )
    if len(points) == 1:  # one mark, in the middle: its label once, under it
        parts.append(
            f'<text x="{LEFT + plot_w / 2:.1f}" y="{height - 8}" font-size="11" fill="#4a5568"'
            f' text-anchor="middle">{escape(first or last)}</text>'
        )
    else:
        parts.append(
            f'<text x="{LEFT}" y="{height - 8}" font-size="11" fill="#4a5568">{escape(first)}</text>'
            f'<text x="{width - RIGHT}" y="{height - 8}" font-size="11" fill="#4a5568" text-anchor="end">'
            f"{escape(last)}</text>"
        )
    if not points:
        parts.append(
            f'<text class="empty" x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" text-anchor="middle"'
            ' font-size="12" fill="#718096">nothing recorded</text>'
        )
    elif kind == "line":
        step = plot_w / max(1, len(points) - 1)
        xs = [LEFT + (i * step if len(points) > 1 else plot_w / 2) for i in range(len(points))]
        coords = " ".join(f"{x:.1f},{y(p.value):.1f}" for x, p in zip(xs, points, strict=True))
        parts.append(f'<polyline class="series" fill="none" stroke="#2b6cb0" stroke-width="2" points="{coords}"/>')
        for x, p in zip(xs, points, strict=True):
            parts.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y(p.value):.1f}" r="3" fill="#2b6cb0">'
                f"<title>{escape(p.label)}: {escape(figure(p.value))} {escape(unit)}</title></circle>"
            )
    else:
        slot = plot_w / len(points)
        bar = max(1.0, slot * 0.7)
        for i, p in enumerate(points):
            by = y(p.value)
            parts.append(
                f'<rect class="bar" x="{LEFT + i * slot + (slot - bar) / 2:.1f}" y="{by:.1f}" width="{bar:.1f}"'
                f' height="{TOP + plot_h - by:.1f}" fill="#3182ce" data-value="{p.value:g}">'
                f"<title>{escape(p.label)}: {escape(figure(p.value))} {escape(unit)}</title></rect>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass(frozen=True)
class Change:
    state: str
    at_ms: int
    run: str  # the lane: the run's writer name (or run id)
    label: str  # shown on hover: the state, its time, its reason


def timeline(
    chart_id: str, changes: Sequence[Change], now_ms: int, *, first: str = "", last: str = "", width: int = WIDTH
) -> Markup:
    """The state changes (any order) on a time axis up to `now_ms`, one lane per run, oldest run
    on top: each change spans until the run's next change (its last until now, or a tick when
    the run ended: stopped, failed, refused)."""
    ordered = sorted(changes, key=lambda c: c.at_ms)
    runs = list(dict.fromkeys(c.run for c in ordered))
    lane_h, label_w = 20, 150
    height = TOP + max(1, len(runs)) * lane_h + BOTTOM
    x0, x1 = LEFT + label_w - 40, width - RIGHT
    start = ordered[0].at_ms if ordered else now_ms - 3_600_000
    span = max(1, now_ms - start)

    def x(at_ms: int) -> float:
        return x0 + (min(max(at_ms, start), now_ms) - start) / span * (x1 - x0)

    parts = [
        f'<svg class="timeline" id="{escape(chart_id)}" data-kind="timeline" data-count="{len(ordered)}"'
        f' width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img"'
        ' aria-label="state changes per run" xmlns="http://www.w3.org/2000/svg">',
        "<title>state changes per run</title>",
    ]
    for lane, run in enumerate(runs):
        ly = TOP + lane * lane_h
        short = run if len(run) <= 22 else "…" + run[-21:]
        parts.append(
            f'<text x="{x0 - 6}" y="{ly + 14}" text-anchor="end" font-size="11" fill="#4a5568">'
            f"<title>{escape(run)}</title>{escape(short)}</text>"
        )
        own = [c for c in ordered if c.run == run]
        for i, c in enumerate(own):
            left = x(c.at_ms)
            if i + 1 < len(own):
                right = x(own[i + 1].at_ms)
            else:
                right = left + 4 if c.state in TERMINAL else x(now_ms)
            colour = STATE_COLOURS.get(c.state, "#a0aec0")
            parts.append(
                f'<rect class="state-change" data-state="{escape(c.state)}" x="{left:.1f}" y="{ly + 3}"'
                f' width="{max(3.0, right - left):.1f}" height="{lane_h - 6}" fill="{colour}">'
                f"<title>{escape(c.label)}</title></rect>"
            )
    axis_y = TOP + max(1, len(runs)) * lane_h + 4
    parts.append(
        f'<line class="axis" x1="{x0}" y1="{axis_y}" x2="{x1}" y2="{axis_y}" stroke="#718096"/>'
        f'<text x="{x0}" y="{height - 8}" font-size="11" fill="#4a5568">{escape(first)}</text>'
        f'<text x="{x1}" y="{height - 8}" font-size="11" fill="#4a5568" text-anchor="end">{escape(last)}</text>'
    )
    if not ordered:
        parts.append(
            f'<text class="empty" x="{(x0 + x1) / 2:.1f}" y="{TOP + 14}" text-anchor="middle" font-size="12"'
            ' fill="#718096">no state recorded</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
