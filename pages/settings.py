"""Settings: what this server serves and how: dirs, roots, the shared cache (live statistics and
a clear button), the tokenizer, the AI endpoint (never its key) and the theme."""
from pathlib import Path

import streamlit as st

from pages import _ui
from rundash_core import cache, settings
from rundash_core.views import tokenizer_files
from rundash_core.views.display_text import md_code

_ui.ensure_app_ran()
dirs = _ui.all_dirs(st.session_state["_dirs"])
roots = [*st.session_state.get("_roots", ()), *st.session_state.get("import_roots", ())]

st.markdown("## Settings")
c1, c2 = st.columns(2)
with c1:
    st.markdown("#### Directories")
    for d in dirs:
        st.markdown(md_code(d))
with c2:
    st.markdown("#### Allowed roots")
    for r in roots:
        st.markdown(md_code(r))

st.markdown("#### Cache")


@_ui.fragment(run_every=5)
def _cache_stats() -> None:
    """Live: refreshed every few seconds while the page is open."""
    stats = cache.shared.stats()
    m = st.columns(3)
    m[0].metric("Entries", f"{stats['entries']:,}")
    m[1].metric("Size", f"{stats['bytes'] / 2**20:,.1f} MB", help=f"limit {stats['limit'] / 2**20:,.0f} MB "
                "(RUNDASH_CACHE_BYTES)")
    rate = stats["hit_rate"]
    m[2].metric("Hit rate", "–" if rate is None else f"{rate:.0%}",
                help=f"{stats['hits']:,} hits, {stats['misses']:,} misses")
    st.button("Clear the cache", on_click=cache.shared.clear,
              help="Parsed file state is read again on the next view (for every session).")


_cache_stats()
st.caption(f"Cache folder (imports, demo): {md_code(str(settings.cache_dir()))}")

st.markdown("#### Tokenizer")
tokenizer = settings.tokenizer_path()
st.markdown(md_code(tokenizer) if tokenizer else
            "`RUNDASH_TOKENIZER` is not set: the token views look for the run's `tokenizer.json` in its model folder "
            f"(named in its config) and in the Hugging Face cache ({md_code(tokenizer_files.hf_hub_dir())}).")

st.markdown("#### AI endpoint")
ai = settings.ai_endpoint()
a1, a2, a3 = st.columns(3)
a1.markdown("Base URL  \n" + (md_code(ai["base_url"]) if ai["base_url"] else "default (`OPENAI_BASE_URL` not set)"))
a2.markdown("Model  \n" + (md_code(ai["model"]) if ai["model"] else "not set (`RUNDASH_AI_MODEL`)"))
a3.markdown("API key  \n" + ai["key"])

st.markdown("#### Theme")
theme = settings.theme(Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml")  # next to app.py
if theme:
    st.markdown("  \n".join(f"{md_code(k)}: {md_code(v)}" for k, v in theme.items()))
else:
    st.markdown("Streamlit's default theme (no `[theme]` in `.streamlit/config.toml`).")
