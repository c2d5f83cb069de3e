"""Trajectory: a run's samples (stream or step mode, filters, sort, GRPO groups), the episodes in
flight, and one episode (side panel, Transcript / Timeline / Tools, tokens).

URL: `?run=&mode=&step=&split=&sort=&sample=&tokens=` (a `sample` deep-links to one episode;
`tokens=true` opens its token panel). Run text is shown through st.code / st.dataframe /
`md_escape` / escaped HTML, never raw.
"""
import time

import pandas as pd
import streamlit as st

from pages import _episode, _tokens, _ui
from pages._charts import PLOTLY_CONFIG, live_paused, url_widget
from rundash_core import episode_ids
from rundash_core.views import trajectory as tj
from rundash_core.views import trajectory_charts
from rundash_core.views.display_text import ABSENT, table_height

ID_COLUMNS, ID_PX = tj.ID_COLUMNS, 160  # (the order: tj.table_columns; long ids cut to ID_PX, whole in the cell)
LIVE_COLUMNS = ["sample_id", "status", "env", "split", "step", "group_id", "task_id", "turns", "output_tokens",
                "duration_s"]

run = _ui.page_run("Trajectory", needs="samples", without=_ui.NO_SAMPLES)
samples = _ui.read_or_stop(lambda: run.samples(), f"the samples of {run.run_id}")
try:
    running = run.overview().status == "running"
except Exception:  # noqa: BLE001 - the run card reports it; no live refresh then
    running = False
live = running and not live_paused(running)
STREAM_CHECK_S = 5.0  # how often a live page looks for new episodes in the stream (prime-rl spec 8.1 polls every 5 s)


# In flight ---------------------------------------------------------------------------------------
def _live_rows():
    try:
        return run.live_samples()
    except Exception:  # noqa: BLE001 - in-flight files come and go; a failed read shows nothing this tick
        return None


def _stream_grew() -> bool:
    """Every few seconds: whether the stream lists more episodes than this page shows (then the whole
    page reruns, so episodes that landed replace their in-flight rows in the table)."""
    last = st.session_state.setdefault("_tr_stream_check", time.monotonic())
    if time.monotonic() - last < STREAM_CHECK_S:
        return False
    st.session_state["_tr_stream_check"] = time.monotonic()
    try:
        return len(run.samples()) != len(samples)
    except Exception:  # noqa: BLE001 - the next full run shows what failed
        return False


@_ui.fragment(run_every=1.0 if live else None)
def _in_flight() -> None:
    """Episodes still being generated, read-only; re-read every second while the run is running."""
    if live and _stream_grew():
        st.rerun()
    flying = _live_rows()
    if flying is None or flying.empty:
        if running and flying is not None and not samples.empty:
            st.caption("No episode in flight right now.")
        return
    if running:
        st.caption(f"**IN FLIGHT · {len(flying)}** (read-only; an episode leaves this list when it lands in the stream)")
    else:  # the run ended with these unfinished: they will never land
        st.caption(f"**UNFINISHED · {len(flying)}** (in flight when the run stopped; they never landed in the stream)")
    event = st.dataframe(flying[LIVE_COLUMNS], key="tr_live", on_select="rerun", selection_mode="single-row",
                         hide_index=True, placeholder=ABSENT, height=table_height(len(flying), 6),
                         column_config={"duration_s": st.column_config.NumberColumn("elapsed", format="%.1f s")})
    picked = [str(flying.iloc[r]["sample_id"]) for r in event.selection.rows if r < len(flying)]
    if picked and picked != st.session_state.get("_tr_live_picked"):
        st.session_state["_tr_live_picked"] = picked
        st.query_params["sample"] = picked[0]
        st.rerun()


_in_flight()
if samples.empty and not st.query_params.get("sample"):
    _ui.empty_state("This run has no samples (yet).")
    st.stop()
step_column, step_name = tj.step_axis(samples)  # trainer steps, else "Harbor step folder" (as on Rollouts)
steps, eval_steps = tj.step_options(tj.axis_steps(samples, step_column))


# Mode, step strip, filters -----------------------------------------------------------------------
def _move(delta: int) -> None:
    st.session_state["step"] = tj.neighbour(steps, st.session_state.get("step"), delta)


