"""Comparing runs: a per-metric summary table, a config diff, and mean ± std bands per run group.

Inputs are plain frames (tidy metrics per run label, nested config dicts, (x, value) series), so
the Compare page, notebooks and tests use the same functions.
"""
from __future__ import annotations

import json
import re
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

SUMMARY_COLUMNS = ["run", "metric", "producer", "last", "min", "max", "best", "step_of_best", "steps"]
BAND_COLUMNS = ["group", "x", "mean", "std", "n"]

# A metric is "lower is better" when one of these words is a whole part of its name (parts split
# on / _ - : @ ( ) .): losses, KL, perplexity, times, gradient norms, errors and truncation shares.
_LOWER = {"loss", "kl", "perplexity", "ppl", "time", "timing", "latency", "lag", "wait", "error",
          "errored", "errors", "truncated", "cancelled", "aborted", "failed", "failure", "timeout",
          "clipfrac", "dropped", "stale", "idle", "chi2", "mismatch", "nan", "memory", "preemptions",
          "waiting", "none"}  # "none": solved_none
_LOWER_PAIRS = {("grad", "norm"), ("clip", "ratio")}
_NEUTRAL = {"entropy", "coef", "coeff", "lr"}  # no better direction: reported as max
_SPLIT = re.compile(r"[/_\-:@().\s]+")


def lower_is_better(metric: str) -> bool:
    """Whether the best value of `metric` is its minimum (else its maximum); a name heuristic."""
    parts = [p for p in _SPLIT.split(metric.lower()) if p]
    if any(p in _NEUTRAL for p in parts):
        return False
    return any(p in _LOWER for p in parts) or any(pair in _LOWER_PAIRS for pair in zip(parts, parts[1:]))


