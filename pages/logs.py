"""Logs: the run's log files, merged by time in one pane (or one pane per component), filtered by
regex, level and Ray actor, following a running run, paging back with "Load older".

URL: `?run=&attempt=&comp=&mode=&filter=&level=`. Lines are read by byte ranges
(`rundash_core.logs.reading`) and shown as escaped HTML with their colours (`rundash_core.logs.view`).
"""
import streamlit as st

from pages import _ui
from pages._charts import url_widget
from rundash_core.logs import view as logview
from rundash_core.logs.line import levels_at_least

FOLLOW_S = 2.0
TAILS = (500, 1000, 5000)
KEEP = 20_000  # lines kept in a pane while following or paging back

run = _ui.page_run("Logs", needs="logs", without="This run has no log files rundash can read.")
listing = _ui.read_or_stop(run.logs, f"the log files of {run.run_id}")
if listing.empty:
    _ui.empty_state("No log files yet.")
    st.stop()

attempts = logview.attempts(listing)
c_att, c_comp, c_mode, c_lines = st.columns([1, 3, 1, 0.8], vertical_alignment="bottom")
attempt = latest = None
if attempts:
    latest = run.latest_attempt() if run.latest_attempt() in attempts else attempts[-1]  # the `latest` link
    attempt = url_widget(c_att.selectbox, "Attempt", [None, *reversed(attempts)], key="attempt",
                         format_func=lambda a: f"latest (attempt {latest})" if a is None else f"attempt {a}")
files = logview.for_attempt(listing, attempt if attempt is not None else latest)
entries = logview.groups(files)
chosen = c_comp.multiselect("Components", list(entries), default=logview.default_groups(list(entries)), key="comp",
                            bind="query-params")
mode = url_widget(c_mode.segmented_control, "Panes", ["merge", "split"], key="mode", default="merge",
                  format_func=lambda m: {"merge": "merged", "split": "split"}[m]) or "merge"
tail = c_lines.selectbox("Lines", TAILS, index=1, key="lines")

c_filter, c_level, c_follow = st.columns([3, 1.2, 0.8], vertical_alignment="bottom")
pattern = c_filter.text_input("Filter (regex)", key="filter", bind="query-params",
                              placeholder="e.g. error|step 12", help="RE2 syntax, case-insensitive, on the text without colour.")
level = url_widget(c_level.selectbox, "Level at least", [None, *logview.LEVEL_CHOICES], key="level",
                   format_func=lambda lv: "all" if lv is None else lv)
live = run.overview().status == "running"
follow = c_follow.toggle("Follow", value=True, key="follow", disabled=not live,
                         help="While the run is running, new lines appear as they are written.")
actor_slot = st.container()
levels = levels_at_least(level) if level else None
picked_actors = st.session_state.get("actors") or None


def _read(paths, **kw):
    return _ui.read_or_stop(lambda: run.read_log(paths, tail=tail, pattern=pattern or None, levels=levels,
                                                 actors=picked_actors, **kw), "the log lines")


def _pane_state(key: str, paths: list[str]) -> dict:
    """This pane's lines and offsets, read again when what it shows changed."""
    sig = (run.run_id, tuple(paths), tail, pattern, tuple(levels or ()), tuple(picked_actors or ()))
    state = st.session_state.get(key)
    if state is None or state["sig"] != sig:
        frame = _read(paths)
        state = {"sig": sig, "frame": frame, "ends": frame.attrs["ends"], "seen": frame.attrs["versions"],
                 "older": frame.attrs["older"]}
        st.session_state[key] = state
        if frame.attrs.get("error"):
            st.error(frame.attrs["error"])
        for p in frame.attrs.get("problems", []):
            st.warning(f"Could not read {_ui.md_code(p.path)}: {_ui.md_escape(p.what)}")
    return state


def _load_older(key: str, paths: list[str]) -> None:
    state = st.session_state[key]
    older = _read(paths, before=state["older"])
    state["frame"] = logview.prepend_lines(older, state["frame"]).tail(KEEP).reset_index(drop=True)
    state["older"] = older.attrs["older"]


def _pane_body(key: str, paths: list[str], show_component: bool, height: int) -> None:
    state = _pane_state(key, paths)
    if live and follow:
        state["frame"], new, reset = logview.follow_lines(_read, paths, state["frame"], ends=state["ends"],
                                                          seen=state["seen"], keep=KEEP)
        if reset:  # a file was truncated or replaced: "Load older" starts again from the tails too
            state["older"] = new.attrs["older"]
        state["ends"], state["seen"] = new.attrs["ends"], new.attrs["versions"]
    frame = state["frame"]
    st.html(logview.pane_html(frame, show_component=show_component, height=height,
                              empty="No lines match." if pattern or levels or picked_actors else "No lines yet."))
    c_count, c_older = st.columns([4, 1])
    c_count.caption(logview.count_label(len(frame)) + (f" · {logview.per_component(frame)}" if show_component else ""))
    if any(v > 0 for v in state["older"].values()):
        c_older.button("Load older", key=f"{key}_older", on_click=_ui.in_session(_load_older), args=(key, paths),
                       icon=":material/history:")


def pane(key: str, paths: list[str], *, show_component: bool, height: int = logview.PANE_HEIGHT) -> None:
    """One scrolling pane; while following, only it refreshes (appended bytes only)."""
    shown.append(_pane_state(key, paths)["frame"])
    _ui.fragment(_pane_body, run_every=FOLLOW_S if live and follow else None)(key, paths, show_component, height)


def _toggle_max(entry: str | None) -> None:
    st.session_state["logs_max"] = entry


shown: list = []  # the panes' lines: which Ray actors are in view
if not chosen:
    _ui.empty_state("Pick a component.")
elif mode == "merge":
    pane("logs_merged", logview.merged_paths(entries, chosen), show_component=True)
else:
    maximized = st.session_state.get("logs_max")
    for entry in [maximized] if maximized in chosen else chosen:
        with st.container(border=True):
            c_name, c_file, c_max = st.columns([1.2, 3, 0.5], vertical_alignment="bottom")
            c_name.markdown(f"**{_ui.md_escape(entry)}**")
            options = entries[entry]
            files_of = ["__all__", *options] if entry == logview.ENV_GROUP and len(options) > 1 else options
            picked = c_file.selectbox("File", files_of, key=f"file_{entry}", label_visibility="collapsed",
                                      format_func=lambda p: "all env logs" if p == "__all__" else logview.file_label(p))
            c_max.button("", key=f"max_{entry}", icon=":material/close_fullscreen:" if maximized else
                         ":material/open_in_full:", help="Restore" if maximized else "Maximize",
                         on_click=_toggle_max, args=(None if maximized else entry,))
            paths = options if picked == "__all__" else [picked]
            pane(f"logs_pane_{entry}", paths, show_component=picked == "__all__",
                 height=logview.PANE_HEIGHT * 2 if maximized else logview.PANE_HEIGHT // 2 + 60)

actors = sorted(set().union(*(logview.actors_in(f) for f in shown)) | set(picked_actors or ()))
if actors:
    actor_slot.multiselect("Processes (Ray actors)", actors, key="actors",
                           help="Only the lines of these processes, by their `(Name pid=N)` prefix.")
