"""The Metrics page through AppTest on the built-in demo runs (every kind), read back from the
figures Streamlit would send to the browser."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import rundash_core as rd
from rundash_core import cache
from rundash_core.charts.sections import covered_keys, sections_for

from helpers import DATA, REPO, open_page
from helpers.pages import figures, plotly_values, section_labels

ROOT = REPO


def metrics_page(monkeypatch, folder, run_id: str, **query) -> AppTest:
    return open_page(monkeypatch, folder, "pages/metrics.py", {"run": run_id, **query})


def run_of(runs, kind: str, flavor: str = "rl"):
    row = runs[(runs["kind"] == kind) & (runs["flavor"] == flavor)].iloc[0]
    return row["run_id"], rd.open_run(row["path"])


EXPECTED = {  # sections each kind must show (in this order), from the issue
    ("prime-rl", "rl"): ["stability", "inference", "performance"],
    ("prime-rl", "sft"): ["train", "stability", "performance"],
    ("verl", "rl"): ["Reward & score", "Policy", "Lengths", "Timing & throughput", "Validation"],
    ("swe-lego-rl", "rl"): ["Reward & score", "Policy", "Rollout correction / IS", "Validation", "Async"],
    ("relax", "rl"): ["Reward", "Lengths", "Status"],
}


@pytest.mark.parametrize("kind,flavor", list(EXPECTED))
def test_each_kind_gets_its_sections_and_the_first_one_is_drawn(monkeypatch, demo_runs, kind, flavor):
    folder, runs = demo_runs
    run_id, run = run_of(runs, kind, flavor)
    at = metrics_page(monkeypatch, folder, run_id)
    labels = section_labels(at)
    want = EXPECTED[(kind, flavor)]
    assert [s for s in labels if s in want] == want, labels
    if kind == "prime-rl":
        assert labels[0].startswith("train")
        assert ("inference" in labels) == (flavor == "rl")  # SFT has no inference section
    ov = run.overview()
    sections = sections_for(run.kind, ov.flavor, run.metrics()["metric"].unique(), train_envs=ov.train_envs,
                            eval_envs=ov.eval_envs)
    first = sections[0]
    figs = figures(at)
    assert len(figs) == len(first.panels)  # only the open section is computed
    logged = set(run.metrics()["metric"].unique())
    panels = {p.title: p for p in first.panels}  # the grid's columns come one after the other
    assert sorted(f["layout"]["title"]["text"] for f in figs) == sorted(p.title for p in first.panels)
    for fig in figs:
        panel = panels[fig["layout"]["title"]["text"]]
        lines = [t for t in fig["data"] if t.get("showlegend", True) is not False]
        names = {t["meta"].split(" (")[0] for t in lines}  # the full label (the legend may show a shorter one)
        assert names and names <= set(panel.keys) <= logged
        assert all(t["name"] in t["meta"] for t in lines)  # the legend shows a part of it


def test_opening_a_section_from_the_url_computes_only_its_charts(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = run_of(runs, "prime-rl")
    first = section_labels(metrics_page(monkeypatch, folder, run_id))[0]
    at = metrics_page(monkeypatch, folder, run_id, **{f"s_{first.replace('/', '-')}": "false", "s_stability": "true"})
    titles = sorted(f["layout"]["title"]["text"] for f in figures(at))
    assert titles == sorted(["optim/grad_norm", "entropy/all/mean", "mismatch_kl/all/mean", "kl_ent_ratio/mean"])


def test_inference_panels_plot_against_relative_time(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, _ = run_of(runs, "prime-rl")
    at = metrics_page(monkeypatch, folder, run_id, **{"s_inference": "true"})
    time_axes = [f["layout"]["xaxis"]["title"]["text"] for f in figures(at) if "time since start" in
                 f["layout"]["xaxis"]["title"]["text"]]
    assert len(time_axes) >= 5 and re.fullmatch(r"time since start \((s|m|h|d)\)", time_axes[0])


def test_smoothing_from_the_url_is_computed_on_the_full_series(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = run_of(runs, "verl")
    at = metrics_page(monkeypatch, folder, run_id, smooth="running_avg", amount_running_avg="3")
    fig = figures(at)[0]
    line = [t for t in fig["data"] if t.get("showlegend", True) is not False][0]
    raw = [t for t in fig["data"] if t["name"].endswith("(raw)")][0]
    key = line["name"]
    m = run.metrics()
    rows = m[m["metric"] == key].sort_values("step")
    y = rows["value"].to_numpy()
    want = np.array([y[max(0, i - 2): i + 1].mean() for i in range(len(y))])  # trailing mean of 3
    assert np.allclose(plotly_values(line["y"]), want)
    assert np.allclose(plotly_values(raw["y"]), y)


def test_all_metrics_mode_filters_and_reaches_keys_no_section_covers(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = run_of(runs, "prime-rl")
    ov = run.overview()
    keys = set(run.metrics()["metric"].unique())
    uncovered = sorted(keys - covered_keys(sections_for(run.kind, ov.flavor, keys, train_envs=ov.train_envs,
                                                         eval_envs=ov.eval_envs)))
    assert uncovered
    target = uncovered[0]
    at = metrics_page(monkeypatch, folder, run_id, view="all", filter=f"^{re.escape(target)}$")
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert titles == [target]

    at = metrics_page(monkeypatch, folder, run_id, view="all", filter="reward", logy="true",
                      x="time")
    figs = figures(at)
    assert figs and all("reward" in f["layout"]["title"]["text"].lower() for f in figs)
    assert all(f["layout"]["yaxis"]["type"] == "log" for f in figs)
    assert all(f["layout"]["xaxis"]["title"]["text"].startswith("time since start") for f in figs)

    at = metrics_page(monkeypatch, folder, run_id, view="all", filter="(unclosed")
    assert any("Invalid regex" in e.value for e in at.error) and not figures(at)

    # a catastrophic pattern on a backtracking engine: linear on RE2, the page answers
    at = metrics_page(monkeypatch, folder, run_id, view="all", filter="(.*)*X(a|aa)+$")
    assert not at.exception and not figures(at) and any("No metric matches" in i.value for i in at.info)


def test_live_refresh_toggle_only_for_running_runs(monkeypatch, demo_runs):
    import streamlit as st

    from rundash_core.demo.runs import RUN_NAMES

    folder, runs = demo_runs
    live = runs[runs["path"].str.endswith(RUN_NAMES["live"])].iloc[0]
    metrics = Path(live["path"]) / "monitors" / "file" / "metrics.jsonl"
    os.utime(metrics)  # written just now: the run is running, however long the tests took
    st.cache_data.clear()  # the runs list is cached for a few seconds
    at = metrics_page(monkeypatch, folder, live["run_id"])
    assert [t for t in at.toggle if t.label == "Pause live refresh"]
    done = runs[runs["status"] == "completed"].iloc[0]
    at = metrics_page(monkeypatch, folder, done["run_id"])
    assert not [t for t in at.toggle if t.label == "Pause live refresh"]


def test_a_rerun_shows_rows_appended_since_the_last_one(monkeypatch, tmp_path):
    import shutil

    data = DATA / "prime-rl"
    out = tmp_path / "outputs"
    src = next(data.iterdir())
    shutil.copytree(src, out / src.name, symlinks=True)
    path = out / src.name / "monitors" / "file" / "metrics.jsonl"
    monkeypatch.setenv("RUNDASH_DIRS", str(out))
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    cache.shared.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.query_params["run"] = src.name
    at.query_params["s_stability"] = "true"
    at.run()
    at.switch_page("pages/metrics.py").run()
    grad = [f for f in figures(at) if f["layout"]["title"]["text"] == "optim/grad_norm"][0]
    before = plotly_values(grad["data"][-1]["x"])
    step = int(before.max()) + 1
    with open(path, "a") as f:
        f.write(json.dumps({"step": step, "time": 1790300000.0, "optim/grad_norm": 123.5,
                            "producer": "trainer"}) + "\n")
    at.run()
    grad = [f for f in figures(at) if f["layout"]["title"]["text"] == "optim/grad_norm"][0]
    x, y = plotly_values(grad["data"][-1]["x"]), plotly_values(grad["data"][-1]["y"])
    assert len(x) == len(before) + 1 and x[-1] == step and y[-1] == 123.5


def test_a_reader_failure_is_a_message_not_a_traceback(monkeypatch, demo_runs):
    from rundash_core.sources.relax.run import RelaxRun

    def broken(self):
        raise OSError("disk went away")

    monkeypatch.setattr(RelaxRun, "metrics", broken)
    folder, runs = demo_runs
    run_id = runs[runs["kind"] == "relax"].iloc[0]["run_id"]
    at = metrics_page(monkeypatch, folder, run_id)
    assert any("Could not read the metrics of" in e.value and "disk went away" in e.value for e in at.error)
    assert not figures(at)


def test_trainer_and_orchestrator_time_step_are_two_labelled_series(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, _ = run_of(runs, "prime-rl")
    at = metrics_page(monkeypatch, folder, run_id, s_performance="true")
    step_time = [f for f in figures(at) if f["layout"]["title"]["text"] == "time/step"][0]
    names = sorted(t["name"] for t in step_time["data"] if t.get("showlegend", True) is not False)
    assert names == ["time/step (orch)", "time/step (trainer)"]
    assert step_time["layout"]["showlegend"] is True


def test_resumes_are_vertical_markers_on_step_charts(monkeypatch, demo_runs):
    """The demo's resumed prime-rl run (attempt 2 went back to an earlier checkpoint) and its verl
    log with an appended resume: a dotted marker at the step each resumed at, on step axes only."""
    folder, runs = demo_runs
    for kind in ("prime-rl", "verl"):
        candidates = [(r.run_id, rd.open_run(r.path, run_id=r.run_id).resume_steps())
                      for r in runs[runs["kind"] == kind].itertuples()]
        run_id, resumes = next((i, s) for i, s in candidates if s)
        figs = figures(metrics_page(monkeypatch, folder, run_id))
        assert figs
        for f in figs:
            marks = [s["x0"] for s in f["layout"].get("shapes", []) if s.get("line", {}).get("dash") == "dot"]
            assert marks == resumes, (kind, f["layout"]["title"]["text"])
        figs = figures(metrics_page(monkeypatch, folder, run_id, x="time")) if kind == "prime-rl" else []
        assert all(not f["layout"].get("shapes") for f in figs if "time" in f["layout"]["xaxis"]["title"]["text"])


def test_a_step_in_the_link_is_marked_on_step_charts(monkeypatch, demo_runs):
    """Reports cite steps as links to `metrics?step=N`: that step is marked on every step-axis
    chart and named in a caption; a step that is not a number is said so and marks nothing."""
    folder, runs = demo_runs
    run_id, _ = run_of(runs, "prime-rl")
    at = metrics_page(monkeypatch, folder, run_id, step="7")
    figs = [f for f in figures(at) if f["layout"]["xaxis"]["title"]["text"] == "step"]
    assert figs and any("Step 7 (from the link)" in c.value for c in at.caption)
    for f in figs:
        marks = [a["text"] for a in f["layout"].get("annotations", []) if a.get("text", "").startswith("step ")]
        assert marks == ["step 7"], f["layout"]["title"]["text"]
        assert 7 in [s["x0"] for s in f["layout"]["shapes"]]
    bad = metrics_page(monkeypatch, folder, run_id, step="<b>x</b>")
    assert any("is not a step number" in c.value for c in bad.caption)
    assert not any(a.get("text", "").startswith("step ") for f in figures(bad) for a in f["layout"].get("annotations", []))


def test_sessions_on_one_run_share_one_build_of_its_charts(monkeypatch, tmp_path):
    """Two sessions showing the same section with the same options get the very same charts (one
    build per index version); other options build their own; a grown run builds anew, with the
    new point, and the old version's charts are not kept."""
    import shutil

    from rundash_core.charts.figures import ChartOptions
    from rundash_core.charts.series import series_index
    from rundash_core.charts.view import metric_charts, section_charts

    src = next((DATA / "prime-rl").iterdir())
    shutil.copytree(src, tmp_path / src.name, symlinks=True)
    cache.shared.clear()
    run = rd.open_run(tmp_path / src.name)
    ov = run.overview()
    index = series_index(run)
    section = sections_for(run.kind, ov.flavor, index.metrics, train_envs=ov.train_envs, eval_envs=ov.eval_envs)[0]
    first = section_charts(index, section, "step", ChartOptions())
    again = section_charts(series_index(rd.open_run(tmp_path / src.name)), section, "step", ChartOptions())
    assert first and again is first
    assert section_charts(index, section, "step", ChartOptions(log_y=True)) is not first
    keys = ["optim/grad_norm"]
    assert metric_charts(index, keys, "step", ChartOptions()) is metric_charts(index, iter(keys), "step", ChartOptions())
    step = int(index.series("optim/grad_norm", x="step")[0].x.max()) + 1
    with open(tmp_path / src.name / "monitors" / "file" / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step, "time": 1790300000.0, "optim/grad_norm": 123.5, "producer": "trainer"}) + "\n")
    grown = series_index(run)
    assert grown is not index
    after = metric_charts(grown, keys, "step", ChartOptions())
    assert after[0].series[-1].x[-1] == step and after[0].series[-1].y[-1] == 123.5
    stale = [k for k in cache.shared._items if k[0] == "charts" and k[2] == tuple(keys)]
    assert len(stale) == 1  # the older version's charts were replaced, not kept beside


