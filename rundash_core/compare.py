"""Comparing runs: a per-metric table (`metric_table`), a config diff, and mean ± std bands per run group.

Inputs are plain frames (tidy metrics per run label, nested config dicts, (x, value) series), so
the Compare page, notebooks and tests use the same functions.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from rundash_core.views.display_text import ABSENT, utf8_text  # ABSENT: how an absent value reads in a table or a legend

METRIC_TABLE_COLUMNS = ["run", "metric", "producer", "last", "min", "max", "better", "best", "step_of_best", "steps"]
BAND_COLUMNS = ["group", "x", "mean", "std", "n"]

# Which way a metric is better, from the words of its name (parts split on / _ - : @ ( ) . and
# blanks). Two-sided words win over everything (entropy_loss, kl_coef, reward/std have no better
# direction), then "lower" words, then "higher" words; a name with none of them has no direction.
# Lengths are deliberately in no list: a longer response is not better or worse by itself (it is
# reasoning to one run and rambling to another), so "response length" gets no best, while
# response_length/clip_ratio (truncations) is lower-is-better through its clip ratio.
_TWO_SIDED = {"entropy", "coef", "coeff", "lr", "std", "var", "variance"}
_LOWER = {"loss", "kl", "perplexity", "ppl", "time", "timing", "latency", "lag", "wait", "error",
          "errored", "errors", "truncated", "cancelled", "aborted", "failed", "failure", "timeout",
          "clipfrac", "dropped", "stale", "idle", "chi2", "mismatch", "nan", "memory", "preemptions",
          "waiting", "none"}  # "none": solved_none
_LOWER_PAIRS = {("grad", "norm"), ("clip", "ratio")}
_HIGHER = {"reward", "rewards", "score", "scores", "acc", "accuracy", "correct", "success", "solved",
           "pass", "throughput", "mfu"}
_HIGHER_AT = re.compile(r"(?:^|[/_])(?:pass|avg|best|worst|maj)@\d+")  # pass@k, avg@k, best@k/mean, ...
_SPLIT = re.compile(r"[/_\-:@().\s]+")


def direction(metric: str) -> str | None:
    """"up" when a higher value of `metric` is better (reward, score, accuracy, pass@k, throughput,
    MFU), "down" when lower is better (loss, KL, perplexity, time, grad norm, errors, truncation,
    clip ratios), None when neither is known (entropy, learning rate, lengths, coefficients, std and
    every name with none of these words). The one rule the Compare metric table's "best" follows."""
    lowered = metric.lower()
    parts = [p for p in _SPLIT.split(lowered) if p]
    if any(p in _TWO_SIDED for p in parts):
        return None
    if any(p in _LOWER for p in parts) or any(pair in _LOWER_PAIRS for pair in zip(parts, parts[1:])):
        return "down"
    if any(p in _HIGHER for p in parts) or _HIGHER_AT.search(lowered):
        return "up"
    return None


