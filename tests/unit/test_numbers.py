"""The one "parsed value -> float or None" rule (rundash_core/numbers.py) and its two keywords."""
import math

import numpy as np
import pytest

from rundash_core.numbers import finite_float, floats

HUGE = 10 ** 400  # an int past float range: float() raises OverflowError on it


@pytest.mark.parametrize("value, want", [
    (3, 3.0), (-2.5, -2.5), (0, 0.0), (1 << 60, float(1 << 60)),
    (True, None), (False, None), (None, None), ("1.5", None), ("nan", None), ([1], None), ({"a": 1}, None),
    (math.nan, None), (math.inf, None), (-math.inf, None), (HUGE, None), (-HUGE, None),
])
def test_the_rule(value, want):
    got = finite_float(value)
    assert got == want and (got is None or type(got) is float)


def test_bools_keyword_counts_a_bool_as_one_or_zero_only():
    assert finite_float(True, bools=True) == 1.0 and finite_float(False, bools=True) == 0.0
    assert finite_float("true", bools=True) is None and finite_float(math.nan, bools=True) is None


def test_keep_nan_inf_keyword_keeps_what_was_logged_but_no_garbage():
    assert math.isnan(finite_float(math.nan, keep_nan_inf=True))
    assert finite_float(-math.inf, keep_nan_inf=True) == -math.inf
    assert finite_float(HUGE, keep_nan_inf=True) is None  # not a logged infinity: a broken value
    assert finite_float(True, keep_nan_inf=True) is None and finite_float("1", keep_nan_inf=True) is None


def test_floats_is_one_dimensional_float64_and_can_drop_nonfinite():
    a = floats([[1, 2], [3, None]])
    assert a.dtype == np.float64 and a.shape == (4,) and math.isnan(a[3])
    assert floats((1, math.inf, math.nan, -2), drop_nonfinite=True).tolist() == [1.0, -2.0]
    assert floats([]).shape == (0,)
