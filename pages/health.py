"""Health: the run's rule-based findings and the monitor-run check-in entry (copy / download)."""
import time

import streamlit as st

from pages import _ui
from pages._charts import text_width
from rundash_core.health.checkin import checkin_markdown
from rundash_core.health.checks import VERDICTS, Signals, findings_frame, health, health_state
from rundash_core.views.display_text import table_height

STATE_COLOR = {"Healthy": "green", "Degraded": "orange", "Stopped": "gray", "Stalled": "red", "Down": "red"}
FINDING_COLUMNS = ["severity", "message", "steps", "area", "rule", "metric"]  # what is read first, long keys last
METRIC_PX = 220

run = _ui.current_run()
if run is None:
    _ui.empty_state("No run selected.")
    st.stop()

REFRESH_S = 30.0  # health rules read minutes of metrics: a refresh per half-minute is enough
live = run.overview().status == "running"


@_ui.fragment(run_every=REFRESH_S if live else None)
def health_view() -> None:
    """The findings and the check-in entry as of now; re-read every REFRESH_S while the run runs."""
    now = time.time()
    signals = _ui.read_or_stop(lambda: Signals.from_run(run, now=now), f"the metrics of {run.run_id}")
    findings = health(signals)
    state = health_state(findings)

    st.markdown(f"## Health · :{STATE_COLOR[state]}[{state}]")
    st.caption(f"{state}: {VERDICTS[state]}.")
    as_of = time.strftime("%H:%M:%S", time.localtime(now))
    st.caption("Rule-based checks over the run's metrics: alive / stalled, stability (entropy, grad-norm and loss "
               "spikes, mismatch KL, NaN), progress (reward, validation, lengths, truncation, errors, no-signal "
               "groups) and performance (who waits on whom, staleness, MFU). "
               + (f"As of {as_of}; re-checked every {REFRESH_S:.0f} s while the run is running." if live
                  else f"As of {as_of}."))
    if findings:
        table = findings_frame(findings)
        st.dataframe(table, hide_index=True, width="stretch", height=table_height(len(table)),
                     column_order=FINDING_COLUMNS,
                     column_config={"message": st.column_config.TextColumn("message", width=text_width(table["message"])),
                                    "metric": st.column_config.TextColumn(
                                        "metric", width=METRIC_PX,
                                        help="The metric key; a long one is cut to the column: double-click the cell "
                                             "to read it whole.")})
    else:
        st.success("No findings: every rule passed on the metrics this run logged.")

    st.markdown("### Check-in")
    st.caption("The monitor-run entry for this moment, ready to append to the run's STATUS.md (rundash never "
               "writes into a run directory).")
    entry = checkin_markdown(signals, findings, problems=_ui.run_problems(run), now=now)
    st.code(entry, language="markdown", wrap_lines=True)
    stamp = time.strftime("%Y%m%d-%H%M", time.gmtime(now))
    st.download_button("Download check-in (.md)", entry, file_name=f"checkin-{run.run_id}-{stamp}.md",
                       mime="text/markdown", key="checkin_download", icon=":material/download:")


health_view()
