"""Config: the attempt's config files, highlighted, with a regex search that prunes them."""
import streamlit as st

from pages import _ui
from rundash_core.views.config_search import compile_search, opens_by_default, shown_config

run = _ui.page_run("Config")
attempts = run.attempts()
latest = run.latest_attempt()
options = [None] + [a for a in reversed(attempts)]
c1, c2 = st.columns([1, 3])
attempt = c1.selectbox(
    "Attempt", options, key="cfg_attempt",
    format_func=lambda a: f"latest (attempt {latest})" if a is None and latest else (
        "latest" if a is None else f"attempt {a}"))
query = c2.text_input("Search (regex on keys and values)", key="cfg_search")
pattern, error = compile_search(query)
if error:
    st.error(error)

files = run.configs(attempt=attempt)
if not files:
    _ui.empty_state("This attempt has no config files.")
    st.stop()

results = {name: shown_config(name, value, pattern) for name, value in files.items()}
if pattern is not None:
    total = sum(hits for _, _, hits, _ in results.values())
    st.caption(f"**{total}** match{'es' * (total != 1)} in {sum(r[2] > 0 for r in results.values())} file(s)")
for name, (text, lang, hits, notes) in results.items():
    if pattern is not None and hits == 0:
        continue
    label = _ui.md_escape(name) + (f"  ·  {hits} match{'es' * (hits != 1)}" if pattern is not None else "")
    with st.expander(label, expanded=pattern is not None or opens_by_default(name, len(files))):
        if notes:
            st.caption(_ui.md_escape("; ".join(notes)) + ": the file is too big to show whole here.")
        st.code(text, language=lang, wrap_lines=True)
