"""The Validation page through AppTest: on the demo runs of every kind and on the sample dumps
(`tests/data/lego-val`: four val events, the last one still being written)."""
from __future__ import annotations

import re
import shutil
import urllib.parse

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import episode_ids
from rundash_core.views import validation as val
from rundash_core.views import validation_charts as vc

from helpers import DATA, open_page
from helpers.pages import charts_by_title, first_run_of_kind

PAGE = "pages/validation.py"
EXP = "qwen3-8b-swegym-gspo-async-r1"


def _text(at) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def _table(at, column: str) -> pd.DataFrame:
    found = [d.value for d in at.dataframe if column in getattr(d.value, "columns", [])]
    assert len(found) == 1, [list(d.value.columns) for d in at.dataframe]
    return found[0]


@pytest.fixture(scope="module")
def lego_val(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lego") / "lego-val"
    shutil.copytree(DATA / "lego-val", folder)
    return folder


def test_val_score_never_reward_and_the_breakdown(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "swe-lego-rl")
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    text = _text(at)
    assert "Val Score, not reward" in text and "graded pass/fail by the verifier" in text and "training signal" in text
    charts = charts_by_title(at)
    score = charts["Val Score per event"]
    assert score["layout"]["yaxis"]["title"]["text"] == "val score"
    assert not any("reward" in (t.get("name") or "").lower() for t in score["data"] if t["name"].startswith("trials"))
    v = run.validation()
    assert {t["name"] for t in score["data"]} == set(val.series_names(v[v["core"]]))
    # the breakdown: per capability pass@1 at the last event, against the previous one
    table = _table(at, "change")
    last = list(val.events(v)["event"])[-1]
    want = val.breakdown(v, last, "pass@1")
    assert list(table["source"]) == list(want["source"]) and len(table) > 3
    assert table["change"].tolist() == pytest.approx((table["value"] - table["previous"]).tolist(), nan_ok=True)
    assert at.query_params["event"] == last and at.query_params["stat"] == "pass@1"


def test_event_and_statistic_from_the_link(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "swe-lego-rl")
    v = run.validation()
    first = list(val.events(v)["event"])[0]
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "event": first, "stat": "pass@1"})
    table = _table(at, "change")
    assert table["previous"].isna().all()  # the first event has nothing before it
    assert sorted(table["value"]) == sorted(v[(v["event"] == first) & (v["statistic"] == "pass@1")]["value"])


def test_failure_buckets_link_to_their_trajectories(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "swe-lego-rl")
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    fig = charts_by_title(at)["Failure modes per event"]
    assert fig["layout"]["barmode"] == "stack"
    events = list(val.events(run.validation())["event"])
    modes = vc.failure_modes_all(run, events)
    assert sum(sum(t["customdata"]) for t in fig["data"]) == len(modes) > 0
    last = modes[modes["event"] == events[-1]]
    every = run.samples()  # a link carries the trial name (the writer's id, `link_ids`), as every deep link
    samples = set(episode_ids.link_ids(every)[every["split"] == "val"])
    for cat in sorted(set(last["category"])):
        next(r for r in at.radio if r.label == "Bucket").set_value(cat).run()
        links = _table(at, "trajectory")
        assert len(links) == int((last["category"] == cat).sum())
        for link in links["trajectory"]:
            path, _, query = link.partition("?")
            q = dict(urllib.parse.parse_qsl(query))
            assert path == "trajectory" and q["run"] == run_id and q["split"] == "val" and q["sample"] in samples
    # a bucket's link opens that trajectory
    q = dict(urllib.parse.parse_qsl(links["trajectory"].iloc[0].partition("?")[2]))
    traj = open_page(monkeypatch, folder, "pages/trajectory.py", q)
    assert q["sample"] in [c.value.strip() for c in traj.code]


def test_cot_share_and_low_coverage_on_the_sample_dumps(monkeypatch, lego_val):
    run = rd.open_run(lego_val / "logs" / f"{EXP}.log")
    at = open_page(monkeypatch, lego_val, PAGE, {"run": run.run_id})
    charts = charts_by_title(at)
    cot = charts["CoT share of the val responses (fixed cohort)"]
    want = run.val_cot()
    main = cot["data"][0]
    assert main["y"] == pytest.approx(want["cot_ratio"].tolist())
    assert cot["data"][1]["line"]["dash"] == "dash"
    low = [i for i, t in enumerate(main["text"]) if t == vc.LOW_NOTE]
    assert low == [3] and "(low coverage — indicative only)" in main["customdata"][3]
    assert "tool-call arguments" in _text(at) and "fixed cohort of 30 tasks" in _text(at)
    # the dump still being written is an event at once, marked on the score chart too
    score = charts["Val Score per event"]
    assert any(vc.LOW_NOTE in t for t in score["data"][0]["text"])
    assert "step_0196" in _text(at)
    assert list(_table(at, "cot_ratio_weighted")["n"]) == want["n"].tolist()


