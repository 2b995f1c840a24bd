"""An SVG scatter plot of maintenance time against delta size (pure: data in, markup out)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

COLORS = {"incremental": "#2e7d32", "full": "#c62828"}
WIDTH, HEIGHT, MARGIN = 560, 260, 48


@dataclass(frozen=True)
class Point:
    sketch: str
    strategy: str
    delta_rows: int
    seconds: float


def _log_scale(values: Sequence[float], low: float, high: float) -> tuple[float, float]:
    """Bounds of a log axis covering ``values`` (at least one decade)."""
    positive = [v for v in values if v > 0] or [1.0]
    lo = 10 ** math.floor(math.log10(min(positive)))
    hi = 10 ** math.ceil(math.log10(max(positive)))
    if hi <= lo:
        hi = lo * 10
    return max(lo, low), max(hi, high)


def scatter(points: Sequence[Point]) -> str:
    """Log-log scatter, one color per strategy, a title on every point for its figures."""
    if not points:
        return '<p class="empty">No maintenance runs yet.</p>'
    x_lo, x_hi = _log_scale([p.delta_rows for p in points], 1, 10)
    y_lo, y_hi = _log_scale([p.seconds for p in points], 1e-3, 1e-2)

    def x(value: float) -> float:
        span = math.log10(x_hi) - math.log10(x_lo)
        return MARGIN + (math.log10(max(value, x_lo)) - math.log10(x_lo)) / span * (WIDTH - 2 * MARGIN)

    def y(value: float) -> float:
        span = math.log10(y_hi) - math.log10(y_lo)
        return (
            HEIGHT - MARGIN - (math.log10(max(value, y_lo)) - math.log10(y_lo)) / span * (HEIGHT - 2 * MARGIN)
        )

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-label="maintenance time against delta size">',
        f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" '
        'stroke="#888"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{HEIGHT - MARGIN}" stroke="#888"/>',
    ]
    decade = x_lo
    while decade <= x_hi:
        parts.append(
            f'<text x="{x(decade):.1f}" y="{HEIGHT - MARGIN + 16}" text-anchor="middle">{decade:g}</text>'
        )
        decade *= 10
    decade = y_lo
    while decade <= y_hi:
        parts.append(f'<text x="{MARGIN - 6}" y="{y(decade) + 4:.1f}" text-anchor="end">{decade:g}s</text>')
        decade *= 10
    parts.append(
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">delta rows</text>'
        f'<text x="12" y="{HEIGHT / 2}" transform="rotate(-90 12 {HEIGHT / 2})" text-anchor="middle">'
        "seconds</text>"
    )
    for p in points:
        color = COLORS.get(p.strategy, "#555")
        title = escape(f"{p.sketch}: {p.strategy}, {p.delta_rows:,} rows, {p.seconds:.3f} s")
        parts.append(
            f'<circle class="run {escape(p.strategy)}" cx="{x(p.delta_rows):.1f}" '
            f'cy="{y(p.seconds):.1f}" r="4" fill="{color}"><title>{title}</title></circle>'
        )
    legend_x = WIDTH - MARGIN - 110
    for i, (strategy, color) in enumerate(COLORS.items()):
        parts.append(
            f'<circle cx="{legend_x}" cy="{MARGIN + 14 * i}" r="4" fill="{color}"/>'
            f'<text x="{legend_x + 8}" y="{MARGIN + 4 + 14 * i}">{strategy}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
