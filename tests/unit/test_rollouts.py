"""The rollout panels: outcomes, GRPO signal, episode shape, the task grid and Token & IS keys,
checked numerically on hand-built frames and on real-shaped runs, then on the page."""
from __future__ import annotations

import math

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.views import rollouts as ro

from helpers import DATA, open_page
from helpers.pages import charts_by_title, plotly_values


def samples(rows: list[dict]) -> pd.DataFrame:
    base = {"split": "train", "ok": True}
    return frames.typed([{**base, "sample_id": f"s{i}", **r} for i, r in enumerate(rows)], frames.SAMPLES)


def test_outcomes_name_how_each_rollout_ended():
    s = samples([
        {"step": 1, "status": "completed"},
        {"step": 1, "status": "length", "truncated": True},
        {"step": 1, "status": "aborted"},
        {"step": 1, "status": "pending"},
        {"step": 1, "ok": False, "error": "TimeoutError: sandbox did not answer"},
        {"step": 2, "ok": False, "error": "harbor.errors.EnvironmentStartTimeoutError after 600 s"},
        {"step": 2, "ok": False, "status": "failed"},
        {"step": 2, "status": "agent_completed"},
    ])
    assert ro.outcome(s).tolist() == ["completed", "truncated", "aborted", "pending", "error: TimeoutError",
                                      "error: EnvironmentStartTimeoutError", "error", "completed"]
    counts = ro.outcomes_by_step(s).set_index(["step", "outcome"])["n"]
    assert counts[(1, "truncated")] == 1 and counts[(2, "completed")] == 1 and counts.sum() == 8


def test_groups_all_right_or_all_wrong_give_no_signal():
    rows = []
    for g, rewards in {"a": [1, 1, 1, 1], "b": [0, 0, 0, 0], "c": [1, 0, 0.5, 0], "d": [0, 0, 0, 1]}.items():
        rows += [{"step": 3, "group_id": g, "reward": r, "advantage": 0.0 if g in "ab" else r - 0.4} for r in rewards]
    rows += [{"step": 3, "group_id": "e", "reward": 1.0}, {"step": 3, "group_id": "f", "reward": 0.0, "split": "eval"},
             {"step": 3, "group_id": "f", "reward": 0.0, "split": "eval"}]
    gf = ro.groups(samples(rows)).set_index("group_id")
    assert gf.loc["c", "correct"] == 2 and gf.loc["c", "reward_max"] == 1 and gf.loc["d", "correct"] == 1
    assert gf["no_signal"].to_dict() == {"a": True, "b": True, "c": False, "d": False, "e": False, "f": True}
    assert gf.loc["a", "zero_advantage"] and not gf.loc["c", "zero_advantage"] and not gf.loc["e", "zero_advantage"]
    hist = ro.correct_of_n(gf.reset_index())
    # train groups of 4: a (4 right), b (0), c (2), d (1); e has one rollout, f is eval
    assert hist == {"n": 4, "histogram": [1, 1, 1, 0, 1], "groups": 4, "other_sizes": 0, "no_signal": 0.5,
                    "mean_solve_rate": (1 + 0 + 0.5 + 0.25) / 4}
    per_step = ro.signal_by_step(gf.reset_index()).iloc[0]
    assert per_step["groups"] == 4 and per_step["no_signal"] == 0.5 and per_step["zero_advantage"] == 0.5


def test_episodes_by_step():
    s = samples([{"step": 1, "output_tokens": t, "input_tokens": 100, "turns": 2, "duration_s": 10.0}
                 for t in range(1, 11)] + [{"step": 2, "output_tokens": 50, "truncated": True, "turns": 4},
                                           {"step": 2, "output_tokens": 70, "ok": False, "error": "boom"}])
    out = ro.episodes_by_step(s).set_index("step")
    assert out.loc[1, "samples"] == 10 and out.loc[1, "output_tokens"] == 5.5
    assert out.loc[1, "output_tokens_p90"] == pytest.approx(9.1) and out.loc[1, "duration_s"] == 10.0
    assert out.loc[2, "truncated"] == 0.5 and out.loc[2, "errors"] == 0.5 and out.loc[2, "turns"] == 4
    assert math.isnan(out.loc[2, "input_tokens"])


