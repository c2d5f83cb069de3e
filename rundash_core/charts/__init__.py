"""Charts for metric series: numeric core (smoothing, min/max downsampling, axis helpers).

The numeric modules are plain numpy/pandas so they can be unit-tested and benchmarked without
Streamlit or Plotly; figure building lives in the submodules that use them.
"""
from rundash_core.charts.axes import format_duration_tick, log_safe, outlier_range, relative_seconds, time_unit
from rundash_core.charts.downsample import MAX_POINTS, Downsampled, minmax_downsample
from rundash_core.charts.smoothing import (
    AMOUNT_LABELS,
    DEFAULTS,
    LABELS,
    METHODS,
    RANGES,
    ema_debiased,
    ema_time_weighted,
    gaussian,
    running_average,
    smooth,
)

__all__ = [
    "AMOUNT_LABELS", "DEFAULTS", "LABELS", "MAX_POINTS", "METHODS", "RANGES", "Downsampled",
    "ema_debiased", "ema_time_weighted", "format_duration_tick", "gaussian", "log_safe",
    "minmax_downsample", "outlier_range", "relative_seconds", "running_average", "smooth", "time_unit",
]
