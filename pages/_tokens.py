"""The Trajectory page's token views of one episode: Per-token (coloured spans for one overlay,
a legend, hover values), Rendered (the recorded token ids decoded) and the raw token table.

The span and legend HTML come from `rundash_core.views.tokens`, which escapes every token string; run
text shown here goes through st.code or `md_escape`.
"""
import pandas as pd
import streamlit as st

from pages import _ui
from rundash_core.views import tokens as tk

TABLE_ROWS = 2000
NOTES_SHOWN = 20


def _tokenizer_caption(lookup) -> str:
    if lookup.tokenizer is not None:
        return f"Token text from {_ui.md_code(lookup.path)} ({_ui.md_escape(lookup.origin)})."
    looked = "\n".join(f"- {_ui.md_escape(x)}" for x in lookup.looked)
    return (f"No tokenizer.json found for this run's model, so tokens show as their ids. Looked in:\n\n{looked}\n\n"
            "Put the model's tokenizer.json in one of these places, or set `RUNDASH_TOKENIZER` to a tokenizer.json "
            "(or a folder holding one). rundash never downloads one.")


def _notes(notes: list[str]) -> None:
    """Length mismatches between the token streams: shown, never silently dropped."""
    if not notes:
        return
    lines = [f"- {_ui.md_escape(n)}" for n in notes[:NOTES_SHOWN]]
    if len(notes) > NOTES_SHOWN:
        lines.append(f"- … and {len(notes) - NOTES_SHOWN:,} more")
    st.warning("Some token streams do not fit their tokens (those values are left out):\n\n" + "\n".join(lines))


def _per_token(view: tk.TokenView) -> None:
    table = view.table
    options = tk.overlays_in(table)
    overlay = st.segmented_control(
        "Colour by", options, default=tk.default_overlay(table), format_func=lambda c: tk.OVERLAYS[c].label,
        required=bool(options), wrap=True, key=f"tok_overlay_{'_'.join(options)}",
        help="Hover a token for all its values.")
    start = 0
    if len(table) > tk.SPAN_LIMIT:
        n = len(table)
        start = st.selectbox(f"{n:,} tokens, drawn {tk.SPAN_LIMIT:,} at a time", list(range(0, n, tk.SPAN_LIMIT)),
                             key="tok_page", format_func=lambda s: f"tokens {s:,}–{min(s + tk.SPAN_LIMIT, n) - 1:,}")
    if overlay:
        o = tk.OVERLAYS[overlay]
        st.html(tk.legend_html(tk.scale_for(table, overlay)))
        st.caption(_ui.md_escape(o.help + (f" (eps = {view.eps:g})" if overlay == "ipo_stable" else "")))
    st.html(tk.spans_html(table, overlay, start=start))


def token_panel(run, episode) -> None:
    """The episode's token streams, when the source recorded them; decoded and drawn only while
    the panel is open (kept open from episode to episode, and in the URL: `tokens=true`)."""
    tokens = episode.tokens
    if not isinstance(tokens, pd.DataFrame) or tokens.empty:
        return
    box = st.expander(f"Tokens ({len(tokens):,})", key="tokens", bind="query-params")
    if not box.open:
        return
    with box:
        view = tk.episode_token_view(run, episode)
        st.caption(_tokenizer_caption(view.lookup))
        _notes(view.notes)
        per_token, rendered, raw = st.tabs(["Per-token", "Rendered", "Table"])
        with per_token:
            _per_token(view)
        with rendered:
            for label, text in tk.rendered_texts(view.table):
                if label:
                    st.caption(label)
                st.code(text, language="text", wrap_lines=True)
        with raw:
            if len(tokens) > TABLE_ROWS:
                st.caption(f"The first {TABLE_ROWS:,} of {len(tokens):,} tokens.")
            st.dataframe(tokens.head(TABLE_ROWS), hide_index=True)
