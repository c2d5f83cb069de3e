"""The Trajectory page's figures (plotly, no Streamlit): the stream's arrival-time histogram, the
reward spread of GRPO groups, one episode's timeline, and the step axis' name on the Rollouts
panels' figures. Run text reaches plotly only as trace names, hover text and tick labels, which
plotly renders as text (escaped here too: plotly's labels accept a few HTML tags)."""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from rundash_core.charts.figures import PALETTE
from rundash_core.views.timeline import LANES, Span

_LAYOUT = dict(margin=dict(l=10, r=10, t=30, b=10), height=220, showlegend=False,
               paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)")
_LANE_COLOR = {"phases": "#9AA0A6", "model": PALETTE[0], "tools": PALETTE[1]}


def _esc(text: object) -> str:
    return html.escape(str(text), quote=False)


def name_step_axis(fig: go.Figure, label: str) -> go.Figure:
    """A figure drawn over steps (the Rollouts panels') whose x axis title and hover say what its
    steps are (`rollouts.step_axis`): 'step', or 'Harbor step folder' where trainer steps are not
    known."""
    if label == "step":
        return fig
    fig.update_xaxes(title=_esc(label))
    for trace in fig.data:
        if trace.hovertemplate:
            trace.hovertemplate = trace.hovertemplate.replace("step %{x}", f"{_esc(label)} %{{x}}")
        else:
            trace.hovertemplate = f"{_esc(label)} %{{x}}: %{{y}}<extra>%{{fullData.name}}</extra>"
    return fig


def arrival_histogram(samples: pd.DataFrame, *, bins: int = 60) -> go.Figure | None:
    """Episodes per arrival-time bin, one colour per split (None when no sample has a time)."""
    s = samples[samples["arrival"].notna()]
    if s.empty:
        return None
    fig = go.Figure()
    for i, (split, part) in enumerate(s.groupby(s["split"].fillna("?"), sort=True)):
        fig.add_trace(go.Histogram(x=pd.to_datetime(part["arrival"], unit="s", utc=True), name=_esc(split),
                                   nbinsx=bins, marker_color=PALETTE[i % len(PALETTE)],
                                   hovertemplate="%{x}<br>%{y} episodes<extra>" + _esc(split) + "</extra>"))
    fig.update_layout(**{**_LAYOUT, "showlegend": s["split"].nunique() > 1}, barmode="stack",
                      title=dict(text="arrivals", font=dict(size=12)), bargap=0.05)
    fig.update_yaxes(title=None)
    return fig


def group_spread(groups: pd.DataFrame, samples: pd.DataFrame, *, selected: str | None = None,
                 limit: int = 40) -> go.Figure | None:
    """Each group's rewards as a strip (one dot per sample) over its min–max bar, groups in the order
    of `groups` (`trajectory.group_stats`), at most `limit`; the selected group highlighted."""
    groups = groups.head(limit)
    if groups.empty:
        return None
    labels = {g: f"{i + 1}·{str(g)[:8]}" for i, g in enumerate(groups["group_id"])}
    s = samples[samples["group_id"].isin(labels)]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[labels[g] for g in groups["group_id"]], y=groups["reward_max"] - groups["reward_min"],
                         base=groups["reward_min"], marker_color=["#E15759" if g == selected else "rgba(150,150,150,.35)"
                                                                  for g in groups["group_id"]],
                         width=0.6, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=s["group_id"].map(labels), y=s["reward"], mode="markers",
                             marker=dict(size=6, color=PALETTE[0], opacity=0.8),
                             text=[_esc(x) for x in s["sample_id"]],
                             hovertemplate="%{text}<br>reward %{y:.4g}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[labels[g] for g in groups["group_id"]], y=groups["reward_mean"], mode="markers",
                             marker=dict(symbol="line-ew-open", size=16, color="#F28E2B"),
                             hovertemplate="mean %{y:.4g}<extra></extra>"))
    fig.update_layout(**_LAYOUT, title=dict(text="reward spread per group (dots: samples, dash: mean)",
                                            font=dict(size=12)))
    fig.update_xaxes(type="category", tickangle=-45, tickfont=dict(size=9))
    return fig


def timeline_figure(spans: list[Span]) -> go.Figure | None:
    """One horizontal bar per span, one row per lane (phases, model, tools; per agent when several)."""
    if not spans:
        return None
    lanes = sorted({s.lane for s in spans}, key=lambda lane: (lane.rsplit("/", 1)[0] if "/" in lane else "",
                                                             LANES.index(lane.rsplit("/", 1)[-1])
                                                             if lane.rsplit("/", 1)[-1] in LANES else 9))
    fig = go.Figure()
    for lane in lanes:
        part = [s for s in spans if s.lane == lane]
        base = lane.rsplit("/", 1)[-1]
        fig.add_trace(go.Bar(
            y=[_esc(lane)] * len(part), x=[max(s.end - s.start, 1e-3) for s in part], base=[s.start for s in part],
            orientation="h", marker_color=_LANE_COLOR.get(base, PALETTE[4]), marker_line_width=0.5,
            marker_line_color="rgba(0,0,0,.4)", text=[_esc(s.label) for s in part], textposition="inside",
            insidetextanchor="middle", customdata=[[_esc(s.label), _esc(s.detail)] for s in part],
            hovertemplate="%{customdata[0]}<br>%{base:.2f}s → +%{x:.2f}s<br>%{customdata[1]}<extra></extra>"))
    fig.update_layout(**{**_LAYOUT, "height": 90 + 45 * len(lanes)}, barmode="overlay",
                      title=dict(text="timeline (seconds since the episode's first event)", font=dict(size=12)))
    fig.update_yaxes(categoryorder="array", categoryarray=[_esc(x) for x in reversed(lanes)])
    fig.update_xaxes(title=None, rangemode="tozero")
    return fig
