"""Axis helpers: relative wall time and its unit, the outlier-clipped y range, log-safe values."""
from __future__ import annotations

import math

import numpy as np

# (unit, seconds per unit, spans below this many seconds use it): a 90-minute run reads in
# minutes, a 30-hour run in hours; past two days, days.
_UNITS = (("s", 1.0, 120.0), ("m", 60.0, 2 * 3600.0), ("h", 3600.0, 2 * 86400.0))
_DAY = ("d", 86400.0)

_MIN_FINITE = 10  # fewer points than this: no quantile is meaningful, keep the full range
_PAD = 0.05  # fraction of the clipped span added on each side so the extremes are not on the frame


def relative_seconds(t) -> np.ndarray:
    """Epoch seconds -> seconds since the first finite time (non-finite stays NaN)."""
    t = np.asarray(t, dtype=float).reshape(-1)
    ok = np.isfinite(t)
    if not ok.any():
        return np.full(t.shape, np.nan)
    return np.where(ok, t - t[np.argmax(ok)], np.nan)


def time_unit(span_seconds: float) -> tuple[str, float]:
    """The unit ("s", "m", "h" or "d") and its divisor for a relative-time axis of this span."""
    span = float(span_seconds)
    if not math.isfinite(span) or span < 0:
        return _UNITS[0][:2]
    for unit, divisor, below in _UNITS:
        if span < below:
            return unit, divisor
    return _DAY


def format_duration_tick(seconds: float) -> str:
    """A compact duration label: "0.5s", "42s", "5m 30s", "3h 20m", "2d 4h" ("" if not finite).

    Two units at most, the smaller one only when non-zero, so hover labels stay short.
    """
    s = float(seconds)
    if not math.isfinite(s):
        return ""
    sign = "-" if s < 0 else ""
    s = abs(s)
    if s < 60 and round(s) != 60:
        return f"{sign}{s:.3g}s" if s < 10 else f"{sign}{round(s)}s"
    total = int(round(s))
    for big, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if total >= size:
            whole, rest = divmod(total, size)
            part = rest // small_size
            return f"{sign}{whole}{big}" + (f" {part}{small}" if part else "")
    return f"{sign}{total}s"  # not reached: total >= 60 here


def outlier_range(y, *, q: float = 0.01, log: bool = False) -> tuple[float, float] | None:
    """The y-axis range for "ignore outliers": the [q, 1-q] quantiles of the finite y, padded 5 %.

    The quantiles are taken on the inside (numpy's "higher"/"lower" methods), so with 10 or more
    points at least the single most extreme value on each side is always outside, however few
    points there are; interpolating would let one huge spike stretch the axis. None (let the
    plot autorange) with fewer than 10 finite points or when the clipped range is flat.
    With log=True the quantiles are taken over the positive values and the range is returned in
    log10 units, which is what a log axis's range expects.
    """
    v = np.asarray(y, dtype=float).reshape(-1)
    v = v[np.isfinite(v)]
    if log:
        v = np.log10(v[v > 0])
    if v.size < _MIN_FINITE:
        return None
    q = min(max(float(q), 0.0), 0.5)
    lo = float(np.quantile(v, q, method="higher"))
    hi = float(np.quantile(v, 1.0 - q, method="lower"))
    if not hi > lo:
        return None
    pad = _PAD * (hi - lo)
    return lo - pad, hi + pad


def log_safe(y) -> np.ndarray:
    """Values a log axis can draw: non-positive and non-finite become NaN (a gap, not an error)."""
    y = np.asarray(y, dtype=float).reshape(-1)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(y) & (y > 0), y, np.nan)
