"""The charts a page shows, from frames: a section's panels, one key's chart, a Compare overlay.

Pages pass what the user chose (x axis, `ChartOptions`) and get `Chart`s back; everything here is
plain pandas/numpy/plotly, so notebooks can build the same figures.
"""
from __future__ import annotations

import os

from typing import Iterable, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .figures import Chart, ChartOptions, _rgba, build_chart, color_of, plotly_text
from .. import cache
from .aliases import canonical_frame
from .series import X_STEP, X_TIME, Series, SeriesIndex


def x_choices(index: SeriesIndex) -> list[str]:
    """"step", "time" when the run has timestamps, then every metric (as an x axis, e.g. tokens)."""
    return [X_STEP, *([X_TIME] if index.t0 is not None else []), *sorted(index.metrics)]


def panel_chart(index: SeriesIndex, title: str, keys: Iterable[str], x: str, opts: ChartOptions,
                panel_x: str = X_STEP) -> Chart:
    """One panel: every key, one series per producer (two producers logging a key are two
    labelled series). Panels drawn against time (prime-rl `inference/*`) ignore the x choice."""
    x = X_TIME if panel_x == X_TIME else x
    series: list[Series] = []
    for key in keys:
        series += index.series(key, x=x)
    keys = list(keys)
    chart = build_chart(title, series, opts, subtitle=matched_keys(keys) if keys != [title] else None)
    if not series and x not in (X_STEP, X_TIME):
        chart.note = f"no step shared with the x-axis metric {x}"
    elif not series and x == X_TIME:
        chart.note = "this run's records carry no timestamps: plot against step"
    return chart


def matched_keys(keys: list[str], shown: int = 3) -> str:
    """The keys a panel matched, as its subtitle (long lists end in `+N`)."""
    head = ", ".join(keys[:shown])
    return head + (f" +{len(keys) - shown}" if len(keys) > shown else "")


def section_charts(index: SeriesIndex, section, x: str, opts: ChartOptions) -> list[Chart]:
    """The charts of one section (computed only when the page opens it)."""
    return [panel_chart(index, p.title, p.keys, x, opts, p.x) for p in section.panels]


def metric_charts(index: SeriesIndex, keys: Iterable[str], x: str, opts: ChartOptions) -> list[Chart]:
    """All-metrics mode: one chart per key (its producers as series)."""
    return [panel_chart(index, key, [key], x, opts) for key in keys]


def key_groups(node) -> list[tuple[str, list[str]]]:
    """A key-tree node's keys as (path, keys) groups, depth first: the sub-headings of one
    top-level group of the all-metrics view."""
    out = [(node.path, list(node.keys))] if node.keys else []
    for child in node.children:
        out += key_groups(child)
    return out


def compare_chart(title: str, runs: Mapping[str, SeriesIndex], metric: str, x: str, opts: ChartOptions,
                  colors: Mapping[str, str]) -> Chart:
    """One metric of several runs, one colour per run (the label of each series is the run's)."""
    series: list[Series] = []
    for label, index in runs.items():
        for s in index.series(metric, x=x):
            name = label if s.label == metric else f"{label} · {s.producer}"
            series.append(Series(s.metric, s.producer, name, s.x, s.y, s.x_kind, s.step))
    palette = {s.label: colors.get(s.label) or colors.get(s.label.split(" · ")[0], color_of(i))
               for i, s in enumerate(series)}
    return build_chart(title, series, opts, colors=palette)


def band_chart(title: str, bands: pd.DataFrame, x_kind: str, colors: Mapping[str, str]) -> go.Figure:
    """Mean ± std per group (the output of `rundash_core.compare.group_band`)."""
    traces = []
    for i, (group, g) in enumerate(bands.groupby("group", sort=True, observed=True)):
        color = colors.get(str(group)) or color_of(i)
        x, mean, std = (g[c].to_numpy(dtype="float64") for c in ("x", "mean", "std"))
        std = np.nan_to_num(std)
        common = {"type": "scatter", "mode": "lines", "x": x, "legendgroup": str(group)}
        traces += [
            {**common, "y": mean + std, "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"},
            {**common, "y": mean - std, "line": {"width": 0}, "fill": "tonexty", "fillcolor": _rgba(color, 0.2),
             "showlegend": False, "hoverinfo": "skip"},
            {**common, "y": mean, "name": plotly_text(f"{group} (n={int(g['n'].max())})"), "line": {"color": color, "width": 2}},
        ]
    layout = {"title": {"text": plotly_text(title), "font": {"size": 13}}, "height": 320, "hovermode": "x unified",
              "margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "xaxis": {"title": {"text": plotly_text(x_kind)}},
              "legend": {"orientation": "h", "y": -0.2}}
    return go.Figure({"data": traces, "layout": layout}, _validate=False)


def run_series_frame(index: SeriesIndex, metric: str, x: str) -> pd.DataFrame:
    """(x, value) of one run's metric (its first producer), the input of `group_band`."""
    s = index.series(metric, x=x)
    return pd.DataFrame({"x": s[0].x, "value": s[0].y}) if s else pd.DataFrame({"x": [], "value": []})


def compare_indexes(runs: Mapping[str, object]) -> tuple[dict[str, SeriesIndex], dict[str, pd.DataFrame]]:
    """Per run label: the index of its canonical-alias frame (relative time counted from the run's
    own first record) and that frame. Cached per run and frame version."""
    indexes, frames = {}, {}
    for label, run in runs.items():
        indexes[label], frames[label] = cache.shared.current(
            ("canonical", os.path.realpath(run.path), run.run_id), run.metrics_version(),
            lambda: _canonical(run.kind, run.metrics()), size=lambda v: v[0].rows * 40 + 4096)
    return indexes, frames


def _canonical(kind: str, tidy: pd.DataFrame) -> tuple[SeriesIndex, pd.DataFrame]:
    times = tidy["time"].to_numpy(dtype="float64")
    finite = times[np.isfinite(times)]
    canon = canonical_frame(kind, tidy)
    return SeriesIndex(canon, t0=float(finite.min()) if len(finite) else None), canon
