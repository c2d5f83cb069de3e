"""The wide form of a tidy metrics frame (`Run.metrics_wide`): one row per step, one column per
metric, for notebooks and exports."""
from __future__ import annotations

import pandas as pd


def wide_metrics(tidy: pd.DataFrame, *, metrics: list[str] | None = None, producer: str | None = None) -> pd.DataFrame:
    """The wide form of a tidy metrics frame: one row per step, `step`, `time` (the latest write of
    the step), then one column per metric in first-logged order; keys logged by more than one
    producer are namespaced `producer:key` (decided over the whole frame, so a column's name does
    not depend on the filters)."""
    producers = list(dict.fromkeys(tidy["producer"].astype("str")))
    if producer is not None and producer not in producers:
        raise ValueError(f"unknown producer {producer!r}; this run's producers: {', '.join(producers) or 'none'}")
    stepped = tidy[tidy["step"].notna()]
    stepped = stepped.astype({"metric": "str", "producer": "str"})
    per_key = stepped.groupby("metric", sort=False)["producer"].nunique()
    shared = set(per_key[per_key > 1].index)
    names = stepped["metric"].where(~stepped["metric"].isin(shared), stepped["producer"] + ":" + stepped["metric"])
    stepped = stepped.assign(column=names)
    if producer is not None:
        stepped = stepped[stepped["producer"] == producer]
    if metrics is not None:
        wanted = set(metrics)
        stepped = stepped[stepped["column"].isin(wanted) | stepped["metric"].isin(wanted)]
    if stepped.empty:
        return pd.DataFrame({"step": pd.array([], dtype="Int64"), "time": pd.Series([], dtype="float64")})
    order = list(dict.fromkeys(stepped["column"]))
    stepped = stepped.drop_duplicates(["step", "column"], keep="last")
    wide = stepped.pivot(index="step", columns="column", values="value")[order]
    wide.insert(0, "time", stepped.groupby("step")["time"].max())
    wide = wide.sort_index().reset_index().rename_axis(columns=None)
    wide["step"] = wide["step"].astype("Int64")
    return wide
