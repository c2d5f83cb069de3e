"""Config: the attempt's config files, highlighted, with a regex search that prunes them."""
import streamlit as st

from pages import _ui
from rundash_core.configview import compile_search, language_for, opens_by_default, search_config

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

results = {name: search_config(value, pattern) for name, value in files.items()}
if pattern is not None:
    total = sum(hits for _, _, hits in results.values())
    st.caption(f"**{total}** match{'es' * (total != 1)} in {sum(h > 0 for *_, h in results.values())} file(s)")
for name, (text, lang, hits) in results.items():
    if pattern is not None and hits == 0:
        continue
    label = _ui.md_escape(name) + (f"  ·  {hits} match{'es' * (hits != 1)}" if pattern is not None else "")
    with st.expander(label, expanded=pattern is not None or opens_by_default(name, len(files))):
        st.code(text, language=lang if lang == "json" else language_for(name), wrap_lines=True)