def test_a_verl_run_offers_estimated_wall_time_as_compare_places_it(monkeypatch, demo_runs):
    """A verl console log carries no timestamps on its rows: Metrics offers the x axis Compare has,
    "estimated wall time" (`view.estimated_times`: summed `timing_s/step`), says so on the page and
    on each axis, and places every step where Compare does."""
    from rundash_core.charts.series import series_index
    from rundash_core.charts.view import compare_indexes, metrics_index

    folder, runs = demo_runs
    run_id, run = run_of(runs, "verl")
    assert series_index(run).t0 is None  # no logged times: this axis would not exist without the estimate
    at = metrics_page(monkeypatch, folder, run_id, x="time")
    picker = at.selectbox(key="x")
    assert picker.format_func("time") == "estimated wall time" and picker.value == "time"
    assert any(c.value.startswith("Estimated wall time:") and "timing_s/step" in c.value for c in at.caption)
    drawn = [f for f in figures(at) if f["data"]]
    assert drawn and all(f["layout"]["xaxis"]["title"]["text"].startswith("estimated time since start") for f in drawn)
    index, (cmp,) = metrics_index(run), compare_indexes({"r": run})[0].values()
    assert index.time_estimated and cmp.time_estimated
    mine = index.series("critic/score/mean", x="time")[0]
    theirs = cmp.series("reward", x="time")[0]
    assert np.array_equal(mine.step, theirs.step) and np.allclose(mine.x, theirs.x)  # one placement
    tidy = run.metrics()
    durations = tidy[tidy["metric"] == "timing_s/step"].drop_duplicates("step", keep="last")
    assert mine.x[-1] == pytest.approx(durations[durations["step"] <= mine.step[-1]]["value"].sum())


def test_a_run_with_logged_times_keeps_its_relative_wall_time(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, _ = run_of(runs, "prime-rl")
    at = metrics_page(monkeypatch, folder, run_id, x="time")
    assert at.selectbox(key="x").format_func("time") == "relative wall time"
    assert not any(c.value.startswith("Estimated wall time") for c in at.caption)