def _from_strip() -> None:
    st.session_state["step"] = st.session_state.get("tr_strip")


def _step_label(s) -> str:
    return f"all {step_name}s" if s is None else f"{step_name} {s}" + (" · eval" if s in eval_steps else "")


mode = url_widget(st.segmented_control, "Mode", list(tj.MODES), key="mode", format_func=tj.MODES.get,
                  default="step" if "step" in st.query_params else "stream", required=True,
                  help="Stream: every episode, newest first. Step: one step's samples, by group.") or "stream"
step = None
if mode == "step":
    c_step, c_prev, c_next, c_strip = st.columns([1.3, 0.3, 0.3, 6], vertical_alignment="bottom")
    step = url_widget(c_step.selectbox, step_name.capitalize(), [None, *steps], key="step", format_func=_step_label)
    c_prev.button("", icon=":material/chevron_left:", key="tr_prev", on_click=_move, args=(-1,),
                  help=f"Previous {step_name}")
    c_next.button("", icon=":material/chevron_right:", key="tr_next", on_click=_move, args=(1,), help=f"Next {step_name}")
    window = tj.step_window(steps, step, width=15)
    if window:
        st.session_state["tr_strip"] = step if step in window else None
        c_strip.segmented_control("Steps", window, key="tr_strip", on_change=_from_strip, label_visibility="collapsed",
                                  format_func=lambda s: f"{s} ◆" if s in eval_steps else str(s),
                                  help=f"One block per {step_name} (◆: holds eval samples); the selected one is filled.")

c_split, c_env, c_status, c_sort, c_err, c_grp = st.columns([1, 1.2, 1.2, 1.2, 0.9, 0.9], vertical_alignment="bottom")
splits = sorted(s for s in samples["split"].dropna().unique())
split = url_widget(c_split.selectbox, "Kind", [None, *splits], key="split",
                   format_func=lambda s: "all kinds" if s is None else s)
envs = sorted(e for e in samples["env"].dropna().unique())
env = c_env.selectbox("Env", [None, *envs], key="tr_env", format_func=lambda e: "all envs" if e is None else e)
statuses = sorted(s for s in samples["status"].dropna().unique())
status = c_status.selectbox("Status", [None, *statuses], key="tr_status",
                            format_func=lambda s: "any status" if s is None else s)
sort = url_widget(c_sort.selectbox, "Sort", [None, *tj.SORTS], key="sort",
                  format_func=lambda s: ("newest first" if mode == "stream" else "by group") if s is None
                  else tj.SORT_LABELS[s])
errors_only = c_err.toggle("Errors only", key="tr_errors")
by_group = c_grp.toggle("Groups", key="tr_groups", help="All samples of one prompt (GRPO group) together, "
                                                        "with their reward spread.")

view = tj.filter_samples(samples, split=split, step=step, env=env, errors_only=errors_only, status=status,
                         step_column=step_column)
if sort is None:
    view = tj.newest_first(view) if mode == "stream" else tj.sort_samples(view, "group")
else:
    view = tj.sort_samples(view, sort)
if mode == "stream" and (fig := trajectory_charts.arrival_histogram(view)) is not None:
    st.plotly_chart(fig, key="tr_arrivals", config=PLOTLY_CONFIG, width="stretch")

group = None
if by_group:
    groups = tj.group_stats(tj.on_axis(view, step_column))
    if groups.empty:
        st.caption("These samples carry no group ids.")
    else:
        stats = groups.set_index("group_id")
        group = st.selectbox(
            "Group", [None, *groups["group_id"]], key="tr_group",
            format_func=lambda g: f"all {len(groups)} groups (widest reward spread first)" if g is None else
            f"{str(g)[:13]} · {step_name} {stats.at[g, 'step']} · {stats.at[g, 'n']} samples · reward "
            f"{stats.at[g, 'reward_min']:.3g}–{stats.at[g, 'reward_max']:.3g} (σ {stats.at[g, 'reward_std']:.3g})")
        if group not in stats.index:
            group = None
        if (fig := trajectory_charts.group_spread(groups, view, selected=group)) is not None:
            st.plotly_chart(fig, key="tr_spread", config=PLOTLY_CONFIG, width="stretch")
        st.dataframe(groups, key="tr_group_table", hide_index=True, placeholder=ABSENT,
                     height=table_height(len(groups), 6),
                     column_config={"step": st.column_config.NumberColumn(step_name, format="%d"),
                                    **{c: st.column_config.NumberColumn(format="%.3f") for c in
                                       ("reward_min", "reward_mean", "reward_max", "reward_std")}})
        if group is not None:
            view = tj.sort_samples(view[view["group_id"] == group], sort or "reward_desc")
            st.caption(f"Group {_ui.md_code(group)}: its samples below, best first.")

