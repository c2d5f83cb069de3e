"""The eval pane (prime-rl spec 8.2 "Eval pane"): progress of the eval blocks, avg@k / pass@k tiles
per env, a per-episode beeswarm of rewards per env, usage and timing breakdowns.

Inputs are the run contract's frames: `run.eval_plan()` (prime-rl `monitors/file/plan.json`:
episodes expected per env and step), `run.samples()` (the eval episodes), `run.validation()`
(avg@k / pass@k) and `run.metrics()` (the per-env timing means). Any kind with eval samples gets
the beeswarm and usage; the plan and timing only where the run has them.
"""
from __future__ import annotations

import re
import zlib

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go

from rundash_core import cache, frames
from rundash_core.charts.figures import PALETTE, plotly_text
from rundash_core.io.files import describe_unreadable, file_id, read_range
from rundash_core.run import Problem

EVAL_PLAN = frames.EVAL_PLAN
TIMING_PHASES = ("setup", "agent/model", "agent/harness", "scoring", "finalize")
PHASE_LABELS = {"setup": "setup", "agent/model": "model", "agent/harness": "tools / harness", "scoring": "scoring",
                "finalize": "finalize"}
_TIMING = re.compile(r"^eval/(?P<env>[^/]+)/all/[^/]+/timing/(?P<phase>setup|agent/model|agent/harness|scoring|"
                     r"finalize)/mean$")


def parse_plan(data: bytes) -> tuple[pd.DataFrame, str | None]:
    """plan.json = {"<env>": {"<step>": <expected episodes>}} → (frame, problem or None)."""
    try:
        plan = orjson.loads(data)
    except orjson.JSONDecodeError:
        return frames.empty(EVAL_PLAN), "not valid JSON"
    if not isinstance(plan, dict):
        return frames.empty(EVAL_PLAN), "not a JSON object"
    rows, bad = [], 0
    for env, steps in plan.items():
        for step, expected in (steps.items() if isinstance(steps, dict) else []):
            if str(step).isdigit() and isinstance(expected, int) and not isinstance(expected, bool) and expected >= 0:
                rows.append({"env": str(env), "step": int(step), "expected": expected})
            else:
                bad += 1
        bad += not isinstance(steps, dict)
    out = frames.typed(pd.DataFrame(rows), EVAL_PLAN) if rows else frames.empty(EVAL_PLAN)
    return out.sort_values(["step", "env"], kind="stable").reset_index(drop=True), \
        (f"{bad} entries are not step → episode counts" if bad else None)


def read_plan(path: str) -> tuple[pd.DataFrame, list[Problem]]:
    """A run's plan.json (cached by its FileId): the plan and what could not be read (a missing
    plan is no problem: runs without eval envs have none)."""
    import os

    fid = file_id(path)
    if fid is None:
        why = None if not os.path.lexists(path) else describe_unreadable(path)
        return frames.empty(EVAL_PLAN), [Problem(path, why)] if why else []

    def build():
        try:
            return parse_plan(read_range(path, 0, min(fid.size, 16 << 20)))
        except OSError as e:
            return frames.empty(EVAL_PLAN), f"cannot be read ({e.strerror or e})"
    plan, problem = cache.shared.current(("eval-plan", os.path.realpath(path)), fid, build)
    return plan, [Problem(path, problem)] if problem else []


def eval_samples(samples: pd.DataFrame) -> pd.DataFrame:
    return samples[samples["split"] == "eval"]


COMPLETE, PARTIAL, NOT_REACHED = "complete", "partial", "not reached"


def progress(plan: pd.DataFrame, samples: pd.DataFrame, validation: pd.DataFrame | None = None,
             last_step: int | None = None) -> pd.DataFrame:
    """Per planned eval block (env, step): expected and done episodes, the share done and its
    state. What the data shows decides: a block whose env logged its eval results at that step
    (a `validation` row of that source and step: the metrics a finished block writes, the points
    the Val Score chart plots) is complete, however few of its episodes were kept as samples;
    otherwise done counts its eval episodes (capped at expected). A block after the run's last
    logged step is "not reached" (not 0 done: it has not started)."""
    ev = eval_samples(samples)
    done = ev.groupby(["env", "step"]).size() if not ev.empty else pd.Series(dtype="int64")
    logged: set[tuple[str, int]] = set()
    if validation is not None and not validation.empty:
        v = validation[validation["step"].notna() & validation["value"].notna()]
        logged = set(zip(v["source"].astype(str), v["step"].astype("int64")))
    rows = []
    for env, step, expected in zip(plan["env"], plan["step"], plan["expected"]):
        if (str(env), int(step)) in logged:
            n, state = int(expected), COMPLETE
        else:
            n = min(int(done.get((env, step), 0)), int(expected))
            state = COMPLETE if n >= expected else NOT_REACHED if last_step is not None and step > last_step \
                else PARTIAL
        rows.append((n, state))
    out = plan.assign(done=pd.array([n for n, _ in rows], dtype="Int64"))
    out["share"] = (out["done"] / out["expected"].where(out["expected"] > 0)).astype("float64").fillna(1.0)
    out["state"] = pd.array([st for _, st in rows], dtype="string")
    return out


