"""The charts a page shows, from frames: a section's panels, one key's chart, a Compare overlay.

Pages pass what the user chose (x axis, `ChartOptions`) and get `Chart`s back; everything here is
plain pandas/numpy/plotly, so notebooks can build the same figures.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rundash_core import cache
from rundash_core.charts.aliases import canonical_frame
from rundash_core.charts.figures import (
    MARGIN_TOP,
    Chart,
    ChartOptions,
    band_traces,
    build_chart,
    legend_layout,
    plotly_text,
    style_of,
    unique_styles,
)
from rundash_core.charts.gaps import STEP_GAP, TIME_GAP, break_before, with_breaks
from rundash_core.charts.series import X_FRACTION, X_STEP, X_TIME, Series, SeriesIndex, series_index
from rundash_core.charts.units import unit_of


def x_choices(index: SeriesIndex) -> list[str]:
    """"step", "time" when the run has timestamps, then every metric (as an x axis, e.g. tokens)."""
    return [X_STEP, *([X_TIME] if index.t0 is not None else []), *sorted(index.metrics)]


def panel_chart(index: SeriesIndex, title: str, keys: Iterable[str], x: str, opts: ChartOptions,
                panel_x: str = X_STEP, unit: str | None = None) -> Chart:
    """One panel: every key, one series per producer (two producers logging a key are two
    labelled series). Panels drawn against time (prime-rl `inference/*`) ignore the x choice."""
    x = X_TIME if panel_x == X_TIME else x
    keys = list(keys)
    return _chart(title, keys, _panel_series(index, keys, x), x, opts, unit)


def _panel_series(index: SeriesIndex, keys: list[str], x: str) -> list[Series]:
    series: list[Series] = []
    for key in keys:
        series += index.series(key, x=x)
    return series


def _chart(title: str, keys: list[str], series: list[Series], x: str, opts: ChartOptions, unit: str | None) -> Chart:
    chart = build_chart(title, series, opts, subtitle=matched_keys(keys) if keys != [title] else None, unit=unit)
    if not series and x not in (X_STEP, X_TIME):
        chart.note = f"no step shared with the x-axis metric {x}"
    elif not series and x == X_TIME:
        chart.note = "this run's records carry no timestamps: plot against step"
    return chart


MAGNITUDE = 1e3  # series whose typical sizes differ by more than this factor get panels of their own


def typical_size(s: Series) -> float:
    """The median |value| of a series (its max |value| when the median is 0; NaN when empty)."""
    y = np.abs(s.y[np.isfinite(s.y)])
    if not len(y):
        return float("nan")
    m = float(np.median(y))
    return m if m > 0 else float(y.max())


def split_by_magnitude(series: list[Series], factor: float = MAGNITUDE) -> list[list[Series]]:
    """Series of one unit whose typical sizes (`typical_size`) differ by more than `factor` go to
    separate groups, so a 0.8 s merge does not lie flat under a 900 s validation. Only for panels of
    non-negative values (times, counts, sizes): a signed panel (advantages, log-ratios) keeps its
    shared zero. Each group spans at most `factor`; series that are all zero or empty join the
    group of the smallest sizes; groups come in the order of their first series."""
    finite = [s.y[np.isfinite(s.y)] for s in series]
    if len(series) < 2 or any(len(y) and y.min() < 0 for y in finite):
        return [list(series)]
    sizes = [typical_size(s) for s in series]
    sized = sorted((v, i) for i, v in enumerate(sizes) if np.isfinite(v) and v > 0)
    if not sized or sized[-1][0] <= sized[0][0] * factor:
        return [list(series)]
    group_of: dict[int, int] = {}
    start, g = sized[0][0], 0
    for v, i in sized:
        if v > start * factor:
            start, g = v, g + 1
        group_of[i] = g
    groups: dict[int, list[int]] = {}
    for i in range(len(series)):  # all-zero and empty series: with the smallest sizes
        groups.setdefault(group_of.get(i, 0), []).append(i)
    return [[series[i] for i in groups[k]] for k in sorted(groups, key=lambda k: groups[k][0])]


def scale_label(value: float) -> str:
    """The order of magnitude of a typical size as a title suffix: `~1k`, `~10`, `~1`, `~0.01`, `~1e-4`."""
    if not np.isfinite(value) or value <= 0:
        return "~0"
    e = int(round(np.log10(value)))
    for exp, suffix in ((9, "G"), (6, "M"), (3, "k")):
        if e >= exp:
            return f"~{10 ** (e - exp)}{suffix}"
    if e >= 0:
        return f"~{10 ** e}"
    return f"~{10.0 ** e:g}" if e >= -3 else f"~1e{e}"


def panel_charts(index: SeriesIndex, panel, x: str, opts: ChartOptions) -> list[Chart]:
    """A section panel as charts: one, or one per magnitude group (`split_by_magnitude`), each
    titled `<title> · ~<size>`; the y axis carries the panel's unit. Time panels ignore the x choice."""
    x = X_TIME if panel.x == X_TIME else x
    keys = list(panel.keys)
    unit = getattr(panel, "unit", None)
    series = _panel_series(index, keys, x)
    groups = split_by_magnitude(series)
    if len(groups) == 1:
        return [_chart(panel.title, keys, series, x, opts, unit)]
    charts = []
    for group in groups:
        size = max((v for v in map(typical_size, group) if np.isfinite(v)), default=float("nan"))
        mine = [k for k in keys if any(s.metric == k for s in group)]
        charts.append(_chart(f"{panel.title} · {scale_label(size)}", mine, group, x, opts, unit))
    return charts