def summary(frames: Mapping[str, pd.DataFrame], metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per run, metric and producer: last / min / max, best (min or max by `lower_is_better`), the
    first step reaching it, and the number of steps logged. Only step-keyed rows count: time-keyed
    rows (prime-rl inference, step <NA>) have no step of best and are left out."""
    rows = []
    for run, df in frames.items():
        if df is None or not len(df):
            continue
        df = df[df["step"].notna() & df["value"].notna()]
        if metrics is not None:
            df = df[df["metric"].isin(list(metrics))]
        if not len(df):
            continue
        df = df.assign(metric=df["metric"].astype(str), producer=df["producer"].astype(str),
                       step=df["step"].astype("int64"), _row=np.arange(len(df)))
        # last row per (metric, producer, step) wins (a resumed attempt rewrites steps)
        df = df.sort_values(["metric", "producer", "step", "_row"]).drop_duplicates(
            ["metric", "producer", "step"], keep="last")
        for (metric, producer), g in df.groupby(["metric", "producer"], sort=False):
            steps, values = g["step"].to_numpy(), g["value"].to_numpy(dtype="float64")
            i = int(np.argmin(values) if lower_is_better(metric) else np.argmax(values))  # first of ties
            rows.append({"run": run, "metric": metric, "producer": producer, "last": values[-1],
                         "min": values.min(), "max": values.max(), "best": values[i],
                         "step_of_best": int(steps[i]), "steps": len(steps)})
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    if metrics is not None and len(out):
        order = {m: i for i, m in enumerate(metrics)}
        runs = {r: i for i, r in enumerate(frames)}
        out = out.sort_values(["metric", "run"], key=lambda s: s.map(order if s.name == "metric" else runs),
                              kind="stable")
    return out.astype({"step_of_best": "Int64", "steps": "Int64"}).reset_index(drop=True)


# config ------------------------------------------------------------------------------------------
def flatten_config(cfg: dict, prefix: str = "") -> dict[str, object]:
    """Nested dicts → {"a.b.c": value}; lists and empty dicts stay single values."""
    out: dict[str, object] = {}
    for k, v in (cfg or {}).items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten_config(v, key))
        else:
            out[key] = v
    return out


def render_value(v) -> str:
    """One config value as compact text: strings as they are, everything else as compact JSON."""
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, separators=(", ", ": "), default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(v)


def config_diff(configs: Mapping[str, dict], *, differences_only: bool = True) -> pd.DataFrame:
    """Dotted key × run table of rendered values (<NA> where a run lacks the key), sorted by key.
    `differences_only` keeps the keys whose value differs between runs or is missing in one."""
    flat = {run: {k: render_value(v) for k, v in flatten_config(cfg).items()} for run, cfg in configs.items()}
    keys = sorted(set().union(*[f.keys() for f in flat.values()])) if flat else []
    if differences_only:
        keys = [k for k in keys if len({f.get(k) for f in flat.values()}) > 1]  # a missing key is None
    data = {run: pd.array([f.get(k) for k in keys], dtype="string") for run, f in flat.items()}
    return pd.DataFrame(data, index=pd.Index(keys, name="key", dtype=object), columns=list(flat))


def config_value(cfg: dict, dotted_key: str):
    """The value at a dotted key of a nested config (keys that themselves contain dots are found
    too), or None."""
    if not isinstance(cfg, dict):
        return None
    if dotted_key in cfg:
        return cfg[dotted_key]
    parts = dotted_key.split(".")
    for i in range(len(parts) - 1, 0, -1):  # longest first segment that exists
        head = ".".join(parts[:i])
        if head in cfg:
            found = config_value(cfg[head], ".".join(parts[i:]))
            if found is not None:
                return found
    return None


# group bands --------------------------------------------------------------------------------------
def _on_grid(df: pd.DataFrame, grid: np.ndarray) -> np.ndarray:
    """A run's values linearly interpolated onto `grid`, NaN outside its own x range (no
    extrapolation: a run that stopped early does not count past its last point)."""
    d = df[["x", "value"]].astype("float64").dropna()
    if not len(d):
        return np.full(len(grid), np.nan)
    d = d.groupby("x", sort=True)["value"].mean()  # duplicate x: their mean
    x, y = d.index.to_numpy(), d.to_numpy()
    out = np.interp(grid, x, y)
    out[(grid < x[0]) | (grid > x[-1])] = np.nan
    return out


def group_band(series: Mapping[str, pd.DataFrame], groups: Mapping[str, str]) -> pd.DataFrame:
    """Mean ± std per group on the union of its runs' x values. Each run is linearly interpolated
    onto that grid within its own x range, so runs logging at different steps (every 5 vs every
    10) still group; n is how many runs cover each x, std is the sample std (NaN when n = 1)."""
    parts = []
    members: dict[str, list[str]] = {}
    for run, group in groups.items():
        if run in series and series[run] is not None:
            members.setdefault(str(group), []).append(run)
    for group, runs in members.items():
        xs = [pd.to_numeric(series[r]["x"], errors="coerce").to_numpy(dtype="float64") for r in runs]
        grid = np.unique(np.concatenate(xs)) if xs else np.array([])
        grid = grid[~np.isnan(grid)]
        if not len(grid):
            continue
        stack = np.vstack([_on_grid(series[r], grid) for r in runs])
        n = (~np.isnan(stack)).sum(axis=0)
        keep = n > 0
        vals = pd.DataFrame(stack[:, keep])
        parts.append(pd.DataFrame({"group": group, "x": grid[keep], "mean": vals.mean().to_numpy(),
                                   "std": vals.std(ddof=1).to_numpy(), "n": n[keep]}))
    if not parts:
        return pd.DataFrame({"group": pd.Series(dtype=object), "x": pd.Series(dtype="float64"),
                             "mean": pd.Series(dtype="float64"), "std": pd.Series(dtype="float64"),
                             "n": pd.Series(dtype="int64")})
    return pd.concat(parts, ignore_index=True)[BAND_COLUMNS]
