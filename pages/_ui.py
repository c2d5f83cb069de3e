"""Small named UI blocks shared by the pages: sidebar, run card, problems, empty states.

Everything shown here comes from rundash_core frames; run-provided text goes through st.code,
st.dataframe or `md_escape`, never raw HTML.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools

import streamlit as st

from rundash_core import streamlit_cache as sc
from rundash_core.overview import resumes_text, trainer_names
from rundash_core.run import Run
from rundash_core.settings import check_added_dir
from rundash_core.views.display_text import fold_list, format_duration, format_time, md_code, md_escape, step_headline, text_or


def all_dirs(dirs: tuple[str, ...]) -> tuple[str, ...]:
    """Start directories plus this session's added ones (re-checked against the roots)."""
    roots = [*st.session_state.get("_roots", ()), *st.session_state.get("import_roots", ())]  # (Import page)
    extra = [d for d in st.session_state.get("extra_dirs", []) if check_added_dir(d, roots)[0]]
    return tuple(dict.fromkeys([*dirs, *extra]))


def navigation():
    """The app's pages in sidebar order: app.py runs the one this returns. A session's first run
    reruns from here, before any widget (`ensure_app_ran` says why). The page config comes first on
    every path (app.py, or a page run alone): without it the browser shows the page's Material icon
    as the favicon, which it fetches from fonts.gstatic.com (an outside request)."""
    st.set_page_config(page_title="rundash", page_icon="📈", layout="wide")
    nav = st.navigation([
        st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page("pages/metrics.py", title="Metrics", icon=":material/monitoring:"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
        st.Page("pages/validation.py", title="Validation", icon=":material/verified:"),
        st.Page("pages/config.py", title="Config", icon=":material/settings:"),
        st.Page("pages/trajectory.py", title="Trajectory", icon=":material/route:"),
        st.Page("pages/rollouts.py", title="Rollouts", icon=":material/stacked_bar_chart:"),
        st.Page("pages/logs.py", title="Logs", icon=":material/article:"),
        st.Page("pages/reports.py", title="Reports", icon=":material/description:"),
        st.Page("pages/health.py", title="Health", icon=":material/health_and_safety:"),
        st.Page("pages/ai_analysis.py", title="AI analysis", icon=":material/psychology:"),
        st.Page("pages/import_run.py", title="Import", icon=":material/upload:"),
        st.Page("pages/settings.py", title="Settings", icon=":material/tune:"),
    ])
    if not st.session_state.get("_navigated"):
        st.session_state["_navigated"] = True
        st.rerun()
    return nav


_in_app: contextvars.ContextVar[bool] = contextvars.ContextVar("rundash_in_app", default=False)


@contextlib.contextmanager
def app_run():
    """app.py's script run (this run only: a context variable, reset when it ends)."""
    token = _in_app.set(True)
    try:
        yield
    finally:
        _in_app.reset(token)


def ensure_app_ran() -> None:
    """Make sure app.py (navigation, sidebar, run selection, the page's error handler) runs this
    page.

    With a `pages/` folder next to app.py, Streamlit runs in its older multipage mode (the
    folder's scripts as pages: a page link runs `pages/<name>.py` by itself) until some session
    has called `st.navigation`; from then on the folder is ignored in every session (Streamlit's
    docs, "Creating multipage apps using the pages/ directory"). On a fresh server, then, a
    session's first run may be in that mode: app.py run as the folder's main page (its widgets
    keyed apart from app.py's own: a form sent there would be lost) or, for a page link, the page
    run alone. So app.py's first run in a session calls `st.navigation` (`navigation`: the
    documented switch) and reruns before any widget; a page run without app.py does the same
    here (the page asked for is among the app's pages, so it stays the one shown)."""
    if _in_app.get():
        return
    navigation()
    st.rerun()


def in_session(fn):
    """`fn` with this server's allowed roots set first: for a widget callback, which Streamlit runs
    before app.py, in a thread that may be new (the roots are per thread: `files`)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        sc.use_roots()
        return fn(*args, **kwargs)
    return call


def fragment(fn=None, *, run_every=None):
    """`st.fragment` for the pages: a fragment's rerun runs it alone, in a thread of its own, so it
    sets the allowed roots first (`in_session`), and counts as app.py's run (app.py made it).
    Used as `st.fragment` is."""
    if fn is None:
        return lambda f: fragment(f, run_every=run_every)

    @functools.wraps(fn)
    def body(*args, **kwargs):
        with app_run():
            return in_session(fn)(*args, **kwargs)
    return st.fragment(body, run_every=run_every)


def runs_list() -> tuple:
    """The runs frame for this session's directories."""
    ensure_app_ran()
    return sc.runs_frame(all_dirs(st.session_state["_dirs"]))


def select_run(run_id: str) -> None:
    """Make `run_id` the selected run for every page and the URL (`?run=`)."""
    st.session_state["run_id"] = run_id
    st.session_state["sidebar_run"] = run_id
    st.query_params["run"] = run_id


def _on_sidebar_change() -> None:
    select_run(st.session_state["sidebar_run"])


def sidebar(dirs: tuple[str, ...], roots: tuple[str, ...], is_demo: bool) -> Run | None:
    """Run selector, directories and problems; returns the selected run (or None)."""
    st.session_state["_dirs"] = dirs
    st.session_state["_roots"] = roots
    runs = runs_list()
    ids = list(runs["run_id"])
    wanted = st.session_state.get("run_id") or st.query_params.get("run")
    if wanted and wanted not in ids:
        st.sidebar.warning(f"Run {md_code(wanted)} is not in the tracked directories.")
        wanted = None
    run_id = wanted or (ids[0] if ids else None)
    with st.sidebar:
        st.markdown("### rundash")
        if is_demo:
            st.caption("Showing the built-in demo runs. Start with `streamlit run app.py -- DIR` for yours.")
        if run_id is None:
            st.info("No runs found in the tracked directories.")
        else:
            st.session_state["run_id"] = run_id
            st.session_state["sidebar_run"] = run_id
            st.query_params["run"] = run_id
            labels = dict(zip(runs["run_id"], runs["status"]))
            st.selectbox("Run", ids, key="sidebar_run", on_change=_on_sidebar_change,
                         format_func=lambda r: f"{r} · {labels.get(r, '')}")
        _directories(dirs, roots)
    if run_id is None:
        return None
    row = runs[runs["run_id"] == run_id].iloc[0]
    try:
        run = sc.get_run(row["path"], run_id)
    except Exception as e:  # noqa: BLE001 - a run that cannot be opened is named, the app goes on
        st.sidebar.error(f"Run {md_code(run_id)} cannot be opened: {type(e).__name__}: {md_escape(str(e)[:300])}")
        return None
    _problems(run)
    return run


def _directories(dirs: tuple[str, ...], roots: tuple[str, ...]) -> None:
    for note in sc.runs_scan(all_dirs(dirs))[1]:  # a tracked dir that cannot be read, or a folder cut short
        st.warning(md_escape(note))
    with st.expander("Directories"):
        for d in all_dirs(dirs):
            st.markdown(md_code(d))  # (a code box would load the syntax highlighter on every page)
        with st.form("add_dir", clear_on_submit=True, border=False):
            path = st.text_input("Add a directory", placeholder=roots[0] if roots else "")
            if st.form_submit_button("Add") and path:
                full, err = check_added_dir(path, list(roots))
                if err:
                    st.error(md_escape(err))  # the path is user text: no markdown links or images
                else:
                    extra = st.session_state.setdefault("extra_dirs", [])
                    if full not in extra:
                        extra.append(full)
                    st.rerun()
        st.caption("Allowed roots: " + ", ".join(f"{md_code(r)}" for r in roots))


def run_problems(run: Run) -> list:
    try:
        return run.problems()
    except Exception as e:  # never let a reader error take the page down
        st.error(f"Could not check this run's files ({type(e).__name__}); the data shown may be partial.")
        return []


def problems_panel(run: Run, *, expanded: bool = False, container=st) -> None:
    """Every file of the run that could not be fully read: which file, what, how often."""
    problems = run_problems(run)
    if problems:
        label = f"{len(problems)} file problem{'s' * (len(problems) > 1)}: the run is shown without the unreadable parts"
        with container.expander(label, expanded=expanded, icon=":material/warning:"):
            for p in problems:
                st.code(str(p), language="text", wrap_lines=True)


def _problems(run: Run) -> None:
    problems_panel(run, container=st.sidebar)


def current_run() -> Run | None:
    """The run chosen in the sidebar (pages call this; it never parses anything itself)."""
    ensure_app_ran()
    run_id = st.session_state.get("run_id")
    if not run_id:
        return None
    runs = runs_list()
    match = runs[runs["run_id"] == run_id]
    return None if match.empty else sc.get_run(match.iloc[0]["path"], run_id)


NO_SAMPLES = "This run has no samples: its trainer does not record rollouts rundash can read."


def page_run(title: str, *, needs: str | None = None, without: str = "") -> Run:
    """The page's run under its `## title · run` heading; stops the page with a note when no run is
    selected, or when the run lacks the capability `needs` (the note is `without`)."""
    run = current_run()
    if run is None:
        empty_state("No run selected.")
        st.stop()
    st.markdown(f"## {title} · {md_escape(run.name)}")
    if needs is not None and needs not in run.capabilities:
        empty_state(without)
        st.stop()
    return run


def read_or_stop(read, what: str):
    """`read()`, or a message naming what could not be read and a stop of this page (never a
    traceback: readers report file problems themselves; this catches what they did not foresee)."""
    try:
        return read()
    except Exception as e:  # noqa: BLE001 - shown to the user, page stops cleanly
        st.error(f"Could not read {md_escape(what)}: {type(e).__name__}: {md_escape(str(e)[:300])}")
        st.stop()


def run_config(run: Run) -> dict:
    """The run's resolved config, or {} when it has none or it cannot be read (the run's
    problems say why)."""
    try:
        cfg = run.config()
    except Exception:  # a config that cannot be read must not take a page down
        return {}
    return cfg if isinstance(cfg, dict) else {}


def empty_state(message: str) -> None:
    st.info(message)


STATUS_COLOR = {"running": "green", "completed": "blue", "stopped": "orange", "unknown": "gray"}


def status_text(status: str) -> str:
    return f":{STATUS_COLOR.get(status, 'gray')}[● {status}]"


def field(col, label: str, value: str, help: str | None = None) -> None:
    """One run-card field: a mono-caps label over a bold value (value text is escaped)."""
    col.caption(label)
    col.markdown(f"**{md_escape(value)}**", help=help)


def _envs_help(envs) -> str | None:
    """The full env list as the tooltip of a folded one (more than two envs)."""
    envs = [e for e in (envs or []) if text_or(e, "")]
    return ", ".join(md_escape(e) for e in envs) if len(envs) > 2 else None


def run_card(run: Run, *, compact: bool = False) -> None:
    """The run card: step headline, status, duration (ticking while running), model, resumes,
    envs, created; at the top of every page (app.py). Re-runs by itself while the run is live."""
    try:
        ov = run.overview()
    except Exception as e:  # noqa: BLE001 - the page below still shows what it can
        st.warning(f"The run card of {md_code(run.run_id)} could not be read: {type(e).__name__}: "
                   f"{md_escape(str(e)[:200])}")
        return
    interval = (5.0 if compact else 1.0) if ov.status == "running" else None

    @fragment(run_every=interval)
    def _card() -> None:
        o = run.overview() if interval else ov  # the run's one summary: the runs list and the CLI read it too
        st.markdown(f"{'###' if compact else '##'} {md_escape(step_headline(o.step, o.max_steps))}")
        st.caption(f"{md_escape(o.name)} · {text_or(o.kind, 'n/a')} · {text_or(o.flavor, 'n/a')}")
        if trainer := trainer_names(o):
            st.caption(md_escape(trainer))
        if not compact:
            st.caption(md_code(o.path))  # the full path (the runs table shortens it)
        cols = st.columns([1.1, 1, 1.4, 0.8, 1.5, 1.2, 1.4])
        cols[0].caption("STATUS")
        cols[0].markdown(status_text(o.status))
        field(cols[1], "DURATION", format_duration(o.duration_s))  # overview() measures to now while running
        field(cols[2], "MODEL", text_or(o.model, "n/a"))  # never "None" / "nan"
        field(cols[3], "RESUMES", resumes_text(o), help=f"{o.attempts} attempt(s)")
        field(cols[4], "TRAIN ENVS", fold_list(o.train_envs), help=_envs_help(o.train_envs))
        field(cols[5], "EVAL ENVS", fold_list(o.eval_envs), help=_envs_help(o.eval_envs))
        field(cols[6], "CREATED", format_time(o.created))

    _card()


def live_watch(run: Run, every_s: float = 10.0) -> None:
    """Every page decides its live parts (refreshing charts, a ticking card) from the run's status
    when it renders; this re-checks the status on every tick (cheap: the cached summary) and
    reruns the page when it changed (a run that looked stopped started again, or stopped)."""
    try:
        seen = run.overview().status
    except Exception:  # noqa: BLE001 - a reader failure is the page's to show, not the watcher's
        return

    @fragment(run_every=every_s)
    def watch() -> None:
        try:
            if (run.overview().status == "running") != (seen == "running"):
                st.rerun()
        except Exception:  # noqa: BLE001
            return
    watch()


def page_failed(error: Exception, run: Run | None) -> None:
    """The message a page shows when something unforeseen failed: which run, what went wrong;
    the traceback stays in the server log for the operator."""
    where = f" for run {md_code(run.run_id)} ({md_code(run.path)})" if run is not None else ""
    st.error(f"This page could not be shown{where}: {type(error).__name__}: {md_escape(str(error)[:300])}. "
             "The server log has the details.")
