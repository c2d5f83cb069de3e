"""Plotly figures of a panel: smoothing on the full-resolution series, then min/max downsampling.

Each series becomes at most three traces of ≤ `MAX_POINTS` points: the bucket min–max band (or the
faint raw line when the series is short enough to send whole) and the smoothed line on top.
Figures are built from plain dicts without plotly's validation (the dicts are ours), which keeps a
section of a 20k-step run well under the cost of loading its frame.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rundash_core.charts.axes import log_safe, outlier_range, time_unit
from rundash_core.charts.downsample import MAX_POINTS, minmax_downsample
from rundash_core.charts.gaps import STEP_GAP, TIME_GAP, between, break_before, with_breaks
from rundash_core.charts.series import X_FRACTION, X_STEP, X_TIME, Series
from rundash_core.charts.smoothing import smooth

PALETTE = ("#4C9BE8", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7",
           "#9C755F", "#BAB0AC", "#8CD17D", "#D4A6C8")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")  # once the palette is used up
HEIGHT = 280  # a panel without a legend; a legend adds its rows below the x axis

# Figure geometry (px). The plot area keeps PLOT_HEIGHT whatever the legend: the legend sits in the
# bottom margin below the x tick labels and the x-axis title (AXIS_BELOW), never over them, and the
# figure grows by the legend's rows. Plotly wraps a horizontal legend at the plot area's width; rows
# are estimated for LEGEND_WIDTH (the plot area of a half-width panel on a 1280 px wide page) at
# LEGEND_CHAR px per character (10 px monospace, measured in Chromium) plus LEGEND_ENTRY px of
# line sample and gap per entry, LEGEND_ROW px per row. A wider panel only gets spare room; a
# narrower one scrolls its legend (maxheight) instead of spilling onto the axis.
MARGIN_TOP, MARGIN_TOP_SUBTITLE = 40, 56
AXIS_BELOW = 56
PLOT_HEIGHT = HEIGHT - MARGIN_TOP - AXIS_BELOW
LEGEND_WIDTH, LEGEND_CHAR, LEGEND_ENTRY, LEGEND_ROW = 360, 6.2, 42, 20
LEGEND_SHORTEN = 2  # legends longer than this many rows show each series' distinguishing key part


@dataclass(frozen=True)
class ChartOptions:
    """How every chart of a view is drawn (the page's controls, mirrored in the URL)."""

    smoothing: str = "none"
    amount: float = 0.0
    log_y: bool = False
    log_x: bool = False  # Compare: runs of 15 and 1,120 steps side by side
    clip_outliers: bool = False
    max_points: int = MAX_POINTS
    resumes: tuple[int, ...] = ()  # steps where the run resumed: dotted vertical markers on step axes
    marked_step: int | None = None  # a step a link points at (a report's citation): a marker on step axes
    time_estimated: bool = False  # time is summed from step durations (`view.estimated_times`): said on the axis


RESUME_COLOR = "#9a9a9a"
MARK_COLOR = "#d1242f"
FEW_STEPS = 10  # a step axis ending at or below this is ticked at every step


@dataclass
class Chart:
    """A built figure plus the full-resolution data behind it (for the CSV download)."""

    title: str
    figure: go.Figure
    series: list[Series] = field(default_factory=list)
    points: int = 0  # the most points any trace sends to the browser
    note: str | None = None

    def frame(self) -> pd.DataFrame:
        frames = [s.frame().assign(series=s.label) for s in self.series]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def csv(self) -> bytes:
        buf = io.StringIO()
        self.frame().to_csv(buf, index=False)
        return buf.getvalue().encode()


def plotly_text(text: str) -> str:
    """Metric keys and run names are data: plotly renders a subset of HTML tags (<a>, <b>, <span
    style>) in titles and trace names, so their markup characters become entities."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def color_of(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def style_of(i: int) -> tuple[str, str]:
    """The i-th series' (colour, dash): the palette, then the palette again with the next dash."""
    return PALETTE[i % len(PALETTE)], DASHES[(i // len(PALETTE)) % len(DASHES)]


def unique_styles(wanted: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`wanted` (colour, dash) per series with repeats resolved: a series whose pair is taken keeps
    its colour and takes the first free dash (then the next free colour), so no two series of one
    chart look alike (Compare: two producers of one run, or more runs than colours)."""
    used: set[tuple[str, str]] = set()
    out = []
    for color, dash in wanted:
        if (color, dash) in used:
            free = [(color, d) for d in DASHES if (color, d) not in used]
            free = free or [(c, d) for d in DASHES for c in PALETTE if (c, d) not in used]
            if free:
                color, dash = free[0]
        used.add((color, dash))
        out.append((color, dash))
    return out


def legend_rows(names: list[str], width: float = LEGEND_WIDTH) -> int:
    """How many rows a horizontal legend of these entries takes at `width` px (greedy, like plotly)."""
    rows, used = 1, 0.0
    for name in names:
        w = LEGEND_ENTRY + LEGEND_CHAR * len(name)
        if used and used + w > width:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def legend_names(labels: list[str]) -> list[str]:
    """Legend entries: the labels themselves, or, when they would take more than LEGEND_SHORTEN
    rows, each label without the "/" path segments all of them share at the start and the end
    (`timing_s/agent_loop/harbor_env_setup/mean` → `harbor_env_setup`, the same in the hover); the
    panel's subtitle names the shared part and each trace's `meta` keeps its full label. Entries
    stay distinct and never empty."""
    if len(labels) < 2 or legend_rows(labels) <= LEGEND_SHORTEN:
        return list(labels)
    return strip_shared(labels)


def strip_shared(labels: list[str]) -> list[str]:
    """Each label without the "/" segments every label shares at its start and at its end (the
    labels themselves when that would leave one empty or two alike)."""
    if len(labels) < 2:
        return list(labels)
    split = [label.split("/") for label in labels]
    n = min(len(p) for p in split)
    head = 0
    while head < n - 1 and len({p[head] for p in split}) == 1:
        head += 1
    tail = 0
    while tail < n - 1 - head and len({p[-1 - tail] for p in split}) == 1:
        tail += 1
    short = ["/".join(p[head:len(p) - tail]) for p in split]
    return short if all(short) and len(set(short)) == len(short) else list(labels)


def legend_layout(names: list[str], top: int, show: bool = True) -> tuple[dict, int]:
    """The legend, bottom margin and figure height of a panel whose plot area is PLOT_HEIGHT tall:
    a horizontal legend in the bottom margin, below the x axis's ticks and title, with room for as
    many rows as the entries need. Returns (layout updates, height)."""
    if not show:
        height = top + PLOT_HEIGHT + AXIS_BELOW
        return {"margin": {"l": 10, "r": 10, "t": top, "b": AXIS_BELOW}, "showlegend": False}, height
    legend_px = legend_rows(names) * LEGEND_ROW + 12  # + the legend's own padding
    height = top + PLOT_HEIGHT + AXIS_BELOW + legend_px
    # Anchored at the figure's bottom edge and at most legend_px tall (more entries scroll inside
    # it), so it can never reach up to the axis; a legend anchored by its top past the middle of
    # the figure would make plotly push the plot's top margin down instead.
    legend = {"orientation": "h", "font": {"size": 10}, "xref": "container", "x": 0.0, "xanchor": "left",
              "yref": "container", "y": 0.0, "yanchor": "bottom", "bgcolor": "rgba(0,0,0,0)",
              "tracegroupgap": 0, "maxheight": legend_px}  # each series is its own group: no gap per entry
    return {"margin": {"l": 10, "r": 10, "t": top, "b": AXIS_BELOW + legend_px}, "legend": legend,
            "showlegend": True}, height


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _breaks(s: Series) -> np.ndarray:
    """Where this series' line breaks (`gaps.break_before`): missing steps on step-keyed axes (step,
    fraction of run, a metric), long pauses and re-logged steps on a time axis."""
    if s.x_kind == X_TIME:
        return break_before(s.x, factor=TIME_GAP, step=s.step)
    if s.step is None or (len(s.step) > 1 and (np.diff(s.step) < 0).any()):
        return np.empty(0, dtype=np.intp)  # a metric x axis whose steps are not in x order: no stride
    return break_before(s.step, factor=STEP_GAP)


def band_traces(common: dict, name: str, color: str, x, lo, hi, at) -> list[dict]:
    """A band (a bucket's min–max, a group's mean ± std): the `hi` edge, then the `lo` edge filled
    up to it (`tonexty`). Where
    the line breaks, the max edge drops to the min edge at the gap's left point and rises again at
    its right one, so the fill between them is empty across the gap (plotly's `tonexty` would fill
    across a NaN break) at 2 points per gap."""
    hx, hy = x, hi
    if len(at):
        left, right = at - 1, at
        hx = np.insert(x, np.repeat(at, 2), np.ravel(np.column_stack([x[left], x[right]])))
        hy = np.insert(hi, np.repeat(at, 2), np.ravel(np.column_stack([lo[left], lo[right]])))
    return [{**common, "x": hx, "y": hy, "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip",
             "name": f"{name} max"},
            {**common, "x": x, "y": lo, "line": {"width": 0}, "fill": "tonexty", "showlegend": False,
             "fillcolor": _rgba(color, 0.22), "hoverinfo": "skip", "name": f"{name} min"}]


def _fitted(s: Series, y, line, max_points: int):
    """The downsampled series and where its line breaks, within `max_points` points per trace
    counting the breaks (a NaN each on the line, two each on the band's max edge): a series with
    many gaps gets fewer buckets (at least max_points // 3, where any number of gaps fits)."""
    raw_breaks = _breaks(s)
    budget = max_points
    while True:
        d = minmax_downsample(s.x, y, max_points=budget, y_line=line)
        at = between(d.x, s.x, raw_breaks) if d.bucketed else raw_breaks
        extra = 2 * len(at) if d.bucketed else len(at)
        if len(d.x) + extra <= max_points or budget <= max_points // 3:
            return d, at
        budget = max(min(budget - 1, max_points - extra), max_points // 3)


def _traces(s: Series, name: str, style: tuple[str, str], opts: ChartOptions, xscale: float) -> tuple[list[dict], int]:
    color, dash = style
    y = log_safe(s.y) if opts.log_y else s.y
    line = smooth(s.x, y, opts.smoothing, opts.amount) if opts.smoothing != "none" else y
    d, at = _fitted(s, y, line, opts.max_points)
    x = d.x / xscale
    label, name = plotly_text(s.label), plotly_text(name)
    common = {"type": "scatter", "mode": "lines", "legendgroup": label, "connectgaps": False}
    traces: list[dict] = []
    if d.bucketed:  # the band keeps every bucket's extremes: spikes stay visible
        traces += band_traces(common, name, color, x, d.y_min, d.y_max, at)
        shown = d.y  # the bucket means of the smoothed line
    else:  # short enough to send whole: the raw series stays as a faint line behind the smoothed one
        if opts.smoothing != "none":
            rx, ry = with_breaks(at, x, y)
            traces.append({**common, "x": rx, "y": ry,
                           "line": {"color": _rgba(color, 0.3), "width": 1, "dash": dash},
                           "showlegend": False, "name": f"{name} (raw)",
                           "hovertemplate": "%{y:.4g} raw<extra></extra>"})
        shown = line
    lx, ly = with_breaks(at, x, shown)
    main = {**common, "x": lx, "mode": "lines+markers" if len(x) == 1 else "lines", "y": ly,
            "line": {"color": color, "width": 1.8, "dash": dash}, "name": name, "meta": label,
            "hovertemplate": "%{y:.4g}<extra>%{fullData.name}</extra>"}  # meta: the full label
    alone = _isolated(ly)
    if len(x) > 1 and alone.any():  # a point between two gaps has no line to be drawn with: a dot
        main.update(mode="lines+markers", marker={"size": np.where(alone, 5, 0), "color": color})
    traces.append(main)
    return traces, max(len(t["x"]) for t in traces)


def _isolated(y: np.ndarray) -> np.ndarray:
    """Finite points whose neighbours are both missing (or the edge): a line alone cannot show them."""
    ok = np.isfinite(y)
    before = np.r_[False, ok[:-1]]
    after = np.r_[ok[1:], False]
    return ok & ~before & ~after


def build_chart(title: str, series: list[Series], opts: ChartOptions = ChartOptions(), *,
                colors: dict[str, str | tuple[str, str]] | None = None, subtitle: str | None = None,
                unit: str | None = None) -> Chart:
    """One panel's figure. `colors` maps a series label to its colour or (colour, dash) (Compare
    keeps one style per run); otherwise series take `style_of` in order. No two series of the
    chart share a colour and a dash (`unique_styles`). `unit` titles the y axis."""
    series = [s for s in series if len(s)]
    if not series:
        return Chart(title, go.Figure(), [], 0, note="no data")
    kind = series[0].x_kind
    xscale, xunit = 1.0, ""
    if kind == X_TIME:
        xunit, xscale = time_unit(max(float(np.nanmax(s.x)) for s in series))
    wanted = []
    for i, s in enumerate(series):
        given = (colors or {}).get(s.label)
        wanted.append(tuple(given) if isinstance(given, (tuple, list)) else (given, "solid") if given else style_of(i))
    styles = unique_styles(wanted)
    names = legend_names([s.label for s in series])
    traces, points = [], 0
    for s, name, style in zip(series, names, styles):
        t, n = _traces(s, name, style, opts, xscale)
        traces += t
        points = max(points, n)
    top = MARGIN_TOP_SUBTITLE if subtitle else MARGIN_TOP
    layout = _layout(title, kind, xunit, opts, series, unit)
    legend, height = legend_layout(names, top, show=len(series) > 1)
    layout.update(legend, height=height)
    if subtitle:
        layout["title"]["subtitle"] = {"text": plotly_text(subtitle), "font": {"size": 10}}
    fig = go.Figure({"data": traces, "layout": layout}, _validate=False)
    return Chart(title, fig, series, points)


def _x_top(series: list[Series]) -> float:
    tops = [float(np.nanmax(s.x)) for s in series if len(s.x) and np.isfinite(s.x).any()]
    return max(tops, default=0.0)


def _layout(title: str, kind: str, unit: str, opts: ChartOptions, series: list[Series], y_unit: str | None) -> dict:
    xaxis: dict = {"title": {"text": plotly_text(_x_title(kind, unit, opts.time_estimated))}, "showspikes": True, "spikemode": "across",
                   "spikethickness": 1, "automargin": True}
    if kind == X_STEP:
        xaxis.update(tickformat=",d", rangemode="tozero")
        if _x_top(series) <= FEW_STEPS and not opts.log_x:  # plotly would tick 0.5, 1.5…: read 0, 1, 1, 2…
            xaxis["dtick"] = 1
    elif kind == X_TIME:
        xaxis.update(ticksuffix=unit, rangemode="tozero")
    elif kind == X_FRACTION:
        xaxis.update(tickformat=".0%", rangemode="tozero")
    if opts.log_x:  # points at x <= 0 (step 0) are not drawn on a log axis
        xaxis.update(type="log", rangemode="normal")
        xaxis.pop("tickformat", None) if kind == X_STEP else None
    yaxis: dict = {"type": "log" if opts.log_y else "linear", "exponentformat": "SI", "automargin": True}
    if y_unit:
        yaxis["title"] = {"text": plotly_text(y_unit), "font": {"size": 10}, "standoff": 4}
    if opts.clip_outliers:
        rng = outlier_range(np.concatenate([s.y for s in series]), log=opts.log_y)
        if rng is not None:
            yaxis["range"] = list(rng)  # log10 units on a log axis, as plotly expects
    if "range" not in yaxis and not opts.log_y:
        flat = _flat_value(series)
        if flat:  # plotly pads a constant series by ±1, which draws a 1e-6 learning rate as 0
            yaxis["range"] = [flat - 0.1 * abs(flat), flat + 0.1 * abs(flat)]
    out = {"title": {"text": plotly_text(title), "font": {"size": 13}}, "hovermode": "x unified",
           "xaxis": xaxis, "yaxis": yaxis}
    if kind == X_STEP and opts.resumes:
        out["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": s, "x1": s, "y0": 0, "y1": 1,
                          "line": {"color": RESUME_COLOR, "width": 1, "dash": "dot"}} for s in opts.resumes]
        out["annotations"] = [{"x": s, "xref": "x", "y": 1, "yref": "paper", "text": "resumed", "showarrow": False,
                               "font": {"size": 9, "color": RESUME_COLOR}, "xanchor": "left", "yanchor": "top"}
                              for s in opts.resumes]
    if kind == X_STEP and opts.marked_step is not None:
        s = opts.marked_step
        out.setdefault("shapes", []).append({"type": "line", "xref": "x", "yref": "paper", "x0": s, "x1": s, "y0": 0,
                                             "y1": 1, "line": {"color": MARK_COLOR, "width": 1.5}})
        out.setdefault("annotations", []).append({"x": s, "xref": "x", "y": 1, "yref": "paper", "text": f"step {s}",
                                                  "showarrow": False, "font": {"size": 10, "color": MARK_COLOR},
                                                  "xanchor": "left", "yanchor": "top"})
    return out


def _flat_value(series: list[Series]) -> float | None:
    """The value of charts whose every point is one and the same non-zero number, else None."""
    lo = min((np.nanmin(s.y) for s in series if np.isfinite(s.y).any()), default=None)
    hi = max((np.nanmax(s.y) for s in series if np.isfinite(s.y).any()), default=None)
    return float(lo) if lo is not None and lo == hi and np.isfinite(lo) and lo != 0 else None


def _x_title(kind: str, unit: str, estimated: bool = False) -> str:
    if kind == X_STEP:
        return "step"
    if kind == X_TIME:
        return f"estimated time since start ({unit}; summed step durations)" if estimated else f"time since start ({unit})"
    if kind == X_FRACTION:
        return "fraction of each run (step / its last step)"
    return kind
