"""One episode on the Trajectory page: the side panel (reward by component, env metrics, copyable ids,
turns and tool calls, token usage, tool definitions, timing, errors) and its views (Transcript,
Timeline, Tools). Figures and tables come from `rundash_core`; run text is escaped or in st.code."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import _transcript, _ui
from pages._charts import PLOTLY_CONFIG
from rundash_core.frames import Episode
from rundash_core.views import timeline, trajectory_charts
from rundash_core.views import trajectory as tj
from rundash_core.views.display_text import format_duration, is_absent

VIEWS = {"transcript": "Transcript", "timeline": "Timeline", "tools": "Tools"}


def _number(v) -> str:
    return "n/a" if is_absent(v) else f"{v:.4g}" if isinstance(v, float) else str(v)


def _seconds(v: float) -> str:
    return format_duration(v) if v >= 1 else f"{v:.2f}s"


def _pairs(title: str, values: dict, fmt=_number, label: str = "name") -> None:
    if values:
        st.caption(title)
        st.dataframe(pd.DataFrame({label: list(values), "value": [fmt(v) for v in values.values()]}),
                     hide_index=True, width="stretch")


def side_panel(episode: Episode, row: dict | None) -> None:
    st.metric("Reward", _number(episode.reward))
    st.caption(f"{_ui.md_escape(episode.split)} · {tj.step_text(episode, row)}"
               + (f" · {_ui.md_escape(episode.env)}" if episode.env else ""))
    if episode.error:
        st.caption("ERROR")
        st.code(episode.error, language="text", wrap_lines=True)
    _pairs("REWARDS BY COMPONENT", episode.rewards, label="component")
    _pairs("ENV METRICS", episode.metrics, label="metric")
    _pairs("TURNS AND TOOLS", tj.episode_facts(episode), fmt=str, label="count")
    _pairs("TOKEN USAGE", tj.token_usage(episode, row), fmt=lambda v: f"{v:,}", label="tokens")
    st.caption("IDS")
    for name, value in {"sample": episode.sample_id, "task": episode.task_id, **episode.ids}.items():
        if not is_absent(value):
            st.markdown(f"**{_ui.md_escape(name)}**")
            st.code(str(value), language="text", wrap_lines=True)
    if episode.timing:
        _pairs("TIMING", episode.timing, fmt=_seconds, label="phase")
    tools = tj.tool_definitions(episode)
    if tools:
        with st.expander(f"Tool definitions ({len(tools)})"):
            for t in tools:
                st.markdown(f"**{_ui.md_escape(t['name'])}**" + (f": {_ui.md_escape(t['description'])}"
                                                                 if t["description"] else ""))
                if t["parameters"]:
                    st.code(t["parameters"], language="json", wrap_lines=True)


def _timeline_view(episode: Episode) -> None:
    spans, sequential = timeline.episode_spans(episode)
    fig = trajectory_charts.timeline_figure(spans)
    if fig is None:
        st.caption("This episode records no timing to draw.")
        return
    if sequential:
        st.caption("Only phase durations are recorded: the phases are drawn end to end, in order.")
    st.plotly_chart(fig, key="tr_timeline", config=PLOTLY_CONFIG, width="stretch")
    st.dataframe(timeline.spans_frame(spans), hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("start_s", "end_s", "duration_s")})


def _tools_view(episode: Episode) -> None:
    usage = tj.tool_usage(episode.messages)
    if usage.empty:
        st.caption("No tool calls in this episode.")
    else:
        st.dataframe(usage, hide_index=True, width="stretch")
    if not tj.tool_definitions(episode):
        st.caption("The record lists no tool definitions.")
    else:
        st.caption("The tool definitions are in the side panel.")


def views(episode: Episode) -> None:
    view = st.segmented_control("View", list(VIEWS), key="tr_view", default="transcript",
                                format_func=VIEWS.get, label_visibility="collapsed") or "transcript"
    if view == "timeline":
        _timeline_view(episode)
    elif view == "tools":
        _tools_view(episode)
    else:
        _transcript.transcript(episode)
