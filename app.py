"""rundash: navigation and the shared sidebar (run selector, directories, problems).

Start: `rundash DIR...`, i.e. `streamlit run asgi.py -- DIR...` (this app behind the fix that lets a
page opened by its own URL find the server at once); `streamlit run app.py -- DIR...` works too.
RUNDASH_DIRS instead of DIRs; with no directory, the built-in demo.
"""
import logging

import streamlit as st

from pages import _ui
from rundash_core import streamlit_cache as sc

st.set_page_config(page_title="rundash", page_icon="📈", layout="wide")

dirs, roots, is_demo = sc.startup()
run = _ui.sidebar(dirs, roots, is_demo)

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
try:
    if run is not None:
        _ui.run_card(run, compact=nav.title != "Overview")  # the run card on every page
        _ui.live_watch(run)  # a run that looked stopped when the page opened may start again
    nav.run()
except Exception as e:  # noqa: BLE001 - what no reader foresaw: a message, never Streamlit's error page
    logging.getLogger("rundash").exception("page %r failed (run %s)", nav.title, getattr(run, "path", None))
    _ui.page_failed(e, run)
