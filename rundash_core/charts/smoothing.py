"""Smoothers for metric curves, run on the full-resolution series before downsampling.

Smoothing first means a bucket of the downsampled line is the mean of the smoothed values, not a
smoothed mean of bucket means, so the curve does not change shape as the series grows or the
point budget changes.

Every smoother takes 1-D float arrays (x sorted ascending) and treats non-finite y as missing:
the output is NaN at those positions and the smoother's state carries across them, so one NaN or
inf never poisons the points after it. All of them are vectorised (pandas' compiled ewm/rolling,
numpy cumsum/convolve): a section redraws ~15 series of 20k points, and a Python loop per point
would dominate the page.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rundash_core.numbers import floats

METHODS = ("none", "ema", "time_ema", "running_avg", "gaussian")

LABELS = {
    "none": "None",
    "ema": "EMA (TensorBoard)",
    "time_ema": "Time-weighted EMA",
    "running_avg": "Running average",
    "gaussian": "Gaussian",
}

# What the amount slider means for each method (the x of time_ema is whatever the x axis shows).
AMOUNT_LABELS = {
    "ema": "Weight",
    "time_ema": "Half-life (% of x range)",
    "running_avg": "Window (points)",
    "gaussian": "Sigma (points)",
}

DEFAULTS = {"none": 0.0, "ema": 0.6, "time_ema": 2.0, "running_avg": 10, "gaussian": 2.0}

# (min, max, step) of the amount slider; "none" takes no amount.
RANGES = {
    "ema": (0.0, 0.99, 0.01),
    "time_ema": (0.1, 50.0, 0.1),
    "running_avg": (1, 50, 1),
    "gaussian": (0.5, 25.0, 0.5),
}

_MAX_WEIGHT = 0.999  # TensorBoard's slider stops below 1: weight 1 would never move off zero
_MAX_EXP2 = 900.0  # time-EMA chunk span in half-lives: 2**900 * n stays far below float max


def _scatter(ok: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Put the smoothed finite points back at their positions, NaN elsewhere."""
    out = np.full(n, np.nan)
    out[ok] = values
    return out


def ema_debiased(y, weight: float) -> np.ndarray:
    """TensorBoard's scalar smoothing: EMA started at 0 and divided by 1 - weight**n.

    Per finite point: last = last*w + (1-w)*y; n += 1; out = last / (1 - w**n). That equals the
    weighted mean sum(w**(k-j) * y_j) / sum(w**(k-j)) over the finite points so far, which is
    exactly pandas' ewm(alpha=1-w, adjust=True) on the finite subsequence, so the first point is
    y0 and there is no pull toward 0. Weight 0 is the identity; weights are clipped to [0, 0.999].
    TensorBoard also returns the raw values when the whole series is constant; the debiased EMA of
    a constant is that constant up to rounding, so that special case is not reproduced.
    """
    y = floats(y)
    ok = np.isfinite(y)
    if not ok.any():
        return np.full(y.shape, np.nan)
    w = min(max(float(weight), 0.0), _MAX_WEIGHT) if math.isfinite(weight) else 0.0
    if w == 0.0:
        return np.where(ok, y, np.nan)
    smoothed = pd.Series(y[ok]).ewm(alpha=1.0 - w, adjust=True).mean().to_numpy()
    return _scatter(ok, smoothed, y.size)


def _time_alphas(x: np.ndarray, half_life: float) -> np.ndarray:
    """alpha_i = 1 - 0.5**(gap_i / half_life); the first point gets the alpha of the median gap."""
    gaps = np.maximum(np.diff(x), 0.0)
    positive = gaps[gaps > 0]
    first_gap = float(np.median(positive)) if positive.size else math.inf
    gaps = np.concatenate(([first_gap], gaps))
    return -np.expm1(gaps / half_life * -math.log(2.0))  # 1 - 2**(-gap/h), exact for tiny gaps


