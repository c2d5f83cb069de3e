"""Each runtime dependency is used at run time (pyproject says why; this holds the claim)."""
from __future__ import annotations

import pandas as pd

from rundash_core import frames


def test_text_columns_of_the_frames_are_stored_by_pyarrow():
    samples = frames.typed([{"sample_id": "s0", "split": "train", "ok": True}], frames.SAMPLES)
    assert isinstance(samples["sample_id"].dtype, pd.StringDtype)
    assert samples["sample_id"].dtype.storage == "pyarrow"
