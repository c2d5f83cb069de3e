"""Charts numeric core: smoothers, min/max downsampling and axis helpers against hand-computed values.

Expected values are worked out by hand in the comments (or by a plain per-point loop written from
the formula, for long series), never by calling the code under test a second way.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from rundash_core.charts import axes, downsample, smoothing
from rundash_core.charts.axes import format_duration_tick, log_safe, outlier_range, relative_seconds, time_unit
from rundash_core.charts.downsample import MAX_POINTS, minmax_downsample
from rundash_core.charts.smoothing import ema_debiased, ema_time_weighted, gaussian, running_average, smooth

NAN = math.nan


def loop_time_ema(x, y, h):
    """The time-weighted EMA as the per-point recursion in its docstring (reference only)."""
    gaps = np.diff(x)
    first = np.median(gaps[gaps > 0])
    last = norm = 0.0
    out = []
    for i, v in enumerate(y):
        alpha = 1 - 0.5 ** ((first if i == 0 else x[i] - x[i - 1]) / h)
        last = last * (1 - alpha) + alpha * v
        norm = norm * (1 - alpha) + alpha
        out.append(last / norm)
    return np.array(out)


# --- TensorBoard EMA -------------------------------------------------------------------------

def test_ema_debiased_first_points_by_hand():
    # w = 0.5. k=0: last = 0.5*1 = 0.5, debias = 1-0.5 = 0.5 -> 1.0 (the first point is y0)
    # k=1: last = 0.5*0.5 + 0.5*2 = 1.25, debias = 1-0.25 = 0.75 -> 5/3
    # k=2: last = 0.5*1.25 + 0.5*3 = 2.125, debias = 1-0.125 = 0.875 -> 17/7
    np.testing.assert_allclose(ema_debiased([1.0, 2.0, 3.0], 0.5), [1.0, 5 / 3, 17 / 7], rtol=1e-12)


def test_ema_debiased_tensorboard_default_weight():
    # w = 0.6, y = [10, 0]. k=0 -> 10. k=1: last = 0.6*4 + 0 = 2.4, debias = 1-0.36 = 0.64 -> 3.75
    np.testing.assert_allclose(ema_debiased([10.0, 0.0], 0.6), [10.0, 3.75], rtol=1e-12)


def test_ema_weight_zero_is_identity_and_high_weight_lags():
    y = np.array([0.0, 10.0, 0.0, 10.0])
    np.testing.assert_array_equal(ema_debiased(y, 0.0), y)
    # w = 0.9, k=1: last = 0.9*0.1*0 + 0.1*10 = 1, debias = 1-0.81 = 0.19 -> 1/0.19
    assert ema_debiased(y, 0.9)[1] == pytest.approx(1 / 0.19, rel=1e-12)


def test_ema_skips_non_finite_and_carries_state():
    # The NaN and inf are missing: the finite points [1, 2, 3] smooth as above, NaN in between.
    out = ema_debiased([1.0, NAN, 2.0, math.inf, 3.0], 0.5)
    np.testing.assert_allclose(out, [1.0, NAN, 5 / 3, NAN, 17 / 7], rtol=1e-12)


def test_ema_long_series_matches_the_tensorboard_loop():
    y = np.random.default_rng(1).normal(size=3000).cumsum()
    last, out = 0.0, []
    for k, v in enumerate(y, start=1):
        last = last * 0.95 + 0.05 * v
        out.append(last / (1 - 0.95 ** k))
    np.testing.assert_allclose(ema_debiased(y, 0.95), out, rtol=1e-9, atol=1e-9)


# --- time-weighted EMA ------------------------------------------------------------------------

def test_time_ema_irregular_x_by_hand():
    # x = [0, 1, 2, 4], h = 1: gaps 1, 1, 2; the first point takes the median gap (1).
    # alpha = 1 - 0.5**gap = [0.5, 0.5, 0.5, 0.75]; last/norm per point:
    # k0: 0 / 0.5 = 0
    # k1: (0*0.5 + 0.5*4) = 2 / (0.25 + 0.5) = 8/3
    # k2: (2*0.5 + 0.5*8) = 5 / (0.375 + 0.5) = 40/7
    # k3: (5*0.25 + 0.75*16) = 13.25 / (0.875*0.25 + 0.75) = 13.25/0.96875 = 424/31
    out = ema_time_weighted([0.0, 1.0, 2.0, 4.0], [0.0, 4.0, 8.0, 16.0], 1.0)
    np.testing.assert_allclose(out, [0.0, 8 / 3, 40 / 7, 424 / 31], rtol=1e-12)
    # The index EMA with the same per-point weight 0.5 ignores the long last gap:
    # k3: last = 5*0.5 + 0.5*16 = 10.5, debias = 1 - 0.5**4 = 0.9375 -> 11.2
    assert ema_debiased([0.0, 4.0, 8.0, 16.0], 0.5)[3] == pytest.approx(11.2)
    assert out[3] > 13.6


def test_time_ema_first_point_is_y0_and_even_spacing_is_the_index_ema():
    y = np.random.default_rng(2).normal(size=200)
    x = np.arange(200) * 2.0
    out = ema_time_weighted(x, y, 3.0)
    assert out[0] == pytest.approx(y[0], rel=1e-12)
    # dx = 2, h = 3: per-point weight 0.5**(2/3)
    np.testing.assert_allclose(out, ema_debiased(y, 0.5 ** (2 / 3)), rtol=1e-10, atol=1e-12)


def test_time_ema_long_series_short_half_life_and_huge_gap_do_not_overflow():
    # 20k half-lives across the series (many 900-half-life chunks) plus a 1e9 gap.
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.uniform(0.1, 3.0, size=4000))
    x[2500:] += 1e9
    y = rng.normal(size=4000)
    out = ema_time_weighted(x, y, 0.5)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, loop_time_ema(x, y, 0.5), rtol=1e-9, atol=1e-12)
    assert out[2500] == pytest.approx(y[2500], abs=1e-12)  # the history decayed to nothing


def test_time_ema_nan_gap_spans_the_missing_point():
    # Finite points x = [0, 2], y = [0, 8], h = 1: gap 2 -> alpha = 0.75 for both (median gap 2).
    # k1: last = 0.75*8 = 6, norm = 0.75*0.25 + 0.75 = 0.9375 -> 6.4
    np.testing.assert_allclose(ema_time_weighted([0.0, 1.0, 2.0], [0.0, NAN, 8.0], 1.0), [0.0, NAN, 6.4], rtol=1e-12)


def test_smooth_time_ema_amount_is_percent_of_x_range():
    x = np.array([100.0, 101.0, 102.0, 104.0])
    y = np.array([0.0, 4.0, 8.0, 16.0])
    # span 4, amount 25 % -> half-life 1: the hand-computed case above, shifted in x.
    np.testing.assert_allclose(smooth(x, y, "time_ema", 25.0), [0.0, 8 / 3, 40 / 7, 424 / 31], rtol=1e-12)


# --- running average and Gaussian ------------------------------------------------------------

def test_running_average_by_hand():
    # window 3: [1], [1,2], [1,2,3], [2,3,4], [3,4,5]
    np.testing.assert_allclose(running_average([1.0, 2.0, 3.0, 4.0, 5.0], 3), [1, 1.5, 2, 3, 4])
    np.testing.assert_array_equal(running_average([3.0, 1.0, 2.0], 1), [3.0, 1.0, 2.0])


def test_running_average_counts_finite_points_only():
    # window 2 over the finite points [1, 3, 5]: [1], [1,3], [3,5]
    np.testing.assert_allclose(running_average([1.0, NAN, 3.0, 5.0], 2), [1.0, NAN, 2.0, 4.0])


def test_gaussian_of_a_constant_is_constant_to_the_edges():
    np.testing.assert_allclose(gaussian(np.full(30, 7.0), 3.0), 7.0, rtol=1e-12)
    np.testing.assert_allclose(gaussian(np.full(3, 7.0), 25.0), 7.0, rtol=1e-12)  # kernel longer than data


def test_gaussian_of_an_impulse_is_symmetric_with_the_kernel_peak():
    y = np.zeros(41)
    y[20] = 1.0
    out = gaussian(y, 2.0)
    np.testing.assert_allclose(out[:20], out[21:][::-1], rtol=1e-12)
    # Interior point: weight of the impulse = k(0) / sum_{j=-8..8} exp(-j^2 / (2*2^2)); cut at 4 sigma.
    total = sum(math.exp(-(j * j) / 8.0) for j in range(-8, 9))
    assert out[20] == pytest.approx(1.0 / total, rel=1e-12)
    assert out[22] == pytest.approx(math.exp(-0.5) / total, rel=1e-12)
    assert out[20] > out[21] > out[22] > 0


def test_gaussian_skips_nan_without_spreading_it():
    out = gaussian([1.0, NAN, 1.0, 4.0], 1.0)
    assert math.isnan(out[1]) and np.isfinite(out[[0, 2, 3]]).all()
    # Two finite points, sigma 1: out[0] = (1*1 + 3*e^-0.5) / (1 + e^-0.5)
    np.testing.assert_allclose(gaussian([1.0, NAN, 3.0], 1.0)[0], (1 + 3 * math.exp(-0.5)) / (1 + math.exp(-0.5)))


# --- dispatcher, empties, selector metadata -----------------------------------------------------

def test_smooth_dispatch_none_and_unknown():
    y = np.array([1.0, 5.0, 2.0])
    np.testing.assert_array_equal(smooth(None, y, "none", 0), y)
    np.testing.assert_allclose(smooth(None, [1.0, 2.0, 3.0], "ema", 0.5), [1.0, 5 / 3, 17 / 7])
    np.testing.assert_allclose(smooth(None, [1.0, 2.0, 3.0, 4.0, 5.0], "running_avg", 3), [1, 1.5, 2, 3, 4])
    with pytest.raises(ValueError):
        smooth(None, y, "median", 3)


@pytest.mark.parametrize("method", smoothing.METHODS)
def test_every_method_takes_empty_and_all_nan(method):
    amount = smoothing.DEFAULTS[method]
    assert smooth(np.empty(0), np.empty(0), method, amount).size == 0
    out = smooth(np.arange(3.0), np.full(3, NAN), method, amount)
    assert out.shape == (3,) and np.isnan(out).all()


def test_selector_metadata_is_consistent():
    assert set(smoothing.LABELS) == set(smoothing.METHODS)
    assert set(smoothing.DEFAULTS) == set(smoothing.METHODS)
    assert set(smoothing.RANGES) == set(smoothing.METHODS) - {"none"}
    for method, (lo, hi, step) in smoothing.RANGES.items():
        assert lo <= smoothing.DEFAULTS[method] <= hi and step > 0
    assert smoothing.RANGES["ema"] == (0.0, 0.99, 0.01) and smoothing.RANGES["running_avg"] == (1, 50, 1)


# --- downsampling ----------------------------------------------------------------------------

def test_downsample_keeps_the_single_spike_of_100k_points():
    rng = np.random.default_rng(4)
    x = np.arange(100_000, dtype=float)
    y = rng.normal(0.0, 1.0, size=100_000)
    y[54_321], y[77_777] = 1000.0, -500.0
    d = minmax_downsample(x, y)
    assert d.bucketed and d.n_in == 100_000
    assert len(d.x) == len(d.y) == len(d.y_min) == len(d.y_max) <= MAX_POINTS
    assert d.y_max.max() == 1000.0 and d.y_min.min() == -500.0
    spike = int(np.argmax(d.y_max))
    assert abs(d.x[spike] - 54_321) < 100_000 / MAX_POINTS  # drawn where it happened
    assert np.count_nonzero(d.y_max == 1000.0) == 1


def test_downsample_is_identity_below_the_limit():
    x = np.arange(5.0)
    y = np.array([1.0, NAN, 3.0, 2.0, 0.0])
    line = np.array([1.0, NAN, 2.0, 2.0, 1.5])
    d = minmax_downsample(x, y, max_points=5, y_line=line)
    assert not d.bucketed and d.n_in == 5
    np.testing.assert_array_equal(d.x, x)
    np.testing.assert_array_equal(d.y, line)
    np.testing.assert_array_equal(d.y_min, y)
    np.testing.assert_array_equal(d.y_max, y)


def test_downsample_bucket_means_by_hand():
    # x = 0..3000, 1500 buckets over a span of 3000: width 2, bucket i = {2i, 2i+1}; x = 3000
    # closes the last bucket, which holds {2998, 2999, 3000}.
    x = np.arange(3001, dtype=float)
    y = (x % 4 == 1) * 3.0 - 1.0  # -1, 2, -1, -1, -1, 2, ...
    d = minmax_downsample(x, y, max_points=1500, y_line=10 * x)
    assert d.bucketed and len(d.x) == 1500
    assert (d.x[0], d.y[0], d.y_min[0], d.y_max[0]) == (0.5, 5.0, -1.0, 2.0)  # mean(0, 10) = 5
    assert (d.x[1], d.y[1], d.y_min[1], d.y_max[1]) == (2.5, 25.0, -1.0, -1.0)  # x 2, 3: no spike
    assert d.x[-1] == 2999.0 and d.y[-1] == 29990.0  # mean(2998, 2999, 3000)
    # Every other bucket holds exactly its pair (an edge computed 1 ulp low would shift x = 54).
    np.testing.assert_array_equal(d.x[:-1], np.arange(1499) * 2 + 0.5)


def test_downsample_line_defaults_to_raw_mean_and_drops_nan_buckets():
    x = np.arange(4000, dtype=float)
    y = x.copy()
    y[1000:2000] = NAN
    d = minmax_downsample(x, y, max_points=400)  # buckets of 10 points
    assert len(d.x) == 300 and np.isfinite(d.y_min).all()
    assert not ((d.x > 1000) & (d.x < 2000)).any()
    assert d.y[0] == pytest.approx(4.5)  # mean of 0..9


def test_downsample_stays_under_the_limit_on_irregular_x():
    rng = np.random.default_rng(5)
    x = np.sort(np.concatenate([rng.uniform(0, 1, 50_000), rng.uniform(0, 1e6, 3000)]))
    y = rng.normal(size=x.size)
    for limit in (1, 7, 1500):
        d = minmax_downsample(x, y, max_points=limit)
        assert 1 <= len(d.x) <= limit and d.y_max.max() == y.max() and d.y_min.min() == y.min()


def test_downsample_empty():
    d = minmax_downsample(np.empty(0), np.empty(0))
    assert d.n_in == 0 and not d.bucketed and d.x.size == d.y_max.size == 0


# --- axes ------------------------------------------------------------------------------------

def test_relative_seconds_starts_at_the_first_finite_time():
    np.testing.assert_array_equal(relative_seconds([NAN, 1_700_000_100.0, 1_700_000_160.0]), [NAN, 0.0, 60.0])
    assert relative_seconds([]).size == 0


@pytest.mark.parametrize("span, unit", [(0, "s"), (119, "s"), (120, "m"), (7199, "m"), (7200, "h"),
                                        (2 * 86400 - 1, "h"), (2 * 86400, "d"), (30 * 86400, "d")])
def test_time_unit_picks(span, unit):
    divisor = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}[unit]
    assert time_unit(span) == (unit, divisor)


def test_format_duration_tick():
    assert [format_duration_tick(s) for s in (0.5, 42, 90, 3600, 3 * 3600 + 20 * 60, 2 * 86400 + 4 * 3600 + 59)] == \
        ["0.5s", "42s", "1m 30s", "1h", "3h 20m", "2d 4h"]
    assert format_duration_tick(NAN) == "" and format_duration_tick(-42) == "-42s"


def test_outlier_range_ignores_a_single_huge_outlier():
    y = np.linspace(0.0, 1.0, 1001)
    y[500] = 1e6
    lo, hi = outlier_range(y)
    assert -0.1 < lo < 0.02 and 0.98 < hi < 1.1
    # Only 20 points: interpolated quantiles would let the spike pull the top up to ~1e4.
    lo, hi = outlier_range(np.concatenate([np.arange(19.0), [1e6]]))
    assert hi < 20 and lo > -2


def test_outlier_range_none_when_few_or_flat_and_pads():
    assert outlier_range([1.0, 2.0, 3.0, NAN, math.inf]) is None
    assert outlier_range(np.full(100, 3.0)) is None
    assert outlier_range([]) is None
    lo, hi = outlier_range(np.arange(101.0))  # quantiles 1 and 99, padded 5 % of 98
    assert lo == pytest.approx(1 - 4.9) and hi == pytest.approx(99 + 4.9)


def test_outlier_range_log_is_in_log10_units():
    y = np.concatenate([[-5.0, 0.0], np.logspace(0, 3, 101)])  # non-positive values are ignored
    lo, hi = outlier_range(y, log=True)
    assert lo == pytest.approx(0.03 - 0.05 * 2.94) and hi == pytest.approx(2.97 + 0.05 * 2.94)


def test_log_safe():
    np.testing.assert_array_equal(log_safe([-1.0, 0.0, 1e-3, 2.0, NAN, math.inf]), [NAN, NAN, 1e-3, 2.0, NAN, NAN])
    assert log_safe([]).size == 0


def test_modules_are_reexported():
    import rundash_core.charts as charts
    assert charts.smooth is smoothing.smooth and charts.minmax_downsample is downsample.minmax_downsample
    assert charts.outlier_range is axes.outlier_range and charts.MAX_POINTS == 1500
