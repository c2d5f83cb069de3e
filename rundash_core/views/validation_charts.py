"""The Validation page's figures and tables, as plain functions over the validation frames.

Events sit on a categorical x axis in their order (trainer step, then the dumps the log never
paired, by name): an unpaired dump is shown by its own name, never at a guessed step. Every data
string in a figure goes through `plotly_text` (plotly renders some HTML tags).
"""
from __future__ import annotations

import urllib.parse

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rundash_core import episode_ids
from rundash_core.charts.figures import DASHES, PALETTE, plotly_text
from rundash_core.charts.gaps import STEP_GAP, break_before
from rundash_core.sources.swe_lego_rl import failure_modes as fm
from rundash_core.views import validation as val

AMBER = "#E8A33D"
GREEN = "#59A14F"
LOW_NOTE = "low coverage — indicative only"
CATEGORY_COLORS = {"success": GREEN, "self_verif": "#8CD17D", "wrong_fix": "#F28E2B",
                   "gold_edited_failed": "#E15759", "file_loc_fail": "#B07AA1", "edited_failed": "#FF9DA7",
                   "no_impl": "#9C755F", "dead_loop": "#EDC948", "infra": "#BAB0AC"}


def _layout(fig: go.Figure, *, title: str, y: str, percent: str = "") -> go.Figure:
    fig.update_layout(title=title, height=340, margin={"t": 48, "b": 40, "l": 50, "r": 20},
                      legend={"orientation": "h", "y": -0.25}, hovermode="closest")
    fig.update_yaxes(title=y, tickformat=percent or None)
    fig.update_xaxes(type="category", title="validation event")
    return fig


def low_coverage_events(frame: pd.DataFrame) -> set[str]:
    """Events a source flags as covering less than half of the fixed cohort (`low_coverage`)."""
    rows = frame[(frame["statistic"] == "low_coverage") & (frame["value"] >= 1)]
    return set(rows["event"].astype("str"))


def event_labels(frame: pd.DataFrame) -> dict[str, str]:
    return {e: val.event_label(e, s) for e, s in val.events(frame).itertuples(index=False)}


SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down")


def series_style(i: int) -> dict:
    """The i-th series of a validation chart: its own colour, dash and marker symbol, and a marker
    that shrinks with i, so a series drawn exactly over an earlier one (avg@k = pass@1, the trials'
    val_score = the log's val-core) leaves the earlier one's larger marker and dashes showing."""
    return {"color": PALETTE[i % len(PALETTE)], "dash": DASHES[i % len(DASHES)], "symbol": SYMBOLS[i % len(SYMBOLS)],
            "size": max(13 - 2 * i, 6)}


def with_gaps(labels: list[str], steps: list, values: dict[int, float]) -> tuple[list[int], list[str], list]:
    """Positions, x labels and y of one series over every event of a chart (`labels`, `steps` in
    axis order; `values` by event position): an event the series lacks is a gap (None), and so is
    a jump in the trainer steps of more than `gaps.STEP_GAP` × their usual stride (a missing
    validation). Returns (event position or -1 for an inserted break, x, y)."""
    known = np.array([float(s) if not pd.isna(s) else np.nan for s in steps], dtype="float64")
    paired = np.flatnonzero(np.isfinite(known))
    breaks = set(paired[break_before(known[paired], factor=STEP_GAP)].tolist()) if len(paired) else set()
    pos, x, y = [], [], []
    for i, label in enumerate(labels):
        if i in breaks:
            pos.append(-1), x.append(label), y.append(None)
        pos.append(i), x.append(label), y.append(values.get(i))
    return pos, x, y


