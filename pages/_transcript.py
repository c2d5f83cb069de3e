"""The Transcript view of one episode: numbered collapsible messages (short ones open), reasoning
collapsed, each tool result shown once, under its call, search, expand/collapse all, and for plain
strings with chat-template markup (Relax / verl prompts and responses) a highlighted view with noise
masked.

Run text goes through st.code (which has a copy button), `md_escape` / `md_code`, or
`transcript_markup.to_html` (every character escaped) into st.html; never unsafe markdown."""
from __future__ import annotations

import streamlit as st

from pages import _ui
from rundash_core.frames import Episode
from rundash_core.safety.user_regex import compile_user_pattern
from rundash_core.views import trajectory as tj
from rundash_core.views import transcript_markup as tm

LONG_CHARS = 3000  # longer texts scroll in place, in a fixed-height box
BOX_PX = 420
PAGE_ENTRIES = 100  # entries drawn at once: a 900-message agent transcript took the browser 9-14 s whole


def _text_block(text: str, *, language: str = "text") -> None:
    """A copyable text block; a long one scrolls inside a fixed height."""
    st.code(text or " ", language=language, wrap_lines=True, height=BOX_PX if len(text or "") > LONG_CHARS else "content")


def _markup_block(text: str, mask, *, response: bool = False) -> None:
    """Highlighted segments (escaped HTML) in a fixed-height box, the raw text copyable below."""
    parts = tm.segments(text, mask, response=response)
    found = tm.counts(parts)
    if found:
        st.caption(" · ".join(f"{n} {tm.LABELS.get(k, k).replace('_', ' ')}" for k, n in found.items()))
    with st.container(height=BOX_PX if len(text) > LONG_CHARS else "content", border=True):
        st.html(tm.to_html(parts))
    with st.expander("Raw text (copy)"):
        _text_block(text)


def _one_page(entries: list[int], sample_id: str) -> list[int]:
    """The entries of the page picked (PAGE_ENTRIES at a time; a search pages its hits)."""
    if len(entries) <= PAGE_ENTRIES:
        return entries
    pages = -(-len(entries) // PAGE_ENTRIES)
    page = st.number_input(f"Page (of {pages})", min_value=1, max_value=pages, step=1, key=f"tr_page:{sample_id}",
                           help=f"{PAGE_ENTRIES} entries at a time; Search finds messages on every page.")
    first = (int(page) - 1) * PAGE_ENTRIES
    st.caption(f"Entries {first + 1}–{min(first + PAGE_ENTRIES, len(entries))} of {len(entries)}")
    return entries[first:first + PAGE_ENTRIES]


def transcript(episode: Episode) -> None:
    messages = episode.messages
    results = tj.tool_results(messages)
    calls = tj.tool_calls_by_id(messages)
    marked = any(tm.has_markup(m.content) for m in messages)
    c1, c2, c3 = st.columns([3, 1.3, 1.7] if marked else [3, 1.5, 0.01], vertical_alignment="bottom")
    query = c1.text_input("Search the transcript", key="tr_search", placeholder="substring, any case")
    expand_all = c2.toggle("Expand all", key="tr_expand", help="Open (or close) every message and reasoning block.")
    highlight = marked and c3.toggle("Highlight markup", key="tr_markup", value=True,
                                     help="Chat-template markup, <think> and tool-call blocks of plain prompt/response "
                                          "strings; the raw text stays copyable below each.")
    mask = None
    if marked and highlight:
        text = st.text_input("Mask noise (regex, RE2)", value=tm.DEFAULT_MASK, key="tr_mask",
                             help="Runs of matches collapse into one token ×count (default: multimodal pad "
                                  "tokens); empty: no mask.")
        mask, error = compile_user_pattern(text, ignore_case=False)
        if error:
            st.error(f"Invalid regex {_ui.md_code(text)}: {_ui.md_escape(error)}")
    if episode.error:
        st.error(f"**This episode failed:** {_ui.md_escape(episode.error[:500])}")
    hits = tj.search_messages(messages, query)
    if query:
        st.caption(f"**{len(hits)}** of {len(messages)} messages match {_ui.md_code(query)}")
    elif not messages:
        st.caption("This episode has no messages.")
    folded = tm.folded_results(messages)
    for i in _one_page(tm.transcript_entries(messages, hits if query else None), episode.sample_id):
        m = messages[i]
        label = f"{i + 1}. {m.role}" + (f" · {m.tokens} tokens" if m.tokens is not None else "")
        if m.tool_calls:
            label += f" · calls {', '.join(c.name for c in m.tool_calls)}"
        if m.tool_call_id and m.tool_call_id in calls:
            j, name = calls[m.tool_call_id]
            label += f" · result of {name} (#{j + 1})"
        opened = expand_all or bool(query) or tm.opens_expanded(messages, i, folded)
        with st.expander(_ui.md_escape(label), expanded=opened):
            if m.reasoning:
                with st.expander("Reasoning", expanded=expand_all):
                    _text_block(m.reasoning)
            if m.content and highlight and tm.has_markup(m.content):
                _markup_block(m.content, mask, response=m.role == "assistant")
            elif m.content:
                _text_block(m.content)
            for c in m.tool_calls:
                args, lang = tj.pretty_arguments(c.arguments)
                st.markdown(f"**Tool call** {_ui.md_code(c.name)}")
                _text_block(args, language=lang)
                if c.id in results:
                    k = results[c.id]
                    st.caption(f"Result (message {k + 1})")
                    _text_block(messages[k].content)
                else:
                    st.caption("No result in the transcript.")
