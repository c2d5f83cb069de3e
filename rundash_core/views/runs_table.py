"""Filtering and presenting the runs list (the Overview table)."""
from __future__ import annotations

import pandas as pd

from rundash_core.safety.user_regex import compile_user_pattern

RUNS_TABLE_COLUMNS = ["run_id", "kind", "status", "step", "max_steps", "model", "attempts", "updated",
                      "created", "path"]


def filter_runs(runs: pd.DataFrame, *, kinds=(), statuses=(), name_regex: str = "") -> tuple[pd.DataFrame, str | None]:
    """Runs matching the kind/status filters and a regex on the name; (frame, regex error). The regex
    is case-insensitive and runs on RE2 (linear time); an invalid one filters nothing."""
    mask = pd.Series(True, index=runs.index)
    if kinds:
        mask &= runs["kind"].isin(kinds)
    if statuses:
        mask &= runs["status"].isin(statuses)
    error = None
    if name_regex:
        rx, error = compile_user_pattern(name_regex, ignore_case=True)
        if rx is not None:
            mask &= runs["name"].map(rx.search).astype(bool)
    return runs[mask].reset_index(drop=True), error
