"""Reports: the run's `reports/*.md`, listed by title and rendered as Markdown made safe by
`rundash_core.views.reports` (no HTML, no script links, no remote images), with its citations of steps
and episodes linked to the Trajectory and Metrics pages.

URL: `?run=&report=<name>`.
"""
import streamlit as st

from pages import _ui
from pages._charts import url_widget
from rundash_core.views import reports as rp
from rundash_core.views.display_text import format_time

run = _ui.page_run("Reports", needs="reports", without="This run has no reports (`reports/*.md` in its folder).")
listing = _ui.read_or_stop(run.reports, f"the reports of {run.run_id}")
if listing.empty:
    _ui.empty_state("This run has no reports.")
    st.stop()

titles = dict(zip(listing["name"], listing["title"]))
name = url_widget(st.selectbox, "Report", list(titles), key="report", format_func=lambda n: titles[n])
row = listing[listing["name"] == name].iloc[0]
report = _ui.read_or_stop(lambda: run.report(name), f"the report {name}")
if report.error:
    st.warning(f"Could not read {_ui.md_code(row['path'])}: {_ui.md_escape(report.error)}")
    st.stop()
st.caption(f"{_ui.md_code(row['name'] + '.md')} · updated {format_time(row['updated'])}")
ids = rp.episode_ids(run.samples()) if "samples" in run.capabilities else set()
shown_as, shown, note = rp.shown_body(report.body, run_id=run.run_id, sample_ids=ids)
if note:
    st.caption(_ui.md_escape(note))
with st.container(border=True):
    if shown_as == "markdown":
        st.markdown(shown)
    else:
        st.code(shown, language=None, wrap_lines=True)
