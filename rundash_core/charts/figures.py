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

from .axes import log_safe, outlier_range, time_unit
from .downsample import MAX_POINTS, minmax_downsample
from .series import X_STEP, X_TIME, Series
from .smoothing import smooth

PALETTE = ("#4C9BE8", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7",
           "#9C755F", "#BAB0AC", "#8CD17D", "#D4A6C8")
HEIGHT = 280


@dataclass(frozen=True)
class ChartOptions:
    """How every chart of a view is drawn (the page's controls, mirrored in the URL)."""

    smoothing: str = "none"
    amount: float = 0.0
    log_y: bool = False
    clip_outliers: bool = False
    max_points: int = MAX_POINTS


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


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _traces(s: Series, color: str, opts: ChartOptions, xscale: float) -> tuple[list[dict], int]:
    y = log_safe(s.y) if opts.log_y else s.y
    line = smooth(s.x, y, opts.smoothing, opts.amount) if opts.smoothing != "none" else y
    d = minmax_downsample(s.x, y, max_points=opts.max_points, y_line=line)
    x = d.x / xscale
    label = plotly_text(s.label)
    common = {"type": "scatter", "mode": "lines", "legendgroup": label, "x": x}
    traces: list[dict] = []
    if d.bucketed:  # the band keeps every bucket's extremes: spikes stay visible
        traces.append({**common, "y": d.y_max, "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip",
                       "name": f"{label} max"})
        traces.append({**common, "y": d.y_min, "line": {"width": 0}, "fill": "tonexty", "showlegend": False,
                       "fillcolor": _rgba(color, 0.22), "hoverinfo": "skip", "name": f"{label} min"})
        shown = d.y  # the bucket means of the smoothed line
    else:  # short enough to send whole: the raw series stays as a faint line behind the smoothed one
        if opts.smoothing != "none":
            traces.append({**common, "y": y, "line": {"color": _rgba(color, 0.3), "width": 1}, "showlegend": False,
                           "name": f"{label} (raw)", "hovertemplate": "%{y:.4g} raw<extra></extra>"})
        shown = line
    traces.append({**common, "mode": "lines+markers" if len(x) == 1 else "lines", "y": shown,
                   "line": {"color": color, "width": 1.8}, "name": label,
                   "hovertemplate": "%{y:.4g}<extra>%{fullData.name}</extra>"})
    return traces, len(x)


def build_chart(title: str, series: list[Series], opts: ChartOptions = ChartOptions(), *,
                colors: dict[str, str] | None = None, height: int = HEIGHT, subtitle: str | None = None) -> Chart:
    """One panel's figure. `colors` maps a series label to its colour (Compare keeps one colour
    per run); otherwise series take the palette in order."""
    series = [s for s in series if len(s)]
    if not series:
        return Chart(title, go.Figure(), [], 0, note="no data")
    kind = series[0].x_kind
    xscale, unit = 1.0, ""
    if kind == X_TIME:
        unit, xscale = time_unit(max(float(np.nanmax(s.x)) for s in series))
    traces, points = [], 0
    for i, s in enumerate(series):
        color = (colors or {}).get(s.label) or color_of(i)
        t, n = _traces(s, color, opts, xscale)
        traces += t
        points = max(points, n)
    layout = _layout(title, kind, unit, height, opts, series)
    if subtitle:
        layout["title"]["subtitle"] = {"text": plotly_text(subtitle), "font": {"size": 10}}
        layout["margin"]["t"] = 56
    fig = go.Figure({"data": traces, "layout": layout}, _validate=False)
    return Chart(title, fig, series, points)


def _layout(title: str, kind: str, unit: str, height: int, opts: ChartOptions, series: list[Series]) -> dict:
    xaxis: dict = {"title": {"text": plotly_text(_x_title(kind, unit))}, "showspikes": True, "spikemode": "across",
                   "spikethickness": 1}
    if kind == X_STEP:
        xaxis.update(tickformat=",d", rangemode="tozero")
    elif kind == X_TIME:
        xaxis.update(ticksuffix=unit, rangemode="tozero")
    yaxis: dict = {"type": "log" if opts.log_y else "linear", "exponentformat": "SI"}
    if opts.clip_outliers:
        rng = outlier_range(np.concatenate([s.y for s in series]), log=opts.log_y)
        if rng is not None:
            yaxis["range"] = list(rng)  # log10 units on a log axis, as plotly expects
    if "range" not in yaxis and not opts.log_y:
        flat = _flat_value(series)
        if flat:  # plotly pads a constant series by ±1, which draws a 1e-6 learning rate as 0
            yaxis["range"] = [flat - 0.1 * abs(flat), flat + 0.1 * abs(flat)]
    return {"title": {"text": plotly_text(title), "font": {"size": 13}}, "height": height, "hovermode": "x unified",
            "margin": {"l": 10, "r": 10, "t": 40, "b": 10}, "xaxis": xaxis, "yaxis": yaxis,
            "legend": {"orientation": "h", "y": -0.25, "font": {"size": 10}},
            "showlegend": len(series) > 1}


def _flat_value(series: list[Series]) -> float | None:
    """The value of charts whose every point is one and the same non-zero number, else None."""
    lo = min((np.nanmin(s.y) for s in series if np.isfinite(s.y).any()), default=None)
    hi = max((np.nanmax(s.y) for s in series if np.isfinite(s.y).any()), default=None)
    return float(lo) if lo is not None and lo == hi and np.isfinite(lo) and lo != 0 else None


def _x_title(kind: str, unit: str) -> str:
    if kind == X_STEP:
        return "step"
    if kind == X_TIME:
        return f"time since start ({unit})"
    return kind