def test_task_grid_solve_rates_per_epoch():
    rows = [{"step": 1, "task_id": "t1", "reward": r} for r in (0, 0)] + \
           [{"step": 5, "task_id": "t1", "reward": r} for r in (1, 0)] + \
           [{"step": 1, "task_id": "t2", "reward": 1.0}, {"step": 5, "task_id": "t3", "reward": 0.0},
            {"step": 5, "task_id": "t4", "reward": 1.0}, {"step": 9, "task_id": "t4", "reward": 0.0},
            {"step": 9, "task_id": "tv", "reward": 1.0, "split": "val"}]
    grid, tasks = ro.task_grid(samples(rows))
    assert list(grid.columns) == [1, 5, 9] and "tv" not in grid.index
    assert grid.loc["t1", 1] == 0 and grid.loc["t1", 5] == 0.5 and math.isnan(grid.loc["t2", 5])
    t = tasks.set_index("task_id")
    assert t.loc["t1", "delta"] == 0.5 and t.loc["t4", "delta"] == -1 and math.isnan(t.loc["t2", "delta"])
    assert list(tasks["task_id"]) == ["t3", "t1", "t4", "t2"]  # by solve rate, lowest first
    assert list(grid.index) == list(tasks["task_id"])
    task, step, picked = ro.cell_samples(samples(rows), grid, (1, "5"))  # the table's row 1 = t1, column "5"
    assert (task, step) == ("t1", 5) and picked["reward"].tolist() == [1.0, 0.0]
    assert ro.cell_samples(samples(rows), grid, (0, "1"))[2].empty  # t3 was not rolled out at step 1
    assert ro.grid_totals(tasks) == {"tasks": 4, "never_solved": 1, "always_solved": 1, "multi_epoch": 2,
                                     "improved": 1, "regressed": 1}


def test_token_is_panels_find_each_kinds_keys():
    keys = ["rollout_corr/kl", "rollout_corr/log_ppl_diff_p90", "rollout_corr/log_ppl_diff_gt1_frac",
            "mismatch_kl/all/mean", "is_masked/all/mean", "training/rollout_actor_probs_pearson_corr",
            "actor/pg_loss", "entropy/all/mean"]
    panels = ro.token_is_panels(keys)
    assert panels["Trainer vs inference KL"] == ["mismatch_kl/all/mean", "rollout_corr/kl"]
    assert panels["Tokens beyond bounds"] == ["is_masked/all/mean", "rollout_corr/log_ppl_diff_gt1_frac"]
    assert "actor/pg_loss" not in sum(panels.values(), []) and "Perplexity" not in panels


def test_real_relax_rows_and_lego_metrics():
    relax = rd.open_run(rd.discover([DATA / "relax"])["path"].iloc[0])
    s = relax.samples()
    ends = ro.outcome(s)
    assert ends.isin(["completed", "truncated", "aborted", "pending"]).sum() + ends.str.startswith("error").sum() == len(s)
    expected_truncated = int(((s["status"] == "truncated") & s["ok"].ne(False).fillna(True)).sum())
    assert (ends == "truncated").sum() == expected_truncated
    lego = rd.open_run(rd.discover([DATA / "lego-full"])["path"].iloc[0])
    panels = ro.token_is_panels(lego.metrics()["metric"].unique())
    assert "rollout_corr/kl" in panels["Trainer vs inference KL"]


def _run_of(runs, kind):
    return runs[runs["kind"] == kind].iloc[0]


def test_rollouts_page_panels_on_the_demo(monkeypatch, demo_runs):
    folder, runs = demo_runs
    relax = _run_of(runs, "relax")
    at = open_page(monkeypatch, folder, "pages/rollouts.py", {"run": relax["run_id"]})
    titles = list(charts_by_title(at))
    assert "How rollouts ended" in titles and "Correct out of 4 (train groups)" in titles
    bars = {t["name"]: int(plotly_values(t["y"]).astype(int).sum()) for t in charts_by_title(at)["How rollouts ended"]["data"]}
    expected = ro.outcome(rd.open_run(relax["path"]).samples()).value_counts().to_dict()
    assert bars == expected  # every rollout counted once, under its outcome
    assert {m.label for m in at.metric} >= {"No signal", "Mean solve rate", "Groups"}
    at = open_page(monkeypatch, folder, "pages/rollouts.py", {"run": relax["run_id"], "panel": "episodes"})
    assert "Lengths" in charts_by_title(at) and "Abnormal ends" in charts_by_title(at)
    lego = _run_of(runs, "swe-lego-rl")
    at = open_page(monkeypatch, folder, "pages/rollouts.py", {"run": lego["run_id"], "panel": "tasks"})
    assert "Task grid" in charts_by_title(at)
    assert any(m.label == "never solved" for m in at.metric)
    at = open_page(monkeypatch, folder, "pages/rollouts.py", {"run": lego["run_id"], "panel": "token_is"})
    assert any(t.startswith("Trainer vs inference KL") for t in charts_by_title(at))


def test_a_run_without_samples_says_so(monkeypatch, demo_runs):
    folder, runs = demo_runs
    bare = runs[runs["run_id"].str.startswith("reverse-text")].iloc[0]
    at = open_page(monkeypatch, folder, "pages/rollouts.py", {"run": bare["run_id"]})
    shown = " ".join(m.value for m in at.markdown) + " ".join(i.value for i in at.info)
    assert "no samples" in shown
