"""Overview: the selected run's card and every run across the tracked directories."""
import streamlit as st

from pages import _ui
from rundash_core.runs_table import RUNS_TABLE_COLUMNS, filter_runs

TABLE_COLUMNS = {
    "run_id": st.column_config.TextColumn("run"),
    "step": st.column_config.NumberColumn("step", format="%d"),
    "max_steps": st.column_config.NumberColumn("max", format="%d"),
    "created": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm"),
    "updated": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm"),
}


def runs_filters(runs):
    c1, c2, c3 = st.columns([1, 1, 2])
    kinds = c1.multiselect("Kind", sorted(runs["kind"].unique()), key="f_kind")
    statuses = c2.multiselect("Status", ["running", "completed", "stopped", "unknown"], key="f_status")
    pattern = c3.text_input("Name (regex)", key="f_name", placeholder="e.g. qwen3-4b|sft")
    return dict(kinds=kinds, statuses=statuses, name_regex=pattern)


def runs_table(filters) -> None:
    """The runs list; re-reads statuses every few seconds while any run is live."""
    runs = _ui.runs_list()
    shown, error = filter_runs(runs, **filters)
    if error:
        st.error(error)
    if shown.empty:
        _ui.empty_state("No runs match these filters.")
        return
    event = st.dataframe(shown[RUNS_TABLE_COLUMNS], hide_index=True, width="stretch", key="runs_table",
                         on_select="rerun", selection_mode="single-row", column_config=TABLE_COLUMNS)
    rows = event.selection.rows if event is not None else []
    if rows and rows[0] < len(shown):
        chosen = shown.iloc[rows[0]]["run_id"]
        if chosen != st.session_state.get("run_id"):
            _ui.select_run(chosen)
            st.rerun()


run = _ui.current_run()
if run is not None:
    _ui.run_card(run)
    _ui.problems_panel(run)
    st.divider()

runs = _ui.runs_list()
st.subheader(f"Runs ({len(runs)})")
filters = runs_filters(runs)
live = bool((runs["status"] == "running").any())
st.fragment(runs_table, run_every=5.0 if live else None)(filters)
