"""Compare: several runs of any kinds on canonical metrics, a metric table, a config diff, groups."""
import dataclasses

import streamlit as st

from pages import _charts, _ui
from rundash_core import streamlit_cache as sc
from rundash_core.charts.aliases import alias_table
from rundash_core.charts.view import band_chart, compare_chart, compare_indexes, run_series_frame
from rundash_core.compare import (
    config_diff,
    default_runs,
    group_band,
    group_labels,
    metric_table,
    missing_configs,
    read_config,
    read_each,
    runs_summary,
)
from rundash_core.views.display_text import ABSENT, md_code, md_escape, short_labels, shortened, table_height

ALIGN = {"step": "step", "time": "relative wall time", "fraction": "fraction of run"}
NAME_WIDTH = 30  # run names in table cells and headers; longer ones are shortened in the middle
VALUE_WIDTH = 60  # config values in the diff


def chosen_runs(ids: list[str], default: list[str]) -> list[str]:
    """The runs the picker holds right now: this session's choice, else the link's (`?runs=`),
    else the default."""
    if "runs" in st.session_state:
        return [r for r in st.session_state["runs"] if r in ids]
    linked = st.query_params.get_all("runs")
    return [r for r in linked if r in ids] if linked else default


def pick_runs(runs) -> list[str]:
    """The current run and up to four recent runs of its kind are preselected; a regex on run names
    narrows the other choices, never the chosen runs (they stay in the picker); the selection lives
    in the URL (`?runs=`)."""
    c1, c2 = st.columns([1, 2.5])
    with c1:
        pattern = _charts.regex_filter("Run names (regex)", key="match", placeholder="e.g. qwen3|gsm8k")
    ids = [str(r) for r in runs["run_id"]]
    default = default_runs(runs, st.session_state.get("run_id"))
    keep = set(chosen_runs(ids, default)) | set(default)  # the default too: the widget needs it among the options
    options = [r for r in ids if r in keep or pattern is None or pattern.search(r)]
    return _charts.url_widget(c2.multiselect, "Runs", options, key="runs", default=default,
                              help="Two or more runs, any mix of kinds; each keeps one colour (and line style) "
                                   "on every chart. Opens with the current run and recent runs of its kind.")


def overlays(indexes, metrics, align, opts, colors) -> None:
    charts = [compare_chart(m, indexes, m, align, opts, colors) for m in metrics]
    _charts.chart_grid(charts, key="cmp")


def runs_block(overviews, labels: dict[str, str]) -> None:
    """Each run's one summary (`Run.overview()`: the card's step, status, duration, times)."""
    table = runs_summary({labels.get(r, r): ov for r, ov in overviews.items()})
    st.dataframe(table, hide_index=True, width="stretch", placeholder=ABSENT, height=table_height(len(table)))


def metric_table_block(frames, metrics, labels: dict[str, str]) -> None:
    st.markdown("#### Metric table")
    table = metric_table(frames, metrics)
    if table.empty:
        _ui.empty_state("None of these metrics is logged by the selected runs.")
        return
    table = table.assign(run=table["run"].map(labels))
    st.dataframe(table, hide_index=True, width="stretch", placeholder=ABSENT, height=table_height(len(table)),
                 column_config={
                     "run": st.column_config.TextColumn("run", help=f"Names longer than {NAME_WIDTH} characters "
                                                        "are shortened in the middle; the list above the "
                                                        "charts has them whole."),
                     "better": st.column_config.TextColumn(
                         "better", help="↑ higher is better (reward, score, accuracy, pass@k, throughput), "
                                        "↓ lower is better (loss, KL, time, grad norm); — no known direction "
                                        "(entropy, lengths, learning rate): no best then."),
                     "best": st.column_config.NumberColumn("best", help="The max of ↑ metrics, the min of ↓ ones."),
                     "step_of_best": st.column_config.NumberColumn("best at", format="%d",
                                                                   help="The first step reaching the best value."),
                 })


def config_block(configs, labels: dict[str, str]) -> str | None:
    """The config diff; returns the config key chosen to group runs by (or None)."""
    st.markdown("#### Config")
    only = _charts.url_widget(st.toggle, "Differences only", key="diff_only", value=True)
    missing = missing_configs(configs)
    if missing:
        st.warning("No config could be read for " + ", ".join(md_code(r) for r in missing)
                   + " (none found, or unreadable: the run's file problems say which)"
                   + (": it is" if len(missing) == 1 else ": they are")
                   + " left out of the diff, so whether it differs is unknown.", icon=":material/help:")
    diff = config_diff(configs, differences_only=only)
    if len(configs) - len(missing) < 2:
        st.caption("Fewer than two of these runs have a readable config: there is nothing to compare.")
    elif diff.empty:
        st.caption("The readable configs are identical." if only else "These configs have no keys.")
    else:
        shown = shortened(diff, {run: VALUE_WIDTH for run in diff.columns})
        columns = {"_index": st.column_config.TextColumn("key", pinned=True, width=_charts.text_width(diff.index, most=640),
                                                         help="The dotted config key, whole.")}
        for run in diff.columns:
            columns[run] = st.column_config.TextColumn(
                labels.get(run, run), help=f"{md_escape(run)} · values longer than {VALUE_WIDTH} characters are "
                                           "shortened in the middle: double-click a cell to read it whole.")
        st.dataframe(shown, width="stretch", height=table_height(len(diff), max_rows=16), placeholder=ABSENT,
                     column_config=columns)
    keys = list((diff if only else config_diff(configs, differences_only=True)).index)
    return _charts.url_widget(st.selectbox, "Group runs by config key", [None, *keys], key="group",
                              format_func=lambda k: "(no grouping)" if k is None else k,
                              help="Runs with the same value form a group; charts show each group's mean ± std.")


