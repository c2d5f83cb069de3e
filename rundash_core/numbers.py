"""The one rule for "is this parsed value a number we can plot or average?", so every reader
answers it the same way (five private copies used to disagree on bools, NaN and Infinity).

The rule: an int or float, not a bool, finite, and inside float range; anything else (None, a
string, even "1.5", a dict, NaN, ±Infinity, an int of 400 digits) is None. A caller that must keep
something else says so at the call site with a keyword: `bools=True` where the format counts a
bool as 1/0 (Relax rewards, metric rows), `keep_nan_inf=True` where values are shown as logged
(the metrics contract keeps a logged NaN so a chart breaks there).
"""
from __future__ import annotations

import math

import numpy as np


def finite_float(v, *, bools: bool = False, keep_nan_inf: bool = False) -> float | None:
    """`v` as a float under the module's rule, or None."""
    if isinstance(v, bool):
        return float(v) if bools else None
    if not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:  # an int past float range is garbage, not infinity
        return None
    return f if keep_nan_inf or math.isfinite(f) else None


def floats(a, *, drop_nonfinite: bool = False) -> np.ndarray:
    """Any array-like as a 1-D float64 array (NaN stays NaN), or only its finite values."""
    out = np.asarray(a, dtype=np.float64).reshape(-1)
    return out[np.isfinite(out)] if drop_nonfinite else out