def matched_keys(keys: list[str], shown: int = 3) -> str:
    """The keys a panel matched, as its subtitle (long lists end in `+N`); the "/" path segments
    they all start with are named once: `timing_s/agent_loop/…: harbor_total/mean, …`."""
    split = [k.split("/") for k in keys]
    head = 0
    if len(keys) > 1:
        n = min(len(p) for p in split)
        while head < n - 1 and len({p[head] for p in split}) == 1:
            head += 1
    prefix = "/".join(split[0][:head]) + "/…: " if head else ""
    rest = ["/".join(p[head:]) for p in split]
    return prefix + ", ".join(rest[:shown]) + (f" +{len(rest) - shown}" if len(rest) > shown else "")


def section_charts(index: SeriesIndex, section, x: str, opts: ChartOptions) -> list[Chart]:
    """The charts of one section (computed only when the page opens it): one per panel, or more
    when a panel's series differ in magnitude (`panel_charts`). Shared (`shared_charts`)."""
    return shared_charts(index, section, x, opts,
                         lambda: [chart for p in section.panels for chart in panel_charts(index, p, x, opts)])


def metric_charts(index: SeriesIndex, keys: Iterable[str], x: str, opts: ChartOptions) -> list[Chart]:
    """All-metrics mode: one chart per key (its producers as series). Shared (`shared_charts`)."""
    keys = tuple(keys)
    return shared_charts(index, keys, x, opts,
                         lambda: [panel_chart(index, key, [key], x, opts, unit=unit_of(key)) for key in keys])


def shared_charts(index: SeriesIndex, view, x: str, opts: ChartOptions, build) -> list[Chart]:
    """Charts built once per index version and view, for every session showing them: twenty
    people watching one live run cost one build per refresh, not twenty. Kept in the process cache
    under the index's source (`series_index`) and replaced when a new version of the index comes;
    an index of no source (built by hand) is not cached. The charts are read-only once built."""
    if index.source is None:
        return build()
    return cache.shared.current(("charts", index.source, view, x, opts), index.token, build, size=_charts_size)


def _charts_size(charts: list[Chart]) -> int:
    """Bytes: each series' x, y and step arrays, held once by the series and once by the figure."""
    return sum(2 * 24 * len(s) for c in charts for s in c.series) + 8192 * len(charts)


def key_groups(node) -> list[tuple[str, list[str]]]:
    """A key-tree node's keys as (path, keys) groups, depth first: the sub-headings of one
    top-level group of the all-metrics view."""
    out = [(node.path, list(node.keys))] if node.keys else []
    for child in node.children:
        out += key_groups(child)
    return out


def compare_chart(title: str, runs: Mapping[str, SeriesIndex], metric: str, x: str, opts: ChartOptions,
                  colors: Mapping[str, str | tuple[str, str]]) -> Chart:
    """One metric of several runs, one style per run (the label of each series is the run's);
    `colors` maps a run label to its colour or (colour, dash). `x` = "fraction" puts each run's
    steps over its own last step (`SeriesIndex.last_step`), so a 15-step and a 1,120-step run
    both span 0 to 1."""
    series: list[Series] = []
    for label, index in runs.items():
        for s in index.series(metric, x=X_STEP if x == X_FRACTION else x):
            name = label if s.label == metric else f"{label} · {s.producer}"
            sx, kind = s.x, s.x_kind
            if x == X_FRACTION and kind == X_STEP:
                if not index.last_step:
                    continue
                sx, kind = s.x / index.last_step, X_FRACTION
            series.append(Series(s.metric, s.producer, name, sx, s.y, kind, s.step))
    palette = {s.label: colors.get(s.label) or colors.get(s.label.split(" · ")[0]) or style_of(i)
               for i, s in enumerate(series)}
    return build_chart(title, series, opts, colors=palette)


