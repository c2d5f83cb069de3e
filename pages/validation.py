"""Validation: Val Score per event and source, a per-capability breakdown with its change, failure
modes and the CoT share of the val responses.

URL: `?run=&event=&stat=` (the chosen event and breakdown statistic). Everything shown comes from
`run.validation()`, `run.val_cot()` and `run.failure_modes()`; run text goes through
st.dataframe / `md_escape` / `md_code`, and into figures through `plotly_text`.
"""
import streamlit as st

from pages import _eval_pane, _ui
from pages._charts import PLOTLY_CONFIG, url_widget
from rundash_core.sources.swe_lego_rl import failure_modes as fm
from rundash_core.views import validation as val
from rundash_core.views import validation_charts as vc
from rundash_core.views.display_text import ABSENT, md_code, table_height

WHY = ("**Val Score, not reward.** Validation is graded pass/fail by the verifier on held-out tasks; "
       "reward is the training signal, from a different grader. Reading one as the other is how a "
       "grading bug passes for a model regression.")

run = _ui.page_run("Validation")
st.markdown(WHY)
if "validation" not in run.capabilities:
    _ui.empty_state("This run records no validation rundash can read.")
    st.stop()
frame = _ui.read_or_stop(lambda: run.validation(), f"the validation of {run.run_id}")
if frame.empty:
    _ui.empty_state("No validation events yet.")
    _eval_pane.eval_pane(run, frame)
    st.stop()

# Val Score per event -------------------------------------------------------------------------------
names = val.series_names(frame)
options = list(dict.fromkeys(names))
core = list(dict.fromkeys(names[frame["core"].fillna(False).astype(bool)])) or options[:1]
chosen = st.multiselect("Series (source · statistic)", options, default=core, key=f"val_series_{run.run_id}",
                        help="Core statistics (verl val-core, avg@k / pass@k, the dump's pass@1) are shown by "
                             "default; the auxiliary ones (std, worst@k, per-capability, coverage) on demand.")
if chosen:
    st.plotly_chart(vc.score_figure(frame, chosen), config=PLOTLY_CONFIG, key="val_score_chart")
headline = val.headline(frame)
if headline is not None:
    st.caption(f"Headline statistic: {md_code(headline.label)} (the breakdown's default; Health and the check-in "
               "report it).")
low = vc.low_coverage_events(frame)
if low:
    st.caption(f"Events covering less than half of the fixed cohort ({vc.LOW_NOTE}): "
               + ", ".join(md_code(e) for e in sorted(low)))

# Per-capability breakdown ----------------------------------------------------------------------------
st.markdown("#### Breakdown of one event")
event_rows = val.events(frame)
labels = vc.event_labels(frame)
event_names = list(event_rows["event"])
stats = list(dict.fromkeys(frame["statistic"]))
c1, c2 = st.columns(2)
event = url_widget(c1.selectbox, "Event", event_names, key="event", index=len(event_names) - 1,
                   format_func=lambda e: labels.get(e, e))
default_stat = val.headline_statistic(frame)
stat = url_widget(c2.selectbox, "Statistic", stats, key="stat", index=stats.index(default_stat),
                  format_func=str)
previous = val.previous_event(frame, event)
table = val.breakdown(frame, event, stat)
st.caption(f"Per source at {md_code(labels.get(event, event))}, change against "
           + (md_code(labels.get(previous, previous)) if previous else "nothing (the first event)"))
st.dataframe(table, hide_index=True, width="stretch", placeholder=ABSENT, height=table_height(len(table)),
             column_config={"change": st.column_config.NumberColumn("change", format="%+.3f"),
                            "value": st.column_config.NumberColumn("value", format="%.3f"),
                            "previous": st.column_config.NumberColumn("previous", format="%.3f")})

# Failure modes -------------------------------------------------------------------------------------
if "failure_modes" in run.capabilities:
    st.markdown("#### Failure modes")
    every = len(event_names) <= vc.FAILURE_EVENTS_AT_ONCE or st.toggle(
        "Classify every event", key="val_fm_all",
        help="Reads each task's verifier report and agent record; by default only the chosen event and the one "
             "before it are classified.")
    shown = vc.failure_events(event_names, event, every=every)
    modes = _ui.read_or_stop(lambda: vc.failure_modes_all(run, shown), f"the failure modes of {run.run_id}")
    if modes.empty:
        _ui.empty_state("No val tasks to classify yet.")
    else:
        st.plotly_chart(vc.failure_figure(modes, labels), config=PLOTLY_CONFIG, key="val_failure_chart")
        mine = modes[modes["event"] == event]
        counts = mine["category"].value_counts()
        cats = fm.order(mine["category"])
        if cats:
            bucket = st.radio("Bucket", cats, horizontal=True, key=f"val_bucket_{run.run_id}_{event}",
                              format_func=lambda c: f"{fm.LABELS.get(c, c)} ({counts.get(c, 0)})")
            rows = vc.bucket_table(mine, run.run_id, bucket, _ui.read_or_stop(run.samples, f"the samples of {run.run_id}"))
            st.caption(f"The tasks of {md_code(labels.get(event, event))} in this bucket; **open** links to "
                       "each trajectory.")
            st.dataframe(rows, hide_index=True, width="stretch", height=table_height(len(rows)),
                         column_config={"trajectory": st.column_config.LinkColumn("trajectory", display_text="open")})

_eval_pane.eval_pane(run, frame)

# CoT share -------------------------------------------------------------------------------------------
cot = _ui.read_or_stop(lambda: run.val_cot(), f"the CoT share of {run.run_id}")
if not cot.empty:
    st.markdown("#### CoT share of the val responses")
    if int(cot["n"].fillna(0).sum()) == 0:
        _ui.empty_state("No val trial has a readable proxy trajectory (`proxy_trajectory.json`): no CoT share.")
    else:
        st.caption("Share of what the agent writes that is reasoning (text before `</think>`). The response "
                   "counts tool-call arguments (the patches a coding agent writes) as well as visible text, and "
                   f"every event is measured over one fixed cohort of {int(cot['cohort_size'].iloc[0])} tasks "
                   "(present in at least half the events), so the number tracks the model, not which tasks "
                   "landed in a dump.")
        st.plotly_chart(vc.cot_figure(cot), config=PLOTLY_CONFIG, key="val_cot_chart")
        delta = val.cot_delta(cot)
        if delta is not None:
            st.markdown(f"First → last (mean per task): :{vc.delta_color(delta)}[{delta:+.1%}]")
        st.dataframe(cot, hide_index=True, width="stretch", placeholder=ABSENT, height=table_height(len(cot)),
                     column_config={c: st.column_config.NumberColumn(c, format="%.3f")
                                    for c in ("cot_ratio", "cot_ratio_weighted", "coverage")})
