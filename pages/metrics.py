"""Metrics: the run's charts in sections per flavor, or every logged key; smoothed, downsampled, live."""
import dataclasses

import streamlit as st

from pages import _charts, _ui
from rundash_core.charts.keytree import key_tree
from rundash_core.charts.sections import covered_keys, sections_for
from rundash_core.charts.series import X_STEP, X_TIME
from rundash_core.charts.view import ESTIMATED_NOTE, key_groups, metric_charts, metrics_index, section_charts, x_choices
from rundash_core.views.display_text import md_code, md_escape

MAX_CHARTS_PER_GROUP = 40
TREE_DEPTH = 3  # train → env → all/effective; deeper paths share their level-3 heading
MODES = {"sections": "Sections", "all": "All metrics"}


def header(run, ov) -> tuple:
    """Title and the view controls (all mirrored in the URL)."""
    st.markdown(f"## Metrics · {md_escape(run.name)}")
    c1, c2, c3 = st.columns([1.1, 1.2, 2.6])
    mode = _charts.url_widget(c1.segmented_control, "View", list(MODES), key="view", default="sections",
                              format_func=MODES.get, required=True)
    with c3:
        opts = _charts.chart_options()
    paused = _charts.live_paused(ov.status == "running", container=c1)
    return mode, opts, paused, c2


def sections_view(run, ov, index, x, opts) -> None:
    """The flavor's sections; a section's charts are computed only while it is open."""
    sections = sections_for(run.kind, ov.flavor, index.metrics, train_envs=ov.train_envs, eval_envs=ov.eval_envs)
    if not sections:
        _ui.empty_state("No section matches this run's metrics: see **All metrics**.")
    for i, section in enumerate(sections):
        label = f"**{md_escape(section.title)}** · {len(section.panels)} panel{'s' * (len(section.panels) != 1)}"
        box = st.expander(label, expanded=i == 0, key=f"s_{section.key}", bind="query-params")
        if box.open:
            with box:
                _charts.chart_grid(section_charts(index, section, x, opts), key=f"s_{section.key}")
    rest = len(set(index.metrics) - covered_keys(sections))
    if rest:
        st.caption(f"{rest} logged metric{'s' * (rest != 1)} are in no section: switch to **All metrics** to see them.")


def all_metrics_view(index, x, opts) -> None:
    """Every logged key, nested along its key path, behind a regex filter."""
    pattern = _charts.regex_filter("Filter metrics (regex)", key="filter", placeholder="e.g. reward|entropy")
    tree = key_tree(index.metrics, pattern=pattern.pattern if pattern else None, max_depth=TREE_DEPTH)
    if not tree.children and not tree.keys:
        _ui.empty_state("No metric matches this filter.")
        return
    for node in tree.children or [tree]:
        n = node.n_keys
        box = st.expander(f"**{md_escape(node.path or node.name)}** · {n} metric{'s' * (n != 1)}",
                          expanded=pattern is not None and n <= 12, key=f"a_{node.path}", bind="query-params")
        if box.open:
            with box:
                group(index, node, x, opts)


def group(index, node, x, opts) -> None:
    """The charts of one top-level group, with a sub-heading per deeper key path."""
    shown = 0
    for path, keys in key_groups(node):
        if shown >= MAX_CHARTS_PER_GROUP:
            st.caption(f"{node.n_keys - shown} more: narrow the filter to see them.")
            return
        keys = keys[: MAX_CHARTS_PER_GROUP - shown]
        if path != node.path:
            st.markdown(f"###### {md_escape(path)}")
        _charts.chart_grid(metric_charts(index, keys, x, opts), key=f"a_{path}", columns=3)
        shown += len(keys)


def marked_step(x: str) -> int | None:
    """`?step=N` (a report's citation links here): that step is marked on the step-axis charts."""
    raw = st.query_params.get("step")
    step = int(raw) if raw and raw.strip().isdigit() else None
    if raw and step is None:
        st.caption(f"{md_code('step=' + raw[:40])} in the link is not a step number.")
    elif step is not None:
        where = "on every chart with a step axis" if x == X_STEP else "once the X axis is **step**"
        st.caption(f"Step {step:,} (from the link) is marked {where}.")
    return step


run = _ui.current_run()
if run is None:
    _ui.empty_state("No run selected.")
    st.stop()

ov = run.overview()
mode, opts, paused, x_slot = header(run, ov)
opts = dataclasses.replace(opts, resumes=tuple(_ui.read_or_stop(run.resume_steps, f"the attempts of {run.name}")))
with st.spinner("Reading the run's metrics…"):
    index = _ui.read_or_stop(lambda: metrics_index(run), f"the metrics of {run.name}")
x = _charts.x_axis(x_choices(index), container=x_slot, estimated=index.time_estimated)
opts = dataclasses.replace(opts, marked_step=marked_step(x), time_estimated=index.time_estimated)
if x == X_TIME and index.time_estimated:
    st.caption(f"Estimated wall time: {ESTIMATED_NOTE}.")


@_ui.fragment(run_every=None if paused else 5.0)
def charts() -> None:
    """Re-reads only appended bytes on every tick while the run is running and not paused; a run
    that stops meanwhile switches the page out of live mode."""
    idx = index if paused else _ui.read_or_stop(lambda: metrics_index(run),
                                                f"the metrics of {run.name}")
    if not paused and run.overview().status != "running":
        st.rerun()
    if idx.rows == 0:
        _ui.empty_state("This run has no metrics yet.")
        _ui.problems_panel(run)
        return
    if mode == "all":
        all_metrics_view(idx, x, opts)
    else:
        sections_view(run, ov, idx, x, opts)


charts()