st.caption(f"**{len(view):,}** of {len(samples):,} samples")
shown = view[tj.table_columns(view.columns)].assign(
    arrival=pd.to_datetime(view["arrival"], unit="s", utc=True))
table_key = f"tr_table_{mode}_{split}_{step}_{env}_{status}_{errors_only}_{sort}_{group}"
event = st.dataframe(shown, key=table_key, on_select="rerun", selection_mode="single-row", hide_index=True,
                     column_config={"arrival": st.column_config.DatetimeColumn(format="HH:mm:ss"),
                                    "reward": st.column_config.NumberColumn(format="%.3f"),
                                    "advantage": st.column_config.NumberColumn(format="%+.3f"), "locator": None,
                                    "step_folder": st.column_config.NumberColumn(tj.FOLDER_LABEL, format="%d"),
                                    **{c: st.column_config.TextColumn(c, width=ID_PX, help=f"Long ids are cut to the column: the "
                                                                      f"whole {c} is in the cell, double-click it to read it.")
                                       for c in ID_COLUMNS if c in shown.columns},
                                    **{c: None for c in shown.columns if len(shown) and shown[c].isna().all()}},
                     placeholder=ABSENT, height=min(36 + 35 * len(view), 420))
picked = tuple(event.selection.rows)
if picked and picked != st.session_state.get("_tr_picked"):
    st.query_params["sample"] = episode_ids.link_id(samples, str(view.iloc[picked[0]]["sample_id"]))
st.session_state["_tr_picked"] = picked

sample_id = st.query_params.get("sample")
if not sample_id:
    st.caption("Select a row to open its episode.")
    st.stop()


# Episode -----------------------------------------------------------------------------------------
def _read(sid: str):
    try:
        return run.episode(sid), None
    except KeyError as e:
        return None, str(e.args[0]) if e.args else ""


episode, missing = _ui.read_or_stop(lambda: _read(sample_id), f"sample {sample_id} of {run.run_id}")
if episode is None:
    st.warning(f"This run has no sample {_ui.md_code(sample_id)}." + (f" ({_ui.md_escape(missing)})" if missing else ""))
    st.stop()

hit = samples[samples["sample_id"] == episode.sample_id]  # (the URL may name it by its episode id)
row = hit.iloc[0].to_dict() if not hit.empty else None


def _show_sample(sid: str) -> None:
    """Prev/next: the URL names the sample shown."""
    st.query_params["sample"] = episode_ids.link_id(samples, sid)


ids = view["sample_id"].tolist()
at = ids.index(episode.sample_id) if episode.sample_id in ids else None
c_head, c_up, c_down = st.columns([10, 0.5, 0.5], vertical_alignment="bottom")
c_head.markdown(f"### Sample {_ui.md_code(episode.sample_id)}"
                + (f" · task {_ui.md_code(episode.task_id)}" if episode.task_id else ""))
for col, delta, icon, key, what in ((c_up, -1, "arrow_upward", "tr_prev_sample", "Previous"),
                                    (c_down, 1, "arrow_downward", "tr_next_sample", "Next")):
    target = ids[at + delta] if at is not None and 0 <= at + delta < len(ids) else None
    col.button("", icon=f":material/{icon}:", key=key, disabled=target is None, on_click=_show_sample, args=(target,),
               help=f"{what} sample of the table")
side, main = st.columns([1, 3])
with side:
    _episode.side_panel(episode, row)
with main:
    _episode.views(episode)
    _tokens.token_panel(run, episode)