def band_chart(title: str, bands: pd.DataFrame, x_kind: str, colors: Mapping[str, str]) -> go.Figure:
    """Mean ± std per group (the output of `rundash_core.compare.group_band`); where a group's x
    jumps by more than its usual stride (`gaps`), its line breaks and its band closes."""
    groups = list(bands.groupby("group", sort=True, observed=True))
    styles = unique_styles([(colors.get(str(g)), "solid") if colors.get(str(g)) else style_of(i)
                            for i, (g, _) in enumerate(groups)])
    names = [f"{group} (n={int(g['n'].max())})" for group, g in groups]
    traces = []
    for (group, g), (color, dash), name in zip(groups, styles, names):
        x, mean, std = (g[c].to_numpy(dtype="float64") for c in ("x", "mean", "std"))
        std = np.nan_to_num(std)
        at = break_before(x, factor=TIME_GAP if x_kind == X_TIME else STEP_GAP)
        common = {"type": "scatter", "mode": "lines", "legendgroup": plotly_text(group), "connectgaps": False}
        lx, ly = with_breaks(at, x, mean)
        traces += [
            *band_traces(common, plotly_text(name), color, x, mean - std, mean + std, at),
            {**common, "x": lx, "y": ly, "name": plotly_text(name), "line": {"color": color, "width": 2, "dash": dash}},
        ]
    legend, height = legend_layout(names, MARGIN_TOP, show=bool(groups))
    layout = {"title": {"text": plotly_text(title), "font": {"size": 13}}, "hovermode": "x unified",
              "xaxis": {"title": {"text": plotly_text(x_kind)}, "automargin": True}, "yaxis": {"automargin": True},
              **legend, "height": height}
    return go.Figure({"data": traces, "layout": layout}, _validate=False)


def run_series_frame(index: SeriesIndex, metric: str, x: str) -> pd.DataFrame:
    """(x, value) of one run's metric (its first producer), the input of `group_band`; x is
    "step", "time" or "fraction" (step / the run's last step)."""
    s = index.series(metric, x=X_STEP if x == X_FRACTION else x)
    if not s or (x == X_FRACTION and not index.last_step):
        return pd.DataFrame({"x": [], "value": []})
    return pd.DataFrame({"x": s[0].x / index.last_step if x == X_FRACTION else s[0].x, "value": s[0].y})


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
    if len(finite):
        return SeriesIndex(canon, t0=float(finite.min())), canon
    estimated = estimated_times(canon)
    if estimated is None:
        return SeriesIndex(canon, t0=None), canon
    index = SeriesIndex(canon.assign(time=estimated), t0=0.0)
    index.time_estimated = True
    return index, canon


STEP_TIME = "step time"  # the canonical alias of a step's duration (verl `timing_s/step`)


ESTIMATED_NOTE = ("its rows carry no timestamps, so each step is placed at the sum of the logged step durations "
                  "(`timing_s/step`) up to it (start-up and time outside the step timer not counted)")


def metrics_index(run) -> SeriesIndex:
    """`series_index(run)`, or, when its rows carry no timestamps (verl and SWE-Lego console logs),
    the same rows at their estimated wall time (`estimated_times`, as Compare places them), marked
    `time_estimated`; unchanged when the run logs no step durations either. Cached per run and
    metrics version."""
    index = series_index(run)
    if index.t0 is not None or index.rows == 0:
        return index

    def build() -> SeriesIndex:
        tidy = run.metrics()
        times = estimated_times(canonical_frame(run.kind, tidy, [STEP_TIME]), tidy["step"])
        if times is None:
            return index
        timed = SeriesIndex(tidy.assign(time=times), t0=0.0)
        timed.source, timed.time_estimated = index.source, True
        return timed

    return cache.shared.current(("estimated-index", *index.source), run.metrics_version(), build,
                                size=lambda ix: ix.rows * 40 + 4096)


def estimated_times(canon: pd.DataFrame, at_steps: pd.Series | None = None) -> np.ndarray | None:
    """Relative wall time for a run whose rows carry no timestamps (verl and SWE-Lego console
    logs): the one rule is that a row of step s is at the sum of the logged step durations
    ("step time", `timing_s/step`) of every step up to and including s (0 before the first
    logged duration; a step logged twice counts its last duration). It leaves out what the
    durations do not cover (start-up, validation outside the step timer), so it reads a little
    short of the log's own duration. `at_steps`: the steps to place (default: canon's rows'). None
    when the run logs no step durations."""
    rows = canon[(canon["metric"].astype(str) == STEP_TIME) & canon["step"].notna()]
    if rows.empty:
        return None
    dur = rows.assign(step=rows["step"].astype("float64")).drop_duplicates("step", keep="last")
    dur = dur.sort_values("step")
    steps = dur["step"].to_numpy(dtype="float64")
    cum = np.cumsum(np.clip(np.nan_to_num(dur["value"].to_numpy(dtype="float64"), nan=0.0, posinf=0.0), 0, None))
    row_steps = (canon["step"] if at_steps is None else at_steps).to_numpy(dtype="float64", na_value=np.nan)
    at = np.searchsorted(steps, row_steps, side="right") - 1  # the last duration at or before each row's step
    out = np.where(at >= 0, cum[np.clip(at, 0, None)], 0.0)
    return np.where(np.isfinite(row_steps), out, np.nan)