def groups_block(indexes, configs, key, metrics, align) -> None:
    groups = group_labels({label: configs[label] for label in indexes}, key)
    st.markdown(f"#### Grouped by {md_code(key)}")
    st.caption(" · ".join(f"{md_escape(g)}: {sum(v == g for v in groups.values())} run(s)"
                          for g in sorted(set(groups.values()))))
    cols = st.columns(2)
    for i, m in enumerate(metrics):
        bands = group_band({label: run_series_frame(ix, m, align) for label, ix in indexes.items()}, groups)
        if bands.empty:
            continue
        with cols[i % 2]:
            st.plotly_chart(band_chart(m, bands, align, {}), key=f"band_{i}", config=_charts.PLOTLY_CONFIG)
            _charts.csv_button(lambda b=bands: b.to_csv(index=False).encode(), f"{m} by {key}", key=f"band_csv_{i}",
                               help="Mean, std and run count per group and x.")


runs = _ui.runs_list()
st.markdown("## Compare")
chosen = pick_runs(runs)
with st.expander("Canonical metric aliases (how runs of different frameworks line up)"):
    aliases = alias_table()
    st.dataframe(aliases, hide_index=True, width="stretch", placeholder=ABSENT,
                 height=table_height(len(aliases), max_rows=16))
if len(chosen) < 2:
    _ui.empty_state("Pick two or more runs to compare.")
    st.stop()

c1, c2 = st.columns([1, 2.6])
align = _charts.url_widget(c1.segmented_control, "Align on", list(ALIGN), key="align", default="step",
                           format_func=ALIGN.get, required=True,
                           help="Fraction of run: each run's steps over its own last step, so runs of 15 and "
                                "1,120 steps both span the chart.")
log_x = _charts.url_widget(c1.toggle, "Log x", key="logx", help="A log x axis (step 0 is not drawn on it).")
with c2:
    opts = dataclasses.replace(_charts.chart_options(), log_x=log_x)
def canonical(run):
    indexes, frames = compare_indexes({run.run_id: run})
    return indexes[run.run_id], frames[run.run_id]


paths = runs.set_index("run_id")["path"]
selected, left_out = read_each({rid: rid for rid in chosen}, lambda rid: sc.get_run(paths[rid], rid))
with st.spinner("Reading the runs' metrics…"):
    read, failed = read_each(selected, canonical)  # one run that cannot be read is left out, with why
    overviews, failed_overview = read_each({r: selected[r] for r in read}, lambda run: run.overview())
left_out |= failed | failed_overview
for rid, why in left_out.items():
    st.warning(f"left out: {md_code(rid)}: {md_escape(why)}", icon=":material/block:")
chosen = [r for r in chosen if r not in left_out]
selected = {r: selected[r] for r in chosen}
indexes, frames = {r: read[r][0] for r in chosen}, {r: read[r][1] for r in chosen}
if len(chosen) < 2:
    _ui.empty_state("Fewer than two of the chosen runs could be read: pick others to compare.")
    st.stop()
untimed = [label for label, ix in indexes.items() if ix.t0 is None]
estimated = [label for label, ix in indexes.items() if ix.time_estimated]
if align == "time" and untimed:
    st.caption("No timestamps and no step durations in " + ", ".join(f"{md_code(r)}" for r in untimed)
               + ": these runs show only when aligned on step.")
if align == "time" and estimated:
    st.caption("Estimated wall time for " + ", ".join(f"{md_code(r)}" for r in estimated)
               + ": their rows carry no timestamps, so each step is placed at the sum of the logged step "
                 "durations (`timing_s/step`) up to it (start-up and time outside the step timer not counted).")
available = [m for m in alias_table()["alias"].drop_duplicates() if any(m in ix.metrics for ix in indexes.values())]
metrics = _charts.url_widget(st.multiselect, "Metrics", available, key="metrics", default=available)
colors = _charts.colors_for(chosen)
labels = dict(zip(chosen, short_labels(chosen, NAME_WIDTH)))
st.caption(" · ".join(f"{md_code(r)} ({md_escape(selected[r].kind)})" for r in chosen))
overlays(indexes, metrics, align, opts, colors)
runs_block(overviews, labels)
metric_table_block(frames, metrics, labels)
configs = {rid: read_config(run) for rid, run in selected.items()}  # run.config(): secrets already hidden
group_key = config_block(configs, labels)
if group_key:
    groups_block(indexes, configs, group_key, metrics, align)
