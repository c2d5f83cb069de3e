"""AI analysis: ask an LLM (any OpenAI-compatible endpoint) about the run, over a compact context.

The API key is read from the environment, Streamlit secrets or the masked sidebar field; it is
passed to the client call only (never shown, logged, cached or put in the URL). The answer is
untrusted model output: made inert by `ai.safe_lines` (one Markdown token filter: no image, HTML or script
link can form); the cached answer is that output, rendered again as is.
"""
import os

import streamlit as st

from pages import _ui
from rundash_core import ai
from rundash_core import streamlit_cache as sc
from rundash_core.health.checks import Signals, health
from rundash_core.views.display_text import md_code, md_escape

run = _ui.current_run()
if run is None:
    _ui.empty_state("No run selected.")
    st.stop()

with st.sidebar.expander("AI endpoint", icon=":material/key:"):
    st.caption("Empty fields fall back to Streamlit secrets, then OPENAI_BASE_URL, RUNDASH_AI_MODEL and "
               "OPENAI_API_KEY.")
    typed = {ai.ENV_BASE_URL: st.text_input("Base URL", key="ai_base_url", placeholder="https://api.openai.com/v1"),
             ai.ENV_MODEL: st.text_input("Model", key="ai_model", placeholder="e.g. gpt-4.1-mini"),
             ai.ENV_API_KEY: st.text_input("API key", key="ai_key_field", type="password",
                                           placeholder="kept for this session only")}
config = ai.resolve_config(sidebar=typed, secrets=st.secrets, environ=os.environ)

st.markdown("## AI analysis")
if config.configured:
    st.warning(f"Asking sends this run's data (the context below: run card, key numbers, health findings, "
               f"sample transcripts) to {md_code(config.endpoint)}, model {md_code(config.model)}.",
               icon=":material/cloud_upload:")
else:
    st.info("AI analysis is off until an endpoint is configured: a model (`RUNDASH_AI_MODEL`) and an API key "
            "(`OPENAI_API_KEY`) or a base URL (`OPENAI_BASE_URL`) for a local server, from the environment, "
            "Streamlit secrets or the sidebar. Nothing is sent until then.", icon=":material/power_off:")

findings = health(_ui.read_or_stop(lambda: Signals.from_run(run), f"the metrics of {run.run_id}"))
labels = {"healthy": "Is this run healthy?", "drop": "Why did reward drop after step N?",
          "compare": "Compare with run X", "free": "Your own question"}
choice = st.radio("Question", list(labels), format_func=labels.get, key="ai_preset", horizontal=True)
other = None
if choice == "drop":
    default = ai.reward_drop_step(findings) or (run.overview().last_step or 0) // 2
    step = st.number_input("Step N", min_value=0, value=int(default), step=1, key="ai_step")
    question = ai.PRESETS[1].format(step=int(step))
elif choice == "compare":
    runs = _ui.runs_list()
    others = [r for r in runs["run_id"] if r != run.run_id]
    other_id = st.selectbox("Run X", others, key="ai_other") if others else None
    if other_id is None:
        st.info("No other run to compare with.")
        st.stop()
    other = sc.get_run(runs[runs["run_id"] == other_id].iloc[0]["path"], other_id)
    question = ai.PRESETS[2].format(other=other_id)
elif choice == "free":
    question = st.text_area("Question", key="ai_free", placeholder="e.g. Is the KL under control?").strip()
else:
    question = ai.PRESETS[0]

budget = st.select_slider("Context budget (tokens)", [2000, 4000, 6000, 8000, 12000, 16000, 32000],
                          value=ai.DEFAULT_BUDGET_TOKENS, key="ai_budget")
context = (ai.compare_context(run, other, budget_tokens=budget) if other is not None
           else ai.analysis_context(run, budget_tokens=budget))
with st.expander(f"Context sent to the model · about {ai.estimate_tokens(context):,} tokens"):
    st.code(context, language="markdown", wrap_lines=True)

answers = st.session_state.setdefault("ai_answers", ai.AnswerCache())
fingerprint = ai.run_fingerprint(run) + (ai.run_fingerprint(other) if other else "")
answer_key = ai.AnswerCache.key(fingerprint, question, config)  # (run state, question, model; no API key)
st.button("Ask", type="primary", disabled=not (config.configured and question), key="ai_ask", icon=":material/send:",
          on_click=lambda: st.session_state.update(ai_asked=True))  # (a flag survives a rerun inside the click)
asked = st.session_state.pop("ai_asked", False)
cached = answers.get(answer_key)
if question:
    st.markdown(f"**{md_escape(question)}**")
if asked and cached is None:
    try:
        answer = st.write_stream(ai.safe_lines(ai.stream_chat(config, ai.build_messages(context, question))))
    except ai.AIError as e:
        st.error(md_escape(str(e)), icon=":material/error:")
    else:
        answers.put(answer_key, answer if isinstance(answer, str) else "".join(map(str, answer)))
elif cached is not None:
    st.markdown(cached)
    st.caption(f"Cached answer for this run state, question and model ({md_escape(config.model)}).")
