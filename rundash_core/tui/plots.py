"""Metrics as text: sparklines, a block-character line plot, and the rows of the metrics view (each
section's keys with their trend and last value), from the same sections and series the Metrics
page draws. No textual here."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rundash_core.charts.sections import sections_for
from rundash_core.charts.series import X_STEP, SeriesIndex
from rundash_core.numbers import floats

BARS = "▁▂▃▄▅▆▇█"
EIGHTHS = " ▁▂▃▄▅▆▇█"


def buckets(values, width: int) -> np.ndarray:
    """`values` (finite ones) squeezed into at most `width` points: each the mean of its bucket."""
    a = floats(values, drop_nonfinite=True)
    if len(a) <= width or width <= 0:
        return a
    edges = np.linspace(0, len(a), width + 1).astype(int)
    return np.add.reduceat(a, edges[:-1]) / np.diff(edges)


def sparkline(values, width: int = 24) -> str:
    """One line of bars, low to high; a flat series is a flat line; no finite value: empty."""
    a = buckets(values, width)
    if not len(a):
        return ""
    lo, hi = float(a.min()), float(a.max())
    if hi - lo <= 1e-12 * max(abs(hi), abs(lo), 1.0):
        return BARS[0] * len(a)
    idx = np.clip(((a - lo) / (hi - lo) * (len(BARS) - 1)).round().astype(int), 0, len(BARS) - 1)
    return "".join(BARS[i] for i in idx)


def column_plot(values, *, width: int = 60, height: int = 8) -> list[str]:
    """A filled plot of `height` lines (top first), one column per bucket, in eighth blocks; the
    lowest value is one eighth high, so every point shows."""
    a = buckets(values, width)
    if not len(a):
        return []
    lo, hi = float(a.min()), float(a.max())
    span = hi - lo if hi - lo > 1e-12 * max(abs(hi), abs(lo), 1.0) else 0.0
    levels = np.full(len(a), height * 8 // 2) if span == 0 else 1 + ((a - lo) / span * (height * 8 - 1)).round().astype(int)
    lines = []
    for row in range(height - 1, -1, -1):
        fill = np.clip(levels - row * 8, 0, 8)
        lines.append("".join(EIGHTHS[int(f)] for f in fill))
    return lines


def format_value(value: float | None) -> str:
    """A metric value in at most 4 significant digits (n/a for none)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.3e}"
    return f"{value:.4g}"


@dataclass(frozen=True)
class MetricRow:
    """One line of the metrics view: a key of a panel of a section, one producer's series."""

    section: str
    panel: str
    label: str  # the key, with its producer when two log it
    x: np.ndarray  # steps, or seconds since the run's first record for time-keyed keys
    y: np.ndarray
    x_kind: str

    @property
    def last(self) -> float | None:
        finite = np.flatnonzero(np.isfinite(self.y))
        return float(self.y[finite[-1]]) if len(finite) else None

    @property
    def last_x(self) -> str:
        finite = np.flatnonzero(np.isfinite(self.y))
        if not len(finite):
            return ""
        x = self.x[finite[-1]]
        return f"step {int(x)}" if self.x_kind == X_STEP else f"{x:,.0f} s"


def metric_rows(index: SeriesIndex, *, kind: str, flavor: str, train_envs=(), eval_envs=()) -> list[MetricRow]:
    """Every key of every section the run's metrics fill, in the Metrics page's order."""
    rows = []
    for section in sections_for(kind, flavor, index.metrics, train_envs=train_envs, eval_envs=eval_envs):
        for panel in section.panels:
            for key in panel.keys:
                for s in index.series(key, x=panel.x if panel.x in ("step", "time") else X_STEP):
                    rows.append(MetricRow(section.title, panel.title, s.label, s.x, s.y, s.x_kind))
    return rows