def score_figure(frame: pd.DataFrame, series: list[str]) -> go.Figure:
    """Val Score per event, one line per `source · statistic`, each with its own dash and marker
    (`series_style`); an event a series lacks or a skipped validation is a gap (`with_gaps`);
    events with low coverage are drawn as open amber markers that say so."""
    labels, low = event_labels(frame), low_coverage_events(frame)
    names = val.series_names(frame)
    ev = val.events(frame)
    order = {e: i for i, e in enumerate(ev["event"])}
    axis = [plotly_text(labels[e]) for e in ev["event"]]
    fig = go.Figure()
    for i, name in enumerate(series):
        rows = frame[names == name]
        values = {order[e]: float(v) if not pd.isna(v) else None for e, v in zip(rows["event"], rows["value"])}
        pos, x, y = with_gaps(axis, list(ev["step"]), values)
        is_low = [p >= 0 and ev["event"].iloc[p] in low for p in pos]
        st = series_style(i)
        fig.add_trace(go.Scatter(
            x=x, y=y, name=plotly_text(name), mode="lines+markers", connectgaps=False,
            line={"color": st["color"], "dash": st["dash"]},
            marker={"size": [13 if lo else st["size"] for lo in is_low],
                    "color": [AMBER if lo else st["color"] for lo in is_low],
                    "symbol": [st["symbol"] + "-open" if lo else st["symbol"] for lo in is_low], "line": {"width": 2}},
            text=[LOW_NOTE if lo else "" for lo in is_low],
            hovertemplate="%{x}<br>%{y:.4g}<br>%{text}<extra>" + plotly_text(name) + "</extra>"))
    return _layout(fig, title="Val Score per event", y="val score")


