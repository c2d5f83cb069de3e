"""Trajectory: the samples of a step (filters, sort) and one episode's transcript.

URL: `?run=&step=&split=&sort=&sample=` (a `sample` deep-links to one episode). Run text is shown
through st.code / st.text / st.dataframe / `md_escape`, never raw HTML.
"""
import pandas as pd
import streamlit as st

from pages import _tokens, _ui
from pages._charts import url_widget
from rundash_core import trajectory as tj
from rundash_core.present import ABSENT, format_duration, is_absent

run = _ui.current_run()
if run is None:
    _ui.empty_state("No run selected.")
    st.stop()

st.markdown(f"## Trajectory · {_ui.md_escape(run.name)}")
if "samples" not in run.capabilities:
    _ui.empty_state("This run has no samples: its trainer does not record rollouts rundash can read.")
    st.stop()
samples = _ui.read_or_stop(lambda: run.samples(), f"the samples of {run.run_id}")
if samples.empty:
    _ui.empty_state("This run has no samples (yet).")
    st.stop()
steps, eval_steps = tj.step_options(_ui.read_or_stop(lambda: run.steps(), f"the steps of {run.run_id}"))


# Filters -----------------------------------------------------------------------------------------
def _move(delta: int) -> None:
    st.session_state["step"] = tj.neighbour(steps, st.session_state.get("step"), delta)


c_step, c_prev, c_next, c_split, c_env, c_sort, c_err = st.columns([1.4, 0.35, 0.35, 1, 1.2, 1.2, 0.9],
                                                                   vertical_alignment="bottom")
step = url_widget(c_step.selectbox, "Step", [None, *steps], key="step",
                  format_func=lambda s: "all steps" if s is None else f"step {s}" + (" · eval" if s in eval_steps else ""))
c_prev.button("", icon=":material/chevron_left:", key="tr_prev", on_click=_move, args=(-1,), help="Previous step")
c_next.button("", icon=":material/chevron_right:", key="tr_next", on_click=_move, args=(1,), help="Next step")
splits = sorted(s for s in samples["split"].dropna().unique())
split = url_widget(c_split.selectbox, "Split", [None, *splits], key="split",
                   format_func=lambda s: "all splits" if s is None else s)
envs = sorted(e for e in samples["env"].dropna().unique())
env = c_env.selectbox("Env", [None, *envs], key="tr_env", format_func=lambda e: "all envs" if e is None else e)
sort = url_widget(c_sort.selectbox, "Sort", [None, *tj.SORTS], key="sort",
                  format_func=lambda s: "as logged" if s is None else tj.SORT_LABELS[s])
errors_only = c_err.toggle("Errors only", key="tr_errors")

view = tj.sort_samples(tj.filter_samples(samples, split=split, step=step, env=env, errors_only=errors_only), sort)
st.caption(f"**{len(view):,}** of {len(samples):,} samples")
table_key = f"tr_table_{split}_{step}_{env}_{errors_only}_{sort}"  # a new filter starts a new selection
event = st.dataframe(view, key=table_key, on_select="rerun", selection_mode="single-row", hide_index=True,
                     column_config={"locator": None}, placeholder=ABSENT, height=min(36 + 35 * len(view), 420))
picked = tuple(event.selection.rows)
if picked and picked != st.session_state.get("_tr_picked"):
    st.query_params["sample"] = str(view.iloc[picked[0]]["sample_id"])
st.session_state["_tr_picked"] = picked

sample_id = st.query_params.get("sample")
if not sample_id:
    st.caption("Select a row to open its episode.")
    st.stop()


# Episode -----------------------------------------------------------------------------------------
def _episode(sid: str):
    try:
        return run.episode(sid)
    except KeyError:
        return None


episode = _ui.read_or_stop(lambda: _episode(sample_id), f"sample {sample_id} of {run.run_id}")
if episode is None:
    st.warning(f"This run has no sample {_ui.md_code(sample_id)}.")
    st.stop()


def _number(v) -> str:
    return "n/a" if is_absent(v) else f"{v:.4g}" if isinstance(v, float) else str(v)


st.markdown(f"### Sample {_ui.md_code(episode.sample_id)}")
side, main = st.columns([1, 3])
with side:
    st.metric("Reward", _number(episode.reward))
    st.caption(f"{_ui.md_escape(episode.split)} · step {_number(episode.step)}"
               + (f" · {_ui.md_escape(episode.env)}" if episode.env else ""))
    if episode.rewards:
        st.caption("REWARDS BY COMPONENT")
        st.dataframe(pd.DataFrame({"component": list(episode.rewards), "value": list(episode.rewards.values())}),
                     hide_index=True)
    st.caption("IDS")
    for name, value in {"sample": episode.sample_id, "task": episode.task_id, **episode.ids}.items():
        if not is_absent(value):
            st.markdown(f"**{_ui.md_escape(name)}**")
            st.code(str(value), language="text", wrap_lines=True)
    if episode.timing:
        st.caption("TIMING")
        st.dataframe(pd.DataFrame({"phase": list(episode.timing),
                                   "time": [format_duration(v) if v >= 1 else f"{v:.2f}s"
                                            for v in episode.timing.values()]}), hide_index=True)
    if episode.error:
        st.caption("ERROR")
        st.code(episode.error, language="text", wrap_lines=True)

messages = episode.messages
results = tj.tool_results(messages)
calls = tj.tool_calls_by_id(messages)
with main:
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    query = c1.text_input("Search the transcript", key="tr_search", placeholder="substring, any case")
    expand_all = c2.toggle("Expand all", key="tr_expand")
    shown = tj.search_messages(messages, query)
    if query:
        st.caption(f"**{len(shown)}** of {len(messages)} messages match {_ui.md_code(query)}")
    elif not messages:
        st.caption("This episode has no messages.")
    for i in shown:
        m = messages[i]
        label = f"{i + 1}. {m.role}" + (f" · {m.tokens} tokens" if m.tokens is not None else "")
        if m.tool_call_id and m.tool_call_id in calls:
            j, name = calls[m.tool_call_id]
            label += f" · result of {name} (#{j + 1})"
        with st.expander(_ui.md_escape(label), expanded=expand_all or bool(query)):
            if m.reasoning:
                with st.expander("Reasoning", expanded=expand_all):
                    st.code(m.reasoning, language="text", wrap_lines=True)
            if m.content:
                st.code(m.content, language="text", wrap_lines=True)
            for c in m.tool_calls:
                args, lang = tj.pretty_arguments(c.arguments)
                st.markdown(f"**Tool call** {_ui.md_code(c.name)}")
                st.code(args, language=lang, wrap_lines=True)
                if c.id in results:
                    k = results[c.id]
                    st.caption(f"Result (message {k + 1})")
                    st.code(messages[k].content or " ", language="text", wrap_lines=True)
                else:
                    st.caption("No result in the transcript.")
    _tokens.token_panel(run, episode)
