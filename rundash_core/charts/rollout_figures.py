"""Plotly figures of the rollout panels (`rundash_core.views.rollouts` frames in, figures out)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from rundash_core.charts.figures import color_of, plotly_text

OUTCOME_COLORS = {"completed": "#2e7d32", "truncated": "#f9a825", "aborted": "#8d6e63", "pending": "#90a4ae"}
ERROR_COLORS = ["#c62828", "#ad1457", "#e65100", "#6a1b9a", "#b71c1c", "#d84315"]
HEIGHT = 320


def _layout(title: str, y_title: str, **extra) -> dict:
    layout = dict(title=dict(text=plotly_text(title), font=dict(size=14)), height=HEIGHT,
                  margin=dict(l=50, r=10, t=40, b=80), xaxis_title="step", yaxis_title=y_title,
                  legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
    return {**layout, **extra}


def outcome_bars(counts: pd.DataFrame, *, share: bool = False) -> go.Figure:
    """Stacked bars per step of how rollouts ended (`rollouts.outcomes_by_step`); errors by type in reds."""
    per = counts.groupby(["step", "outcome"], sort=True)["n"].sum().unstack(fill_value=0)
    if share:
        per = per.div(per.sum(axis=1), axis=0)
    known = [o for o in OUTCOME_COLORS if o in per.columns]
    errors = sorted(c for c in per.columns if c not in OUTCOME_COLORS)
    fig = go.Figure()
    for i, name in enumerate(known + errors):
        color = OUTCOME_COLORS.get(name) or ERROR_COLORS[(i - len(known)) % len(ERROR_COLORS)]
        fig.add_bar(x=per.index.astype(int), y=per[name], name=plotly_text(name), marker_color=color,
                    hovertemplate="step %{x}: %{y}<extra>" + plotly_text(name) + "</extra>")
    fig.update_layout(**_layout("How rollouts ended", "share" if share else "rollouts", barmode="stack"))
    return fig


def correct_histogram(summary: dict) -> go.Figure:
    """The correct-out-of-n histogram: the two end bins (no signal) coloured apart."""
    n, hist = summary["n"], summary["histogram"]
    colors = ["#c62828" if k in (0, n) else color_of(0) for k in range(n + 1)]
    fig = go.Figure(go.Bar(x=list(range(n + 1)), y=hist, marker_color=colors,
                           hovertemplate="%{x} of " + str(n) + " correct: %{y} groups<extra></extra>"))
    fig.update_layout(**_layout(f"Correct out of {n} (train groups)", "groups"))
    fig.update_xaxes(title="correct rollouts in the group", dtick=1)
    return fig


def step_lines(frame: pd.DataFrame, columns: dict[str, str], title: str, y_title: str) -> go.Figure:
    """One line per column of a per-step frame (`columns`: column -> legend name)."""
    fig = go.Figure()
    for i, (col, name) in enumerate(columns.items()):
        if col in frame.columns and frame[col].notna().any():
            fig.add_scatter(x=frame["step"].astype(int), y=frame[col], name=plotly_text(name), mode="lines+markers",
                            line=dict(color=color_of(i)))
    fig.update_layout(**_layout(title, y_title))
    return fig


def grid_heatmap(grid: pd.DataFrame) -> go.Figure:
    """Task × step solve rates: green solved, red failed, blank not rolled out."""
    fig = go.Figure(go.Heatmap(
        z=grid.to_numpy(dtype=float), x=[str(c) for c in grid.columns], y=[plotly_text(t) for t in grid.index],
        zmin=0, zmax=1, colorscale=[[0, "#c62828"], [0.5, "#fdd835"], [1, "#2e7d32"]],
        hovertemplate="%{y} · step %{x}: solve rate %{z:.2f}<extra></extra>", colorbar=dict(title="solved")))
    fig.update_layout(**_layout("Task grid", "task", height=max(HEIGHT, 18 * len(grid) + 120)))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category")
    return fig