def ema_time_weighted(x, y, half_life: float) -> np.ndarray:
    """Debiased EMA whose decay follows the x gaps: a point half_life further along x weighs half.

    Per finite point: alpha_i = 1 - 0.5**((x_i - x_{i-1}) / half_life); last = last*(1-alpha_i)
    + alpha_i*y_i; norm = norm*(1-alpha_i) + alpha_i; out = last / norm (norm is TensorBoard's
    debias 1 - prod(1-alpha)). Each point's mass is its alpha, i.e. the x interval it covers, so a
    burst of closely spaced points counts for the time it spans and a point after a stall replaces
    the stale history. The first point takes the alpha of the median gap, so on evenly spaced x
    this is exactly ema_debiased(y, 0.5**(dx / half_life)); a point at the same x as the previous
    one has alpha 0 and takes the previous value. half_life is in x units; points with non-finite
    x or y are missing and the gap to the next point spans them.

    Vectorised form: out_k = sum_j a_j y_j 2**(x_j/h) / sum_j a_j 2**(x_j/h) as prefix sums; the
    powers of two are taken relative to chunks at most 900 half-lives long, the state carried
    across chunks, so long series and short half-lives never overflow.
    """
    x, y = floats(x), floats(y)
    n = y.size
    if x.size != n:
        raise ValueError(f"x and y differ in length ({x.size} != {n})")
    ok = np.isfinite(y) & np.isfinite(x)
    if not ok.any():
        return np.full(n, np.nan)
    h = float(half_life)
    xs, ys = x[ok], y[ok]
    if not (math.isfinite(h) and h > 0):
        return _scatter(ok, ys, n)  # no smoothing rather than a division by zero
    alpha = _time_alphas(xs, h)
    u = (xs - xs[0]) / h  # position in half-lives
    out = np.empty(xs.size)
    carry_num = carry_den = 0.0  # last and norm at the previous chunk's last point
    carry_u = u[0]
    start = 0
    while start < xs.size:
        stop = int(np.searchsorted(u, u[start] + _MAX_EXP2, side="right"))
        seg = slice(start, stop)
        growth = np.exp2(u[seg] - u[start])
        carried = math.exp2(carry_u - u[start])  # the previous state decayed to this chunk's start
        den = np.cumsum(alpha[seg] * growth) + carry_den * carried
        num = np.cumsum(alpha[seg] * ys[seg] * growth) + carry_num * carried
        with np.errstate(invalid="ignore", divide="ignore"):
            out[seg] = num / den
        shrink = math.exp2(u[start] - u[stop - 1])
        carry_num, carry_den, carry_u = num[-1] * shrink, den[-1] * shrink, u[stop - 1]
        start = stop
    # A run of zero-gap points right at the start has no mass yet: hold the first value.
    out[~np.isfinite(out)] = ys[0]
    return _scatter(ok, out, n)


def running_average(y, window: int) -> np.ndarray:
    """Trailing mean of the last `window` finite points; the first points average what exists."""
    y = floats(y)
    ok = np.isfinite(y)
    if not ok.any():
        return np.full(y.shape, np.nan)
    w = int(round(window)) if math.isfinite(window) else 1
    if w <= 1:
        return np.where(ok, y, np.nan)
    smoothed = pd.Series(y[ok]).rolling(w, min_periods=1).mean().to_numpy()
    return _scatter(ok, smoothed, y.size)


def gaussian(y, sigma: float) -> np.ndarray:
    """Gaussian-kernel weighted mean over neighbouring finite points (sigma in points).

    The kernel (cut at 4 sigma) is renormalised at every point by the weight that actually fell on
    data, so the ends are not dragged toward zero and a constant stays constant. Missing points
    are skipped: distance counts finite points, like the other smoothers' state.
    """
    y = floats(y)
    ok = np.isfinite(y)
    if not ok.any():
        return np.full(y.shape, np.nan)
    s = float(sigma)
    if not (math.isfinite(s) and s > 0):
        return np.where(ok, y, np.nan)
    ys = y[ok]
    m = ys.size
    radius = min(int(math.ceil(4.0 * s)), m - 1)
    offsets = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * (offsets / s) ** 2)
    num = np.convolve(ys, kernel, mode="full")[radius:radius + m]
    den = np.convolve(np.ones(m), kernel, mode="full")[radius:radius + m]
    return _scatter(ok, num / den, y.size)


def smooth(x, y, method: str, amount: float) -> np.ndarray:
    """Dispatch on the selector's method name; amount means what RANGES/AMOUNT_LABELS say.

    time_ema's amount is the half-life as a percentage of the x range (finite x of finite points),
    so one slider works the same on steps, wall time or any other metric, as in W&B.
    """
    y = floats(y)
    if method == "none":
        return y.copy()
    if method == "ema":
        return ema_debiased(y, amount)
    if method == "running_avg":
        return running_average(y, amount)
    if method == "gaussian":
        return gaussian(y, amount)
    if method == "time_ema":
        x = floats(x)
        if x.size != y.size:
            raise ValueError(f"x and y differ in length ({x.size} != {y.size})")
        ok = np.isfinite(x) & np.isfinite(y)
        span = float(x[ok][-1] - x[ok][0]) if ok.sum() >= 2 else 0.0
        if not span > 0:
            return np.where(np.isfinite(y), y, np.nan)
        return ema_time_weighted(x, y, float(amount) / 100.0 * span)
    raise ValueError(f"unknown smoothing method {method!r}; expected one of {METHODS}")
