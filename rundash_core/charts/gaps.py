"""Where a line must not be drawn: missing steps and resume gaps become breaks (NaN) in a trace.

Plotly joins consecutive points whatever lies between them; a chart that draws a line across
fifty missing steps or a 20-minute restart shows data that was never logged. `break_before`
finds the points that start a new segment, `with_breaks` puts a NaN point before each of them
(plotly's `connectgaps=False` then leaves the gap empty).
"""
from __future__ import annotations

import numpy as np

STEP_GAP = 1.5  # a step axis breaks where consecutive steps are more than 1.5 × the usual stride apart
TIME_GAP = 5.0  # a time axis breaks where consecutive points are more than 5 × the usual interval apart


def usual_stride(x: np.ndarray) -> float | None:
    """The median positive difference between consecutive finite x (None with fewer than 2)."""
    x = x[np.isfinite(x)]
    d = np.diff(x)
    d = d[d > 0]
    return float(np.median(d)) if len(d) else None


def break_before(x: np.ndarray, *, factor: float, step: np.ndarray | None = None) -> np.ndarray:
    """Indices i (ascending) where the line from point i-1 to point i must not be drawn: x jumps by
    more than `factor` × the usual stride, or (on a time axis, `step` given) the step goes back,
    i.e. a resumed attempt re-logs steps it had already logged. Needs 3 points to know a stride."""
    x = np.asarray(x, dtype="float64")
    if len(x) < 3:
        return np.empty(0, dtype=np.intp)
    stride = usual_stride(x)
    jump = np.zeros(len(x), dtype=bool)
    if stride is not None:
        with np.errstate(invalid="ignore"):
            jump[1:] = np.diff(x) > factor * stride
    if step is not None and len(step) == len(x):
        with np.errstate(invalid="ignore"):
            jump[1:] |= np.diff(np.asarray(step, dtype="float64")) < 0
    return np.flatnonzero(jump)


def between(x_out: np.ndarray, x_raw: np.ndarray, breaks: np.ndarray) -> np.ndarray:
    """The breaks of the raw series carried to a downsampled one: index j of `x_out` where a raw
    gap (x_raw[i-1], x_raw[i]) lies between x_out[j-1] and x_out[j] (a gap inside one bucket is
    narrower than a bucket and cannot be drawn)."""
    if not len(breaks) or len(x_out) < 2:
        return np.empty(0, dtype=np.intp)
    right = x_raw[breaks]
    left = x_raw[breaks - 1]
    j = np.searchsorted(x_out, right, side="left")
    ok = (j > 0) & (j < len(x_out))
    j, left = j[ok], left[ok]
    ok = x_out[j - 1] <= left
    return np.unique(j[ok])


def with_breaks(at: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
    """Each array with a NaN inserted before every index in `at` (x too: a point plotly skips),
    so the arrays stay aligned."""
    if not len(at):
        return [np.asarray(a) for a in arrays]
    return [np.insert(np.asarray(a, dtype="float64"), at, np.nan) for a in arrays]