def tiles(validation: pd.DataFrame) -> pd.DataFrame:
    """The latest avg@k / pass@k per env (source): value, the event before's value, the change."""
    rows = validation[validation["statistic"].astype("str").str.match(r"^(avg|pass)@\d+$")]
    out = []
    for (source, stat), g in rows.groupby(["source", "statistic"], sort=True):
        g = g.dropna(subset=["value"])
        if g.empty:
            continue
        prev = g["value"].iloc[-2] if len(g) > 1 else np.nan
        out.append({"env": source, "statistic": stat, "step": g["step"].iloc[-1], "value": g["value"].iloc[-1],
                    "change": g["value"].iloc[-1] - prev})
    return pd.DataFrame(out, columns=["env", "statistic", "step", "value", "change"])


def _jitter(ids: pd.Series, width: float = 0.32) -> np.ndarray:
    """A stable horizontal offset per episode (the same on every rerun)."""
    return np.array([(zlib.crc32(str(i).encode()) % 1000) / 1000 - 0.5 for i in ids]) * 2 * width


def beeswarm_figure(samples: pd.DataFrame) -> go.Figure:
    """One dot per eval episode, rewards per env (dots spread sideways so equal rewards show)."""
    ev = eval_samples(samples)
    ev = ev[ev["reward"].notna()]
    envs = sorted(ev["env"].dropna().astype("str").unique())
    fig = go.Figure()
    for i, env in enumerate(envs):
        mine = ev[ev["env"] == env]
        fig.add_trace(go.Scatter(
            x=(i + _jitter(mine["sample_id"])).tolist(), y=mine["reward"].tolist(), mode="markers",
            name=plotly_text(env), marker={"color": PALETTE[i % len(PALETTE)], "size": 7, "opacity": 0.75},
            customdata=[[plotly_text(s), int(t) if pd.notna(t) else -1] for s, t in zip(mine["sample_id"], mine["step"])],
            hovertemplate="%{customdata[0]} · step %{customdata[1]}<br>reward %{y:.3g}<extra>" + plotly_text(env) + "</extra>"))
    fig.update_layout(title="Rewards per eval episode", height=320, margin={"t": 48, "b": 40, "l": 50, "r": 20},
                      showlegend=False)
    fig.update_xaxes(tickvals=list(range(len(envs))), ticktext=[plotly_text(e) for e in envs], title="env")
    fig.update_yaxes(title="reward")
    return fig


def usage(samples: pd.DataFrame) -> pd.DataFrame:
    """Tokens per env over the eval episodes: episodes, input and output tokens (sums, means)."""
    ev = eval_samples(samples)
    if ev.empty:
        return pd.DataFrame(columns=["env", "episodes", "input_tokens", "output_tokens", "output_per_episode"])
    g = ev.assign(env=ev["env"].astype(object).fillna("(none)")).groupby("env", sort=True)
    out = pd.DataFrame({"episodes": g.size(), "input_tokens": g["input_tokens"].sum(min_count=1),
                        "output_tokens": g["output_tokens"].sum(min_count=1),
                        "output_per_episode": g["output_tokens"].mean()}).reset_index()
    return out


def timing(tidy: pd.DataFrame) -> pd.DataFrame:
    """Mean seconds per phase and env at the latest eval step that logged them: setup, model,
    tools / harness, scoring, finalize (`eval/<env>/all/<agent>/timing/<phase>/mean`)."""
    stepped = tidy[tidy["step"].notna()]
    names = pd.unique(stepped["metric"].astype("str"))
    keys = {n: m for n in names if (m := _TIMING.match(n)) is not None}
    if not keys:
        return pd.DataFrame(columns=["env", "step", "phase", "seconds"])
    rows = stepped[stepped["metric"].astype("str").isin(keys)].assign(metric=lambda f: f["metric"].astype("str"))
    rows = rows.assign(env=[keys[m]["env"] for m in rows["metric"]], phase=[keys[m]["phase"] for m in rows["metric"]])
    last = rows.groupby("env")["step"].transform("max")
    rows = rows[rows["step"] == last].drop_duplicates(["env", "phase"], keep="last")
    out = rows[["env", "step", "phase"]].assign(seconds=rows["value"].to_numpy())
    order = {p: i for i, p in enumerate(TIMING_PHASES)}
    return out.sort_values(["env", "phase"], key=lambda c: c.map(order) if c.name == "phase" else c).reset_index(drop=True)


def timing_figure(times: pd.DataFrame) -> go.Figure:
    """Where an eval episode's time goes, per env: model vs tools and the other phases (stacked)."""
    fig = go.Figure()
    envs = sorted(times["env"].unique())
    for i, phase in enumerate(TIMING_PHASES):
        mine = times[times["phase"] == phase].set_index("env")["seconds"]
        if mine.empty:
            continue
        fig.add_trace(go.Bar(y=[plotly_text(e) for e in envs], x=[float(mine.get(e, 0.0)) for e in envs],
                             orientation="h", name=PHASE_LABELS[phase], marker_color=PALETTE[i % len(PALETTE)]))
    fig.update_layout(barmode="stack", title="Mean time per eval episode (latest eval step)", height=260,
                      margin={"t": 48, "b": 40, "l": 80, "r": 20}, legend={"orientation": "h", "y": -0.3})
    fig.update_xaxes(title="seconds")
    return fig
