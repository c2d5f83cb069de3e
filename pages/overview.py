"""Overview: the selected run's card and every run across the tracked directories."""
import streamlit as st

from pages import _ui
from rundash_core.views.display_text import ABSENT, format_time, shortened, table_height
from rundash_core.views.runs_table import RUNS_TABLE_COLUMNS, filter_runs

PATH_WIDTH, MODEL_WIDTH = 48, 32  # characters shown; longer values are shortened in the middle
TABLE_ROWS = 20  # the runs list shows this many runs whole, then scrolls
TABLE_COLUMNS = {
    "run_id": st.column_config.TextColumn("run", pinned=True),
    "step": st.column_config.NumberColumn("step", format="%d"),
    "max_steps": st.column_config.NumberColumn("max", format="%d", help="The run's step limit (— when it has none)."),
    "model": st.column_config.TextColumn("model", help=f"Names longer than {MODEL_WIDTH} characters (local "
                                                       "checkpoint paths) are shortened in the middle: "
                                                       "double-click a cell to read it whole."),
    "created": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm"),
    "updated": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm"),
    "path": st.column_config.TextColumn("path", help=f"Shortened in the middle to {PATH_WIDTH} characters: "
                                                     "double-click a cell to read it whole."),
}


def display_rows(shown):
    """The runs list as shown: long paths and model names shortened in the middle (their start and
    end stay readable; double-click a cell for the whole value), absent values as —."""
    return shortened(shown[RUNS_TABLE_COLUMNS], {"path": PATH_WIDTH, "model": MODEL_WIDTH})


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
    event = st.dataframe(display_rows(shown), hide_index=True, width="stretch", key="runs_table",
                         on_select="rerun", selection_mode="single-row", column_config=TABLE_COLUMNS,
                         placeholder=ABSENT, height=table_height(len(shown), max_rows=TABLE_ROWS))
    rows = event.selection.rows if event is not None else []
    if rows and rows[0] < len(shown):
        chosen = shown.iloc[rows[0]]["run_id"]
        if chosen != st.session_state.get("run_id"):
            _ui.select_run(chosen)
            st.rerun()


run = _ui.current_run()
if run is not None:  # (its run card is at the top of every page: app.py; its last record here)
    _ui.field(st, "UPDATED", format_time(run.overview().updated),
              help="The run's last record (for a verl log stamped only at its head: its start plus its step timings).")
    _ui.problems_panel(run)
    st.divider()

runs = _ui.runs_list()
st.subheader(f"Runs ({len(runs)})")
filters = runs_filters(runs)
live = bool((runs["status"] == "running").any())
_ui.fragment(runs_table, run_every=5.0 if live else None)(filters)
