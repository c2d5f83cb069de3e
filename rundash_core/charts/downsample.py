"""Min/max downsampling: at most MAX_POINTS points per series reach the browser, spikes included.

Buckets are equal slices of the x range (not equal point counts): a bucket is then a fixed slice
of the plot's width, like a pixel column, so the band keeps the same visual resolution wherever
points are dense or sparse (wall-time axes with stalls, logging-rate changes), and a burst of
points cannot take most of the budget. Each bucket keeps its exact min and max of the raw y (the
band), so the largest spike of a 100k-step series is still drawn; the line is the bucket mean of
the smoothed series, which was computed at full resolution before this step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rundash_core.numbers import floats

MAX_POINTS = 1500


@dataclass(frozen=True)
class Downsampled:
    """One series ready to draw.

    x: bucket mean x of the points with finite y (the points themselves when not bucketed).
    y: the line: mean of y_line (the smoothed series) over the bucket, else the mean of y.
    y_min / y_max: the raw y envelope of the bucket (equal to raw y when not bucketed).
    n_in: input length; bucketed: whether buckets were formed (draw the band only then).
    """

    x: np.ndarray
    y: np.ndarray
    y_min: np.ndarray
    y_max: np.ndarray
    n_in: int
    bucketed: bool


def minmax_downsample(x, y, *, max_points: int = MAX_POINTS, y_line=None) -> Downsampled:
    """Reduce a series to at most max_points buckets over the x range, keeping min and max.

    Up to max_points input points the series comes back unchanged (NaN gaps included, so the
    line breaks there). Above it, points with non-finite x or y are dropped, the x range is cut
    into max_points equal buckets and empty buckets disappear, so the output never exceeds
    max_points. One vectorised pass (np.*.reduceat), no loop over points.
    """
    x, y = floats(x), floats(y)
    n = y.size
    if x.size != n:
        raise ValueError(f"x and y differ in length ({x.size} != {n})")
    line = y if y_line is None else floats(y_line)
    if line.size != n:
        raise ValueError(f"y_line and y differ in length ({line.size} != {n})")
    max_points = max(int(max_points), 1)
    if n <= max_points:
        raw = np.where(np.isfinite(y), y, np.nan)
        return Downsampled(x.copy(), np.where(np.isfinite(line), line, np.nan), raw, raw.copy(), n, False)

    ok = np.isfinite(x) & np.isfinite(y)
    xs, ys, ls = x[ok], y[ok], line[ok]
    if xs.size and np.any(np.diff(xs) < 0):  # callers sort; stay correct if one does not
        order = np.argsort(xs, kind="stable")
        xs, ys, ls = xs[order], ys[order], ls[order]
    if xs.size == 0:
        empty = np.empty(0)
        return Downsampled(empty, empty.copy(), empty.copy(), empty.copy(), n, True)

    span = xs[-1] - xs[0]
    if span > 0:
        # Multiply before dividing: bucket edges that fall on data x land exactly, not 1 ulp low.
        bucket = np.floor((xs - xs[0]) * max_points / span).astype(np.int64)
        np.minimum(bucket, max_points - 1, out=bucket)  # the last x closes the last bucket
    else:
        bucket = np.zeros(xs.size, dtype=np.int64)
    starts = np.flatnonzero(np.diff(bucket, prepend=-1))
    counts = np.diff(starts, append=xs.size)

    bx = np.add.reduceat(xs, starts) / counts
    lo = np.minimum.reduceat(ys, starts)
    hi = np.maximum.reduceat(ys, starts)
    line_ok = np.isfinite(ls)
    line_sum = np.add.reduceat(np.where(line_ok, ls, 0.0), starts)
    line_n = np.add.reduceat(line_ok.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        by = np.where(line_n > 0, line_sum / np.maximum(line_n, 1), np.nan)
    return Downsampled(bx, by, lo, hi, n, True)