def metric_table(frames: Mapping[str, pd.DataFrame], metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Per run, metric and producer: last / min / max, which way is better (`direction`: "↑", "↓"
    or <NA>), the best value (the max or min that way; <NA> when no way is better, e.g. entropy) and
    the first step reaching it, and the number of steps logged. Only step-keyed rows count:
    time-keyed rows (prime-rl inference, step <NA>) have no step of best and are left out."""
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
            way = direction(metric)
            best = step_of_best = None
            if way is not None:
                i = int(np.argmax(values) if way == "up" else np.argmin(values))  # first of ties
                best, step_of_best = values[i], int(steps[i])
            rows.append({"run": run, "metric": metric, "producer": producer, "last": values[-1],
                         "min": values.min(), "max": values.max(),
                         "better": {"up": "↑", "down": "↓"}.get(way), "best": best,
                         "step_of_best": step_of_best, "steps": len(steps)})
    out = pd.DataFrame(rows, columns=METRIC_TABLE_COLUMNS)
    if metrics is not None and len(out):
        order = {m: i for i, m in enumerate(metrics)}
        runs = {r: i for i, r in enumerate(frames)}
        out = out.sort_values(["metric", "run"], key=lambda s: s.map(order if s.name == "metric" else runs),
                              kind="stable")
    out = out.astype({"best": "float64", "step_of_best": "Int64", "steps": "Int64"})
    out["better"] = out["better"].astype("string")
    return out.reset_index(drop=True)


RUNS_COLUMNS = ["run", "name", "kind", "status", "step", "max_steps", "duration_s", "created", "updated", "model",
                "attempts", "resumed_from", "project", "experiment"]


def runs_summary(overviews: Mapping[str, object]) -> pd.DataFrame:
    """One row per compared run (label → `Run.overview()`): its one summary's fields, never
    recomputed from the metrics, so its step is the card's (steps done)."""
    from rundash_core.overview import summary_fields

    rows = [{"run": label, **summary_fields(ov)} for label, ov in overviews.items()]
    out = pd.DataFrame(rows, columns=RUNS_COLUMNS)
    return out.astype({"step": "Int64", "max_steps": "Int64", "duration_s": "float64"})


def read_each(items: Mapping[str, object], read) -> tuple[dict[str, object], dict[str, str]]:
    """Per label, `read(item)`; and the labels left out, each with why ("MemoryError: …"): one run
    that cannot be read is left out of a comparison, never takes it down for the others."""
    done, left_out = {}, {}
    for label, item in items.items():
        try:
            done[label] = read(item)
        except Exception as e:  # noqa: BLE001 - whatever one run raises, the others still compare
            left_out[label] = utf8_text(f"{type(e).__name__}: {str(e)[:200]}".rstrip(": "))  # a non-UTF-8 name too
    return done, left_out


def default_runs(runs: pd.DataFrame, current: str | None, n: int = 4) -> list[str]:
    """The runs Compare opens with: `current` and up to `n` other runs of its kind (those of its
    flavor first, each group most recently updated first), so the page is never empty when two or
    more runs exist: without another run of its kind, the most recently updated run of any kind
    joins it. `runs` is the runs list (`rd.discover`): kinds are compared as data."""
    if runs is None or runs.empty:
        return []
    updated = pd.to_datetime(runs["updated"], utc=True, errors="coerce") if "updated" in runs.columns else None
    by_recency = runs.assign(_updated=updated).sort_values("_updated", ascending=False, na_position="last",
                                                            kind="stable") if updated is not None else runs
    recent = [str(r) for r in by_recency["run_id"]]
    if current not in recent:
        return recent[:2]
    me = by_recency[by_recency["run_id"].astype(str) == current].iloc[0]
    flavor = by_recency["flavor"] if "flavor" in runs.columns else pd.Series("", index=by_recency.index)
    same_kind = by_recency[(by_recency["kind"].astype(str) == str(me["kind"]))
                           & (by_recency["run_id"].astype(str) != current)]
    same_flavor_first = same_kind.assign(_other=(flavor[same_kind.index].astype(str) != str(flavor[me.name])))
    same_flavor_first = same_flavor_first.sort_values("_other", kind="stable")
    chosen = [current, *[str(r) for r in same_flavor_first["run_id"]][:n]]
    if len(chosen) < 2:
        chosen += [r for r in recent if r not in chosen][:2 - len(chosen)]
    return chosen


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


def read_config(run) -> dict | None:
    """`run.config()` (secrets hidden), or None when the run has no config to compare: it raised,
    is not a dict or is empty (the run's problems say why). None is "unknown", never "the same as
    the others"."""
    try:
        cfg = run.config()
    except Exception:  # noqa: BLE001 - an unreadable config is reported as unknown, not raised
        return None
    return cfg if isinstance(cfg, dict) and cfg else None


def missing_configs(configs: Mapping[str, dict | None]) -> list[str]:
    """The runs whose config is unknown (None or empty), in order."""
    return [run for run, cfg in configs.items() if not cfg]


def config_diff(configs: Mapping[str, dict | None], *, differences_only: bool = True) -> pd.DataFrame:
    """Dotted key × run table of rendered values (<NA> where a run lacks the key), sorted by key.
    `differences_only` keeps the keys whose value differs between runs or is missing in one.
    Runs whose config is unknown (None or {}: `missing_configs`) have no column and take no part
    in the comparison: an unreadable config is not a config without keys."""
    flat = {run: {k: render_value(v) for k, v in flatten_config(cfg).items()}
            for run, cfg in configs.items() if cfg}
    keys = sorted(set().union(*[f.keys() for f in flat.values()])) if flat else []
    if differences_only:
        keys = [k for k in keys if len({f.get(k) for f in flat.values()}) > 1]  # a missing key is None
    data = {run: pd.array([f.get(k) for k in keys], dtype="string") for run, f in flat.items()}
    return pd.DataFrame(data, index=pd.Index(keys, name="key", dtype=object), columns=list(flat))


def group_labels(configs: Mapping[str, dict | None], key: str) -> dict[str, str]:
    """Per run, its value at a dotted config key as text (`render_value`), "—" when the run's
    config lacks the key or is unknown: the groups of "Group runs by config key"."""
    out = {}
    for run, cfg in configs.items():
        value = config_value(cfg or {}, key)
        out[run] = ABSENT if value is None else render_value(value)
    return out


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
