"""Compare: several runs of any kinds on canonical metrics, a summary, a config diff, groups."""
import streamlit as st

from pages import _charts, _ui
from rundash_core import streamlit_cache as sc
from rundash_core.charts.aliases import alias_table
from rundash_core.charts.view import band_chart, compare_chart, compare_indexes, run_series_frame
from rundash_core.compare import config_diff, config_value, group_band, summary
from rundash_core.present import md_code, md_escape
from rundash_core.redact import redact

ALIGN = {"step": "step", "time": "relative wall time"}


def pick_runs(runs) -> list[str]:
    """A regex on run names narrows the choices; the selection lives in the URL (`?runs=`)."""
    c1, c2 = st.columns([1, 2.5])
    with c1:
        pattern = _charts.regex_filter("Run names (regex)", key="match", placeholder="e.g. qwen3|gsm8k")
    ids = [r for r in runs["run_id"] if pattern is None or pattern.search(r)]
    current = st.session_state.get("run_id")
    default = [r for r in ids if r == current][:1]
    return _charts.url_widget(c2.multiselect, "Runs", ids, key="runs", default=default,
                              help="Two or more runs, any mix of kinds; each keeps one colour on every chart.")


def overlays(indexes, metrics, align, opts, colors) -> None:
    charts = [compare_chart(m, indexes, m, align, opts, colors) for m in metrics]
    _charts.chart_grid(charts, key="cmp")


def summary_block(frames, metrics) -> None:
    st.markdown("#### Summary")
    table = summary(frames, metrics)
    if table.empty:
        _ui.empty_state("None of these metrics is logged by the selected runs.")
        return
    st.dataframe(table, hide_index=True, width="stretch")


def config_block(configs) -> str | None:
    """The config diff; returns the config key chosen to group runs by (or None)."""
    st.markdown("#### Config")
    only = _charts.url_widget(st.toggle, "Differences only", key="diff_only", value=True)
    diff = config_diff(configs, differences_only=only)
    if diff.empty:
        st.caption("The configs are identical." if only else "No config found for these runs.")
    else:
        st.dataframe(diff, width="stretch", height=min(600, 38 + 35 * len(diff)))
    keys = list((diff if only else config_diff(configs, differences_only=True)).index)
    return _charts.url_widget(st.selectbox, "Group runs by config key", [None, *keys], key="group",
                              format_func=lambda k: "(no grouping)" if k is None else k,
                              help="Runs with the same value form a group; charts show each group's mean ± std.")


def groups_block(indexes, configs, key, metrics, align) -> None:
    groups = {label: str(config_value(configs[label], key)) for label in indexes}
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
    st.dataframe(alias_table(), hide_index=True, width="stretch")
if len(chosen) < 2:
    _ui.empty_state("Pick two or more runs to compare.")
    st.stop()

c1, c2 = st.columns([1, 2.6])
align = _charts.url_widget(c1.segmented_control, "Align on", list(ALIGN), key="align", default="step",
                           format_func=ALIGN.get, required=True)
with c2:
    opts = _charts.chart_options()
rows = runs.set_index("run_id").loc[chosen]
selected = {rid: sc.get_run(row["path"], rid) for rid, row in rows.iterrows()}
with st.spinner("Reading the runs' metrics…"):
    indexes, frames = _ui.read_or_stop(lambda: compare_indexes(selected), "the selected runs' metrics")
untimed = [label for label, ix in indexes.items() if ix.t0 is None]
if align == "time" and untimed:
    st.caption("No timestamps in " + ", ".join(f"{md_code(r)}" for r in untimed)
               + " (verl console logs): these runs show only when aligned on step.")
available = [m for m in alias_table()["alias"].drop_duplicates() if any(m in ix.metrics for ix in indexes.values())]
metrics = _charts.url_widget(st.multiselect, "Metrics", available, key="metrics", default=available)
colors = _charts.colors_for(chosen)
st.caption(" · ".join(f"{md_code(r)} ({selected[r].kind})" for r in chosen))
overlays(indexes, metrics, align, opts, colors)
summary_block(frames, metrics)
configs = {rid: redact(_ui.run_config(run)) for rid, run in selected.items()}  # secrets: [hidden]
group_key = config_block(configs)
if group_key:
    groups_block(indexes, configs, group_key, metrics, align)
