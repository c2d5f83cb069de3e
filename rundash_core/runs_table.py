"""Filtering and presenting the runs list (the Overview table)."""
from __future__ import annotations

import re

import pandas as pd

RUNS_TABLE_COLUMNS = ["run_id", "kind", "status", "step", "max_steps", "model", "attempts", "updated",
                      "created", "path"]


def filter_runs(runs: pd.DataFrame, *, kinds=(), statuses=(), name_regex: str = "") -> tuple[pd.DataFrame, str | None]:
    """Runs matching the kind/status filters and a regex on the name; (frame, regex error)."""
    mask = pd.Series(True, index=runs.index)
    if kinds:
        mask &= runs["kind"].isin(kinds)
    if statuses:
        mask &= runs["status"].isin(statuses)
    error = None
    if name_regex:
        try:
            rx = re.compile(name_regex, re.IGNORECASE)
            mask &= runs["name"].map(lambda n: bool(rx.search(str(n))))
        except re.error as e:
            error = f"invalid regex: {e}"
    return runs[mask].reset_index(drop=True), error