@pytest.mark.parametrize("kind, statistic", [("verl", "mean@1"), ("prime-rl", "avg@4"), ("relax", "mean")])
def test_other_kinds(monkeypatch, demo_runs, kind, statistic):
    folder, runs = demo_runs
    run_id, run = next((r, o) for r, p, k in zip(runs["run_id"], runs["path"], runs["kind"])
                       if k == kind and not (o := rd.open_run(p, run_id=r)).validation().empty)
    v = run.validation()
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    score = charts_by_title(at)["Val Score per event"]
    assert {t["name"] for t in score["data"]} == set(val.series_names(v[v["core"]]))
    assert any(t["name"].endswith(statistic) for t in score["data"])
    assert "Failure modes per event" not in charts_by_title(at)  # only where the run offers them
    assert "CoT share of the val responses (fixed cohort)" not in charts_by_title(at)
    last = list(val.events(v)["event"])[-1]
    table = _table(at, "change")
    assert list(table["source"]) == list(val.breakdown(v, last, val.headline_statistic(v))["source"])


def test_a_run_without_validation(monkeypatch, demo_runs):
    folder, runs = demo_runs
    for run_id, path in zip(runs["run_id"], runs["path"]):
        if rd.open_run(path, run_id=run_id).validation().empty:
            at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
            assert any("No validation events yet" in i.value or "no validation" in i.value for i in at.info)
            assert not at.get("plotly_chart")
            return
    pytest.fail("no demo run without validation (the demo's SFT run had none): the empty state went unchecked")


def test_eval_pane_on_the_sample_prime_rl_run(monkeypatch, tmp_path):
    """The shipped prime-rl sample (metrics + plan.json) with its traces: blocks' progress from the
    plan, avg@k / pass@k tiles, the rewards beeswarm, usage and timing."""
    from rundash_core.views import eval_pane as ep

    from helpers import NEW_NAME, NEW_RUN, copy_run

    run_dir = copy_run(NEW_RUN, tmp_path / "out")
    shutil.copytree(DATA / "prime-rl-traces" / NEW_NAME / "monitors" / "file" / "traces",
                    run_dir / "monitors" / "file" / "traces")
    run = rd.open_run(run_dir)
    at = open_page(monkeypatch, tmp_path / "out", PAGE, {"run": run.run_id})
    plan = run.eval_plan()
    bars = [p for p in at.get("progress")]
    assert len(bars) == 1 + len(plan)
    assert f"{len(plan)} of {len(plan)} complete" in bars[0].proto.text
    # a label is Markdown: what a reader sees is it with its backslash escapes read (`pass\@2` shows pass@2)
    tiles = {re.sub(r"\\(.)", r"\1", m.label): m.value for m in at.metric}
    want = ep.tiles(run.validation())
    assert tiles == {f"{e} · {s}": f"{v:.3f}" for e, s, v in zip(want["env"], want["statistic"], want["value"])}
    charts = charts_by_title(at)
    assert "Rewards per eval episode" in charts and "Mean time per eval episode (latest eval step)" in charts
    assert list(_table(at, "output_per_episode")["episodes"]) == list(ep.usage(run.samples())["episodes"])


def test_no_eval_pane_without_eval_episodes(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, _run_obj = first_run_of_kind(runs, "swe-lego-rl")
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    assert "Rewards per eval episode" not in charts_by_title(at) and not at.get("progress")


def test_switching_runs_keeps_the_page_working(monkeypatch, demo_runs):
    """The event, statistic, series and bucket chosen for one run do not break another run's page."""
    folder, runs = demo_runs
    lego_id, lego = first_run_of_kind(runs, "swe-lego-rl")
    verl_id, verl = first_run_of_kind(runs, "verl")
    at = open_page(monkeypatch, folder, PAGE, {"run": lego_id})
    at.selectbox(key="event").set_value(list(val.events(lego.validation())["event"])[0]).run()
    at.selectbox(key="sidebar_run").set_value(verl_id).run()
    assert not at.exception, [e.value for e in at.exception]
    v = verl.validation()
    assert {t["name"] for t in charts_by_title(at)["Val Score per event"]["data"]} == set(val.series_names(v[v["core"]]))
    assert at.query_params["event"] in set(v["event"])
    at.selectbox(key="sidebar_run").set_value(lego_id).run()
    assert not at.exception and "Failure modes per event" in charts_by_title(at)
