"""The eval pane of the Validation page (prime-rl spec 8.2): eval blocks' progress from the run's
plan, avg@k / pass@k tiles per env, a beeswarm of episode rewards per env, usage and timing.

Shown for any run with eval episodes or an eval plan; all numbers come from `rundash_core.views.eval_pane`.
"""
from __future__ import annotations

import streamlit as st

from pages import _ui
from pages._charts import PLOTLY_CONFIG
from rundash_core import frames
from rundash_core.views import eval_pane as ep
from rundash_core.views.display_text import ABSENT, md_code, md_escape, table_height


def eval_pane(run, validation) -> None:
    plan = _ui.read_or_stop(lambda: run.eval_plan(), f"the eval plan of {run.run_id}")
    samples = _ui.read_or_stop(lambda: run.samples(), f"the samples of {run.run_id}") \
        if "samples" in run.capabilities else None
    has_episodes = samples is not None and not ep.eval_samples(samples).empty
    if plan.empty and not has_episodes:
        return
    st.markdown("#### Eval episodes")
    if not plan.empty:
        blocks = ep.progress(plan, samples if samples is not None else frames.empty(frames.SAMPLES), validation,
                             last_step=run.overview().last_step)
        ahead = blocks[blocks["state"] == ep.NOT_REACHED]
        reached = blocks[blocks["state"] != ep.NOT_REACHED]
        done, expected = int(reached["done"].sum()), int(reached["expected"].sum())
        text = (f"Eval blocks: {int((blocks['state'] == ep.COMPLETE).sum())} of {len(blocks)} complete · "
                f"{done:,} of {expected:,} episodes of the blocks reached")
        st.progress(min(done / expected, 1.0) if expected else 1.0, text=text)
        if len(ahead):
            st.caption(f"{len(ahead)} planned block(s) after the run's last step (from step {int(ahead['step'].min())}) "
                       "not reached yet. A block is complete once its env's eval results are logged at its step.")
        if len(reached):
            cols = st.columns(min(len(reached), 6))
            for i, b in enumerate(reached.itertuples(index=False)):
                cols[i % len(cols)].progress(float(b.share),
                                             text=f"{md_escape(b.env)} · step {b.step}: {b.done}/{b.expected}")
    tiles = ep.tiles(validation)
    if not tiles.empty:
        cols = st.columns(min(len(tiles), 6))
        for i, t in enumerate(tiles.itertuples(index=False)):
            cols[i % len(cols)].metric(md_escape(f"{t.env} · {t.statistic}"), f"{t.value:.3f}",
                                       delta=None if t.change != t.change else f"{t.change:+.3f}",
                                       help=f"step {t.step}; change against the eval before it")
    if has_episodes:
        st.plotly_chart(ep.beeswarm_figure(samples), config=PLOTLY_CONFIG, key="eval_beeswarm")
        st.caption("Usage: tokens over the eval episodes")
        table = ep.usage(samples)
        st.dataframe(table, hide_index=True, width="stretch", placeholder=ABSENT, height=table_height(len(table)))
    times = ep.timing(run.metrics()) if "metrics" in run.capabilities else None
    if times is not None and not times.empty:
        st.plotly_chart(ep.timing_figure(times), config=PLOTLY_CONFIG, key="eval_timing")
        st.caption(f"From {md_code('eval/<env>/all/<agent>/timing/<phase>/mean')}: model time against tool "
                   "(harness) time and the other phases of an episode.")
