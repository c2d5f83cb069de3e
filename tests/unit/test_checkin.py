"""The monitor-run check-in entry (`rundash_core.health.checkin`) and the Health page that shows it."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

import rundash_core as rd
from rundash_core.health.checkin import checkin_markdown, run_checkin
from rundash_core.health.checks import HEALTH_STATES, health, health_state
from rundash_core.views.display_text import format_duration, md_code

from helpers import open_page, snapshot
from helpers.health import DT, T0, checkin_fields, noise, signals


def test_entry_is_filled_from_frames_and_findings():
    grad = noise(100, 1.0, 0.05)
    grad[99] = 9.0  # the newest step spiked while running: a current warning
    series = {"train/agg/effective/agent/reward/mean": ("orch", np.linspace(0.2, 0.6, 100)),
              "optim/grad_norm": grad, "entropy/all/mean": noise(100, 0.5, 0.01),
              "time/step": ("trainer", np.full(100, 10.0)), "time/wait_for_batch": ("trainer", np.full(100, 2.0))}
    now = T0 + 101 * DT
    s = signals(series, status="running", max_steps=500, now=now, finished=False)
    found = health(s)
    md = checkin_markdown(s, found, now=now)
    assert md.splitlines()[0] == "## " + pd.Timestamp(now, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M UTC")
    f = checkin_fields(md)
    assert f["Step"] == "100 / 500"
    assert f["Health"] == health_state(found) == "Degraded"
    assert "reward 0.6 (was 0.5192 at step 80)" in f["Progress"]
    assert "grad_norm 9 (was" in f["Stability"] and "⚠ grad norm spiked 1×" in f["Stability"]
    assert "not yet recovered" in f["Stability"]
    assert "trainer step 10 s" in f["Performance"] and "trainer wait_for_batch 2 s" in f["Performance"]
    assert "360 steps/h" in f["Performance"]
    assert f["Notes"] == "nothing notable."


def test_a_spike_that_recovered_is_a_dated_note_not_a_warning():
    grad = noise(100, 1.0, 0.05)
    grad[40] = 9.0
    s = signals({"optim/grad_norm": grad}, status="running", max_steps=500, now=T0 + 101 * DT, finished=False)
    f = checkin_fields(checkin_markdown(s, health(s)))
    assert f["Health"] == "Healthy" and "⚠" not in f["Stability"]
    assert f["Notes"].startswith("grad norm spiked 1× (worst 9 at step 41") and "recovered by step 44" in f["Notes"]


def test_a_stalled_run_is_stalled_with_a_note():
    s = signals({"optim/grad_norm": noise(50, 1.0)}, status="running", max_steps=100, now=T0 + 50 * DT + 3600)
    f = checkin_fields(checkin_markdown(s, health(s)))
    assert f["Health"] == "Stalled"
    assert f["Notes"].startswith("no new step for 1h 00m after step 50")
    assert f["Progress"] == "no progress metrics logged."


def test_every_demo_run_gets_an_entry_and_nothing_is_written(demo_runs):
    folder, runs = demo_runs
    before = snapshot(folder)
    for path, run_id in zip(runs["path"], runs["run_id"]):
        run = rd.open_run(path, run_id=run_id)
        now = time.time()  # (a running run's duration ticks: both read as of one moment)
        f = checkin_fields(run_checkin(run, now=now))
        ov = run.overview(now)
        assert f["Step"] == f"{ov.step} / {ov.max_steps if ov.max_steps is not None else '∞'}"
        # name, status and duration are the one summary's, as the run card shows them
        name, status, duration = f["Run"].split(" · ")
        assert (name, status, duration) == (md_code(ov.name), ov.status, format_duration(ov.duration_s))
        assert f["Health"] in HEALTH_STATES
    assert snapshot(folder) == before  # rundash never writes into a run directory


def test_health_page_shows_findings_and_the_check_in(monkeypatch, demo_runs, tables):
    import streamlit

    downloads = []
    real = streamlit.download_button
    monkeypatch.setattr(streamlit, "download_button",
                        lambda label, data, *a, **k: downloads.append((label, data, k)) or real(label, data, *a, **k))
    folder, runs = demo_runs
    row = runs[runs["kind"] == "verl"].iloc[0]
    run = rd.open_run(row["path"], run_id=row["run_id"])
    at = open_page(monkeypatch, folder, "pages/health.py", {"run": row["run_id"]})
    found = run.health()
    state = health_state(found)
    assert any(m.value.startswith("## Health") and state in m.value for m in at.markdown)
    table = next(d for d, _k in tables if "message" in getattr(d, "columns", []))
    assert list(table["message"]) == [f.message for f in found]
    entry = next(c.value for c in at.code if c.value.startswith("## "))
    assert checkin_fields(entry)["Health"] == state and checkin_fields(entry)["Step"] == f"{run.overview().step} / 150"
    label, data, kw = downloads[0]
    assert data.strip() == entry.strip() and kw["mime"] == "text/markdown" and kw["file_name"].endswith(".md")
    assert at.code[[c.value for c in at.code].index(entry)].language == "markdown"  # st.code: a copy button


def test_health_page_on_every_kind(monkeypatch, demo_runs):
    folder, runs = demo_runs
    for run_id in runs["run_id"]:
        at = open_page(monkeypatch, folder, "pages/health.py", {"run": run_id})
        entry = next(c.value for c in at.code if c.value.startswith("## "))
        state = checkin_fields(entry)["Health"]
        assert any(m.value.startswith("## Health") and state in m.value for m in at.markdown)


def test_health_page_re_checks_a_running_run_only(monkeypatch, demo_runs):
    folder, runs = demo_runs
    for status, live in (("running", True), ("completed", False)):
        run_id = runs[runs["status"] == status].iloc[0]["run_id"]
        at = open_page(monkeypatch, folder, "pages/health.py", {"run": run_id})
        caption = next(c.value for c in at.caption if c.value.startswith("Rule-based checks"))
        assert "As of " in caption and ("re-checked every 30 s while the run is running" in caption) == live, status


def _prime_eval(avg: list[float], pass1: list[float], pass2: list[float]):
    from rundash_core import frames

    rows = [{"event": f"step {s}", "step": s, "source": "gsm8k", "statistic": stat, "value": v, "n": None,
             "core": True} for stat, values in (("avg@2", avg), ("pass@1", pass1), ("pass@2", pass2))
            for s, v in zip((0, 10, 20), values)]
    return frames.typed(rows, frames.VALIDATION)


def test_eval_is_the_validation_headline_statistic_and_val_drop_reads_it():
    from rundash_core.health.checkin import eval_text
    from rundash_core.views import validation as val

    frame = _prime_eval([0.5, 0.833333, 0.75], [0.5, 0.833333, 0.75], [0.75, 1.0, 1.0])
    s = signals({"optim/grad_norm": noise(20, 1.0)}, validation=frame)
    assert val.headline_statistic(frame) == "avg@2"
    assert eval_text(s) == ["eval avg@2 0.750 at step 20 (best 0.833 at step 10)"]
    # avg@2 fell 0.833 → 0.700 (beyond 10% of its best) while pass@2 held at 1.0: the drop is avg@2's
    dropped = _prime_eval([0.5, 0.833333, 0.7], [0.5, 0.833333, 0.7], [0.75, 1.0, 1.0])
    found = health(signals({"optim/grad_norm": noise(20, 1.0)}, validation=dropped))
    f = next(f for f in found if f.rule == "val_drop")
    assert f.metric == "avg@2" and f.message == "eval avg@2 0.700 at step 20 is below its best 0.833 (step 10)"
