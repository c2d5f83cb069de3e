"""Rollouts: how rollouts ended and which gave no signal, per-step episode shape, the task grid,
and whether the trainer and the inference engine agree on token probabilities.

URL: `?run=&panel=outcomes|episodes|tasks|token_is&split=`. Steps are the run's step axis
(`rollouts.step_axis`: trainer steps, else "Harbor step folder"); a missing step is a gap in a line.
"""
import streamlit as st

from pages import _charts, _ui
from rundash_core.charts import rollout_figures as rf
from rundash_core.charts.figures import ChartOptions
from rundash_core.charts.series import series_index
from rundash_core.charts.view import panel_chart
from rundash_core.views import rollouts as ro
from rundash_core.views import trajectory_charts
from rundash_core.views.display_text import ABSENT, is_absent, md_code, table_height

PANELS = {"outcomes": "Outcomes", "episodes": "Episodes", "tasks": "Task grid", "token_is": "Token & IS"}
PLOT = dict(config=_charts.PLOTLY_CONFIG, width="stretch")


def outcomes_panel(samples, axis: str) -> None:
    counts = ro.outcomes_by_step(samples)
    share = st.toggle("As shares", key="ro_share")
    st.plotly_chart(trajectory_charts.name_step_axis(rf.outcome_bars(counts, share=share), axis), key="ro_outcomes",
                    **PLOT)
    group_frame = ro.groups(samples)
    hist = ro.correct_of_n(group_frame)
    if not hist:
        st.caption("No train groups of two or more rollouts with rewards: no GRPO signal to measure.")
        return
    c1, c2, c3 = st.columns(3)
    c1.metric("No signal", f"{hist['no_signal']:.0%}", help="Groups whose rollouts were all right or all wrong: "
              "their GRPO advantage is zero, so they teach nothing.")
    c2.metric("Mean solve rate", f"{hist['mean_solve_rate']:.0%}", help="Mean over train groups of correct/n "
              "(correct: reward above 0).")
    c3.metric("Groups", f"{hist['groups']:,}", help=f"Train groups of {hist['n']} rollouts"
              + (f"; {hist['other_sizes']} groups of other sizes are left out." if hist["other_sizes"] else "."))
    left, right = st.columns(2)
    left.plotly_chart(rf.correct_histogram(hist), key="ro_hist", **PLOT)
    signal = rf.step_lines(ro.with_gaps(ro.signal_by_step(group_frame)),
                           {"no_signal": "no signal", "zero_advantage": "zero advantage", "solve_rate": "solve rate"},
                           "Signal per step", "share of groups")
    right.plotly_chart(trajectory_charts.name_step_axis(signal, axis), key="ro_signal", **PLOT)


def episodes_panel(samples, axis: str) -> None:
    per_step = ro.episodes_by_step(samples)
    lines = ro.with_gaps(per_step)
    left, right = st.columns(2)
    left.plotly_chart(trajectory_charts.name_step_axis(rf.step_lines(
        lines, {"output_tokens": "output tokens (mean)", "output_tokens_p90": "output tokens (p90)",
                "input_tokens": "input tokens (mean)"}, "Lengths", "tokens"), axis), key="ro_lengths", **PLOT)
    right.plotly_chart(trajectory_charts.name_step_axis(rf.step_lines(
        lines, {"truncated": "truncated", "errors": "raised"}, "Abnormal ends", "share of rollouts"), axis),
        key="ro_abnormal", **PLOT)
    st.dataframe(per_step.rename(columns={"step": axis}), hide_index=True, placeholder=ABSENT,
                 height=table_height(len(per_step)),
                 column_config={axis: st.column_config.NumberColumn(format="%d"),
                                "truncated": st.column_config.NumberColumn(format="percent"),
                                "errors": st.column_config.NumberColumn(format="percent")})


def tasks_panel(run, samples, axis: str) -> None:
    splits = [s for s in ("train", "val", "eval") if ((samples["split"] == s) & samples["task_id"].notna()).any()]
    if not splits:
        _ui.empty_state("This run's samples carry no task ids: there is no task grid.")
        return
    split = _charts.url_widget(st.segmented_control, "Split", splits, key="split", default=splits[0], required=True)
    grid, tasks = ro.task_grid(samples, split=split)
    totals = ro.grid_totals(tasks)
    cols = st.columns(6)
    for col, (name, value) in zip(cols, totals.items()):
        col.metric(name.replace("_", " "), f"{value:,}")
    st.plotly_chart(trajectory_charts.name_step_axis(rf.grid_heatmap(ro.grid_with_gaps(grid)), axis), key="ro_grid",
                    **PLOT)
    st.caption("Select a cell to list its rollouts; each opens on the Trajectory page.")
    shown = grid.rename(columns=str)
    event = st.dataframe(shown, key=f"ro_grid_table_{split}", on_select="rerun", selection_mode="single-cell",
                         placeholder=ABSENT, height=table_height(len(shown)),
                         column_config={c: st.column_config.ProgressColumn(c, min_value=0, max_value=1, format="percent")
                                        for c in shown.columns})
    cells = event.selection.get("cells", []) if event is not None else []
    if cells:
        task, step, picked = ro.cell_samples(samples, grid, cells[0], split=split)
        st.markdown(f"**{md_code(task)}** at {axis} {step}: {len(picked)} rollout(s)")
        for sid, reward in zip(picked["sample_id"], picked["reward"]):
            shown_reward = ABSENT if is_absent(reward) else f"{reward:.3g}"
            st.page_link("pages/trajectory.py", label=f"{sid} · reward {shown_reward}", icon=":material/route:",
                         query_params={"run": run.run_id, "step": str(step), "sample": sid})
    st.dataframe(tasks, hide_index=True, placeholder=ABSENT, height=table_height(len(tasks)),
                 column_config={c: st.column_config.NumberColumn(format="percent")
                                for c in ("solve_rate", "first_rate", "last_rate", "delta")})


def token_is_panel(run) -> None:
    with st.spinner("Reading the run's metrics…"):
        index = _ui.read_or_stop(lambda: series_index(run), f"the metrics of {run.name}")
    panels = ro.token_is_panels(index.metrics)
    if not panels:
        _ui.empty_state("This run logs no rollout-correction, mismatch-KL or IS metrics.")
        return
    st.caption("Do the rollout engine and the trainer agree on token probabilities? KL and log-ppl gaps near 0, "
               "a Pearson correlation near 1 and few tokens beyond the clip bounds mean on-policy training.")
    opts = ChartOptions()
    charts = [panel_chart(index, title, keys, "step", opts) for title, keys in panels.items()]
    _charts.chart_grid(charts, key="ro_tis")


run = _ui.page_run("Rollouts")
panel = _charts.url_widget(st.segmented_control, "Panel", list(PANELS), key="panel", default="outcomes",
                           format_func=PANELS.get, required=True)
if panel == "token_is":
    token_is_panel(run)
    st.stop()
if "samples" not in run.capabilities:
    _ui.empty_state(_ui.NO_SAMPLES)
    st.stop()
samples = _ui.read_or_stop(lambda: run.samples(), f"the samples of {run.run_id}")
column, axis = ro.step_axis(samples)
samples = ro.on_axis(samples, column)
if samples.empty:
    _ui.empty_state("This run has no samples (yet).")
elif panel == "outcomes":
    outcomes_panel(samples, axis)
elif panel == "episodes":
    episodes_panel(samples, axis)
else:
    tasks_panel(run, samples, axis)