def percent_tickformat(values) -> str:
    """A percent tick format with enough decimals that ticks about a fifth of the data's range
    apart read differently (24.61%, 24.63%, not 24.6% three times); at most 3 decimals."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype="float64")
    span = float(v.max() - v.min()) * 100 if len(v) else 0.0  # in percentage points
    if span <= 0:
        return ".1%"
    decimals = int(np.clip(np.ceil(-np.log10(span / 5)), 0, 3))
    return f".{decimals}%"


def cot_figure(cot: pd.DataFrame) -> go.Figure:
    """CoT share per event: mean per task (solid) and character-weighted (dashed); points whose
    coverage of the cohort is below one half are larger, amber and say "low coverage —
    indicative only" (SWE-Lego-RL spec 7.2). Ticks carry the decimals the data's range needs
    (`percent_tickformat`); a skipped validation is a gap."""
    x_axis = [plotly_text(val.event_label(e, s)) for e, s in zip(cot["event"], cot["step"])]
    low_rows = cot["low_coverage"].fillna(False).astype(bool).tolist()
    note_rows = [val.coverage_note(int(n), int(c)) if lo else f"{int(n)}/{int(c)} tasks"
                 for n, c, lo in zip(cot["n"], cot["cohort_size"], low_rows)]
    fmt = percent_tickformat([*cot["cot_ratio"].astype("float64"), *cot["cot_ratio_weighted"].astype("float64")])
    fig = go.Figure()
    for i, (col, name) in enumerate((("cot_ratio", "mean per task"), ("cot_ratio_weighted", "character-weighted"))):
        values = {j: float(v) for j, v in enumerate(cot[col]) if not pd.isna(v)}
        pos, x, y = with_gaps(x_axis, list(cot["step"]), values)
        low = [p >= 0 and low_rows[p] for p in pos]
        notes = [note_rows[p] if p >= 0 else "" for p in pos]
        st = series_style(i)
        fig.add_trace(go.Scatter(
            x=x, y=y, name=name, mode="lines+markers+text", connectgaps=False,
            line={"color": st["color"], "dash": st["dash"]},
            marker={"size": [14 if lo else st["size"] for lo in low], "color": [AMBER if lo else st["color"] for lo in low],
                    "symbol": st["symbol"]},
            text=[LOW_NOTE if lo and col == "cot_ratio" else "" for lo in low], textposition="top left",
            customdata=notes, hovertemplate="%{x}<br>%{y:" + fmt + "}<br>%{customdata}<extra>" + name + "</extra>"))
    return _layout(fig, title="CoT share of the val responses (fixed cohort)", y="CoT share", percent=fmt)


def delta_color(delta: float | None) -> str | None:
    """First→last CoT change: amber above +0.02 (more reasoning), green below −0.02."""
    if delta is None:
        return None
    return "orange" if delta > 0.02 else "green" if delta < -0.02 else "gray"


def failure_counts(modes: pd.DataFrame) -> pd.DataFrame:
    """Tasks per event × category (events in the frame's order, categories in display order)."""
    if modes.empty:
        return pd.DataFrame()
    order = list(dict.fromkeys(modes["event"]))
    counts = modes.groupby(["event", "category"]).size().unstack(fill_value=0)
    return counts.reindex(index=order, columns=fm.order(modes["category"]), fill_value=0)


def failure_figure(modes: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """Failure modes per event as a stacked bar (share of the event's tasks, counts on hover)."""
    counts = failure_counts(modes)
    fig = go.Figure()
    shares = counts.div(counts.sum(axis=1), axis=0)
    x = [plotly_text(labels.get(e, e)) for e in counts.index]
    for cat in counts.columns:
        fig.add_trace(go.Bar(x=x, y=shares[cat].tolist(), name=plotly_text(fm.LABELS.get(cat, cat)),
                             customdata=counts[cat].tolist(),
                             marker_color=CATEGORY_COLORS.get(cat),
                             hovertemplate="%{x}<br>%{customdata} tasks (%{y:.0%})<extra>" + plotly_text(cat) + "</extra>"))
    fig.update_layout(barmode="stack")
    return _layout(fig, title="Failure modes per event", y="share of tasks", percent=".0%")


def trajectory_link(run_id: str, *, step, sample_id: str, split: str | None = None) -> str:
    """The Trajectory page's URL for one sample (`?run=&step=&split=&sample=`), relative to the app."""
    query = {"run": run_id, "step": str(int(step)) if not pd.isna(step) else None, "split": split,
             "sample": sample_id}
    return "trajectory?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})


def bucket_table(modes: pd.DataFrame, run_id: str, category: str, samples: pd.DataFrame | None = None) -> pd.DataFrame:
    """The tasks of one failure bucket with a link to each trajectory; given the run's `samples()`,
    a link carries the writer's episode id (`episode_ids.link_ids`, as every deep link does)."""
    rows = modes[modes["category"] == category]
    if samples is not None and not samples.empty:
        links = dict(zip(samples["sample_id"].astype(str), episode_ids.link_ids(samples)))
        rows = rows.assign(sample_id=[links.get(str(i), i) for i in rows["sample_id"]])
    return pd.DataFrame({
        "task": rows["task_id"].to_numpy(), "capability": rows["capability"].to_numpy(),
        "reason": rows["reason"].to_numpy(),
        "trajectory": [trajectory_link(run_id, step=s, sample_id=i, split="val")
                       for s, i in zip(rows["sample_step"], rows["sample_id"])]})


FAILURE_EVENTS_AT_ONCE = 4  # more events than this are classified on request only


def failure_events(event_names: list[str], chosen: str, *, every: bool) -> list[str]:
    """The events whose failure modes are shown: all of them when asked (or when there are few),
    else the chosen one and the one before it. Classifying reads files of every task of an event
    (report, agent log): for a long run's hundreds of tasks per event that is on request only."""
    if every or len(event_names) <= FAILURE_EVENTS_AT_ONCE:
        return list(event_names)
    i = event_names.index(chosen) if chosen in event_names else len(event_names) - 1
    return event_names[max(i - 1, 0): i + 1]


def failure_modes_all(run, event_names: list[str]) -> pd.DataFrame:
    """The failure modes of some val events of a run (`run.failure_modes(event)` each)."""
    parts = [run.failure_modes(e) for e in event_names]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else run.failure_modes(None).iloc[0:0]
