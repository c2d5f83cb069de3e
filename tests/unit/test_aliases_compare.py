"""Canonical aliases (rundash_core.charts.aliases) and run comparison (rundash_core.compare): alias
resolution on demo and real runs, metric tables, config diffs and group bands against hand-computed
values."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import rundash_core as rd
from rundash_core.charts.aliases import ALIASES, alias_table, canonical_frame, resolve, resolve_sources
from rundash_core.compare import (
    config_diff,
    config_value,
    default_runs,
    direction,
    flatten_config,
    group_band,
    group_labels,
    metric_table,
    missing_configs,
    read_config,
)

from helpers import DATA


def tidy(rows) -> pd.DataFrame:
    """rows: (step or None, time, metric, value, producer)."""
    df = pd.DataFrame(rows, columns=["step", "time", "metric", "value", "producer"])
    return df.astype({"step": "Int64", "time": "float64", "metric": "category", "value": "float64",
                      "producer": "category"})


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory) -> dict[str, rd.Run]:
    from rundash_core import demo

    folder = demo.ensure_demo(tmp_path_factory.mktemp("demo") / "demo")
    found = rd.discover([str(folder)])
    return {name: rd.open_run(path) for name, path in zip(found["name"], found["path"])}


def _keys(run) -> set[str]:
    return set(run.metrics()["metric"].astype(str))


# aliases ----------------------------------------------------------------------------------------
def test_reward_resolves_per_kind_on_demo_runs(demo_runs):
    expected = {"prime-rl": "train/agg/effective/agent/reward/mean", "verl": "critic/score/mean",
                "swe-lego-rl": "critic/score/mean", "relax": "rollout/reward/mean"}
    seen = set()
    for run in demo_runs.values():
        if run.overview().flavor != "rl" or (run.kind == "prime-rl" and "math-python" not in run.name):
            continue
        assert resolve(run.kind, _keys(run), "reward") == (expected[run.kind], 1.0), run.name
        seen.add(run.kind)
    assert seen == set(expected)


def test_canonical_frame_renames_and_keeps_the_source(demo_runs):
    run = next(r for r in demo_runs.values() if r.kind == "verl")
    m = run.metrics()
    cf = canonical_frame(run.kind, m)
    reward = cf[cf["metric"] == "reward"]
    raw = m[m["metric"] == "critic/score/mean"]
    assert len(reward) == len(raw) > 0 and set(reward["source_key"]) == {"critic/score/mean"}
    assert reward["value"].tolist() == raw["value"].tolist() and reward["step"].tolist() == raw["step"].tolist()
    assert str(cf["step"].dtype) == "Int64" and isinstance(cf["metric"].dtype, pd.CategoricalDtype)
    assert list(cf.columns) == ["step", "time", "metric", "value", "producer", "source_key"]


def test_first_present_candidate_wins():
    assert resolve("verl", ["critic/rewards/mean", "critic/score/mean"], "reward") == ("critic/score/mean", 1.0)
    assert resolve("verl", ["critic/rewards/mean"], "reward") == ("critic/rewards/mean", 1.0)
    assert resolve("verl", ["actor/entropy_loss"], "entropy") == ("actor/entropy_loss", 1.0)
    assert resolve("relax", ["rollout/reward/mean"], "entropy") is None
    assert resolve("prime-rl", ["train/agg/effective/solver/reward/mean"], "reward") == (
        "train/agg/effective/solver/reward/mean", 1.0)
    with pytest.raises(KeyError, match="unknown alias"):
        resolve("verl", [], "rewardz")


def test_verl_lr_1e4_conversion_on_a_real_log():
    run = rd.open_run(DATA / "verl" / "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log")
    m = run.metrics()
    assert resolve(run.kind, _keys(run), "learning rate") == ("actor/lr(1e-4)", 1e-4)
    cf = canonical_frame(run.kind, m, ["learning rate"])
    raw = m[m["metric"] == "actor/lr(1e-4)"]["value"].to_numpy()
    assert len(cf) == len(raw) > 0 and set(cf["source_key"]) == {"actor/lr(1e-4)"}
    np.testing.assert_allclose(cf["value"].to_numpy(), raw * 1e-4)
    assert cf["value"].max() < 1e-4 < raw.max()  # the logged number is lr × 1e4
    sft = rd.open_run(DATA / "verl" / "eh_gemma-2-2b-it-sft-0.411.log")
    assert resolve(sft.kind, _keys(sft), "learning rate") == ("train/lr(1e-3)", 1e-3)


def test_val_score_is_the_mean_over_data_sources():
    rows = [(0, np.nan, "val-core/a/acc/mean@4", 0.2, "trainer"), (10, np.nan, "val-core/a/acc/mean@4", 0.4, "trainer"),
            (0, np.nan, "val-aux/a/reward/mean@4", 9.0, "trainer"),
            (0, np.nan, "val-core/o/gsm8k/reward/mean@1", 0.6, "trainer"),
            (10, np.nan, "val-core/o/gsm8k/reward/mean@1", 0.8, "trainer"),
            (20, np.nan, "val-core/a/acc/mean@4", 0.5, "trainer"), (5, np.nan, "critic/score/mean", 0.1, "trainer")]
    df = tidy(rows)
    found = resolve_sources("verl", df["metric"].astype(str), "val score")
    assert [(s, k) for s, k, _ in found] == [("a", "val-core/a/acc/mean@4"), ("o/gsm8k", "val-core/o/gsm8k/reward/mean@1")]
    cf = canonical_frame("verl", df, ["val score"])
    assert cf["step"].tolist() == [0, 10, 20]
    np.testing.assert_allclose(cf["value"].to_numpy(), [0.4, 0.6, 0.5])
    assert cf["source_key"].astype(str).tolist()[0] == "mean(val-core/a/acc/mean@4, val-core/o/gsm8k/reward/mean@1)"
    assert cf["source_key"].astype(str).tolist()[2] == "mean(val-core/a/acc/mean@4)"


def test_prime_rl_step_time_reads_the_trainer_rows_only():
    df = tidy([(1, 1.0, "time/step", 10.0, "trainer"), (1, 1.0, "time/step", 3.0, "orch"),
               (2, 2.0, "time/step", 12.0, "trainer")])
    cf = canonical_frame("prime-rl", df, ["step time"])
    assert cf["value"].tolist() == [10.0, 12.0] and set(cf["producer"]) == {"trainer"}


def test_alias_table_lists_every_alias_with_its_conversions():
    t = alias_table()
    assert list(t.columns)[:4] == ["alias", "kind", "candidates", "conversion"]
    assert set(t["alias"]) == set(ALIASES)
    assert set(t[t["alias"] == "reward"]["kind"]) == set(rd.KINDS)  # every kind has a reward
    lr = t[(t["alias"] == "learning rate") & (t["kind"] == "verl")].iloc[0]
    assert lr["candidates"].index("actor/lr") < lr["candidates"].index("actor/lr(1e-4)")
    assert "actor/lr(1e-4) × 0.0001" in lr["conversion"] and "train/lr(1e-3) × 0.001" in lr["conversion"]
    reward = t[(t["alias"] == "reward") & (t["kind"] == "verl")].iloc[0]
    assert reward["candidates"] == "critic/score/mean → critic/rewards/mean" and reward["conversion"] == ""


# metric table -----------------------------------------------------------------------------------
def test_metric_table_best_and_step_of_best_by_hand():
    rows = [(3, 4.0, "reward", 0.3, "orch"), (0, 1.0, "reward", 0.1, "orch"), (1, 2.0, "reward", 0.5, "orch"),
            (2, 3.0, "reward", 0.5, "orch"),  # a tie: the first step reaching it is the step of best
            (None, 5.0, "reward", 100.0, "orch"),  # time-keyed: not part of the per-step table
            (0, 1.0, "loss/mean", 2.0, "trainer"), (1, 2.0, "loss/mean", 1.0, "trainer"),
            (2, 3.0, "loss/mean", 1.5, "trainer"), (3, 4.0, "loss/mean", 0.5, "trainer"),
            (3, 9.0, "loss/mean", 0.7, "trainer")]  # step 3 rewritten after a resume: last row wins
    out = metric_table({"run-a": tidy(rows)}).set_index("metric")
    r = out.loc["reward"]
    assert (r["run"], r["producer"], r["last"], r["min"], r["max"], r["better"], r["best"], r["step_of_best"],
            r["steps"]) == ("run-a", "orch", 0.3, 0.1, 0.5, "↑", 0.5, 1, 4)
    loss = out.loc["loss/mean"]
    assert (loss["last"], loss["min"], loss["better"], loss["best"], loss["step_of_best"], loss["steps"]) == (
        0.7, 0.7, "↓", 0.7, 3, 4)


def test_metric_table_has_no_best_for_two_sided_metrics():
    """Entropy and response length have no better direction: no best, no step of best (it used
    to report entropy's maximum as its best)."""
    rows = [(0, 0.0, "entropy", 0.9, "t"), (1, 1.0, "entropy", 1.4, "t"), (2, 2.0, "entropy", 0.6, "t"),
            (0, 0.0, "response length", 300.0, "t"), (1, 1.0, "response length", 900.0, "t"),
            (0, 0.0, "KL", 0.02, "t"), (1, 1.0, "KL", 0.01, "t")]
    out = metric_table({"a": tidy(rows)}).set_index("metric")
    for metric in ("entropy", "response length"):
        row = out.loc[metric]
        assert pd.isna(row["best"]) and pd.isna(row["step_of_best"]) and pd.isna(row["better"]), metric
        assert row["max"] > row["min"]  # the range is still reported
    assert (out.loc["KL", "best"], out.loc["KL", "step_of_best"]) == (0.01, 1)
    assert str(out["best"].dtype) == "float64" and str(out["step_of_best"].dtype) == "Int64"


def test_metric_table_filters_and_orders_metrics():
    a = tidy([(0, 0.0, "x/reward", 1.0, "t"), (0, 0.0, "y/reward", 2.0, "t"), (0, 0.0, "z", 3.0, "t")])
    b = tidy([(0, 0.0, "y/reward", 5.0, "t"), (1, 0.0, "y/reward", 4.0, "t")])
    out = metric_table({"a": a, "b": b, "empty": a.iloc[:0]}, metrics=["y/reward", "x/reward"])
    assert list(zip(out["metric"], out["run"])) == [("y/reward", "a"), ("y/reward", "b"), ("x/reward", "a")]
    assert out.set_index(["metric", "run"]).loc[("y/reward", "b"), "step_of_best"] == 0


@pytest.mark.parametrize("metric, way", [
    ("critic/score/mean", "up"), ("actor/pg_loss", "down"), ("loss/mean", "down"), ("val/perplexity", "down"),
    ("mismatch_kl/all/mean", "down"), ("rollout_corr/k3_kl", "down"), ("optim/grad_norm", "down"),
    ("time/step", "down"), ("timing_s/gen", "down"), ("train/time(s)", "down"), ("response_length/clip_ratio", "down"),
    ("train/agg/all/agent/has_error/mean", "down"), ("perf/mfu", "up"), ("perf/throughput", "up"),
    ("actor/entropy", None), ("actor/entropy_loss", None), ("optim/lr", None), ("actor/kl_coef", None),
    ("val-core/a/acc/mean@4", "up"), ("eval/gsm8k/all/agent/avg@4", "up"), ("eval/gsm8k/effective/agent/pass@1", "up"),
    ("rollout/reward/std", None), ("response_length/mean", None), ("critic/advantages/mean", None),
    # the canonical aliases the Compare metric table shows
    ("reward", "up"), ("entropy", None), ("KL", "down"), ("grad norm", "down"), ("response length", None),
    ("throughput", "up"), ("val score", "up"), ("learning rate", None), ("step time", "down"),
    ("generation time per token", "down")])
def test_direction(metric, way):
    assert direction(metric) == way


def test_every_alias_has_a_decided_direction():
    """A new alias must be placed on purpose: the expected direction of each one is listed here."""
    want = {"reward": "up", "entropy": None, "KL": "down", "grad norm": "down", "response length": None,
            "throughput": "up", "val score": "up", "learning rate": None, "step time": "down",
            "generation time per token": "down"}
    assert {a: direction(a) for a in ALIASES} == want


def _runs_list(rows):
    return pd.DataFrame(rows, columns=["run_id", "kind", "flavor", "updated"]).assign(
        updated=lambda d: pd.to_datetime(d["updated"], utc=True))


def test_default_runs_are_the_current_and_recent_runs_of_its_kind():
    runs = _runs_list([("a", "verl", "rl", "2026-01-01"), ("b", "prime-rl", "rl", "2026-01-05"),
                       ("c", "prime-rl", "sft", "2026-01-09"), ("d", "prime-rl", "rl", "2026-01-03"),
                       ("e", "prime-rl", "rl", "2026-01-08"), ("f", "prime-rl", "rl", "2026-01-07"),
                       ("g", "prime-rl", "rl", None), ("h", "relax", "rl", "2026-01-02")])
    # same kind, same flavor first, most recently updated first, four at most besides the current run
    assert default_runs(runs, "b") == ["b", "e", "f", "d", "g"]
    assert default_runs(runs, "c") == ["c", "e", "f", "b", "d"]  # the SFT run: RL runs of its kind
    # the only run of its kind: the most recent other run joins it, so Compare is never empty
    assert default_runs(runs, "a") == ["a", "c"]
    assert default_runs(runs, "unknown") == ["c", "e"] and default_runs(runs, None) == ["c", "e"]
    assert default_runs(runs.iloc[:1], "a") == ["a"] and default_runs(runs.iloc[:0], "a") == []


# config -----------------------------------------------------------------------------------------
A = {"lr": 1e-6, "model": {"name": "q", "layers": [1, 2]}, "seed": 1, "env": {}}
B = {"lr": 2e-6, "model": {"name": "q", "layers": [1, 2]}, "extra": True, "env": {}}


def test_flatten_config_keeps_lists_and_empty_dicts():
    assert flatten_config(A) == {"lr": 1e-6, "model.name": "q", "model.layers": [1, 2], "seed": 1, "env": {}}


def test_config_diff_differences_only():
    d = config_diff({"a": A, "b": B})
    assert list(d.index) == ["extra", "lr", "seed"] and list(d.columns) == ["a", "b"]
    assert d.loc["lr"].tolist() == ["1e-06", "2e-06"]
    assert pd.isna(d.loc["extra", "a"]) and d.loc["extra", "b"] == "true"
    assert d.loc["seed", "a"] == "1" and pd.isna(d.loc["seed", "b"])
    full = config_diff({"a": A, "b": B}, differences_only=False)
    assert list(full.index) == ["env", "extra", "lr", "model.layers", "model.name", "seed"]
    assert full.loc["model.layers"].tolist() == ["[1, 2]", "[1, 2]"] and full.loc["env", "a"] == "{}"
    assert all(str(t) == "string" for t in full.dtypes)


def test_unreadable_configs_are_unknown_not_identical():
    """Two runs whose configs cannot be read are not "identical": they are left out and named."""
    assert config_diff({"ppo": None, "grpo": {}}).empty and missing_configs({"ppo": None, "grpo": {}}) == ["ppo", "grpo"]
    d = config_diff({"ppo": None, "a": A, "b": B})
    assert list(d.columns) == ["a", "b"] and list(d.index) == ["extra", "lr", "seed"]
    assert missing_configs({"ppo": None, "a": A, "b": B}) == ["ppo"]

    class Broken:
        def config(self):
            raise OSError("disk went away")

    class Empty:
        def config(self):
            return {}

    class Listy:
        def config(self):
            return [1, 2]

    class Fine:
        def config(self):
            return {"lr": 1}

    assert [read_config(r()) for r in (Broken, Empty, Listy, Fine)] == [None, None, None, {"lr": 1}]


def test_group_labels_say_missing_values_with_a_dash():
    configs = {"a": {"x": {"y": 1}}, "b": {"x": {"y": [1, 2]}}, "c": {"x": {}}, "d": None}
    assert group_labels(configs, "x.y") == {"a": "1", "b": "[1, 2]", "c": "—", "d": "—"}


def test_config_value():
    cfg = {"a": {"b": {"c": 3}}, "x.y": {"z": 1}, "l": [1]}
    assert config_value(cfg, "a.b.c") == 3 and config_value(cfg, "a.b") == {"c": 3}
    assert config_value(cfg, "x.y.z") == 1 and config_value(cfg, "l") == [1]
    assert config_value(cfg, "a.q") is None and config_value(cfg, "nope.x") is None


# group bands ------------------------------------------------------------------------------------
def _s(x, v):
    return pd.DataFrame({"x": x, "value": v})


def test_group_band_by_hand():
    series = {"r1": _s([0, 10, 20], [0, 1, 2]), "r2": _s([0, 10, 20], [2, 3, 4]),
              "r3": _s([0, 5, 10], [0, 5, 10]), "r4": _s([0, 10], [10, 20]),  # different step grids
              "r5": _s([0, 10], [1, 1]), "r6": _s([0, 20], [3, 5]), "lonely": _s([0], [7])}
    groups = {"r1": "g1", "r2": "g1", "r3": "g2", "r4": "g2", "r5": "g3", "r6": "g3", "missing": "g1"}
    out = group_band(series, groups)
    assert list(out.columns) == ["group", "x", "mean", "std", "n"]
    g1 = out[out["group"] == "g1"]
    assert g1["x"].tolist() == [0, 10, 20] and g1["mean"].tolist() == [1, 2, 3] and g1["n"].tolist() == [2, 2, 2]
    np.testing.assert_allclose(g1["std"], [math.sqrt(2)] * 3)
    g2 = out[out["group"] == "g2"]  # r4 interpolated at x=5: 15
    assert g2["x"].tolist() == [0, 5, 10]
    np.testing.assert_allclose(g2["mean"], [5, 10, 15])
    np.testing.assert_allclose(g2["std"], [math.sqrt(50)] * 3)
    g3 = out[out["group"] == "g3"]  # r5 stops at 10: no extrapolation; r6 at 10 is 4
    assert g3["x"].tolist() == [0, 10, 20] and g3["n"].tolist() == [2, 2, 1]
    np.testing.assert_allclose(g3["mean"], [2, 2.5, 5])
    assert math.isnan(g3["std"].iloc[2])
    assert set(out["group"]) == {"g1", "g2", "g3"}  # runs without a group are left out


def test_group_band_empty():
    out = group_band({}, {})
    assert list(out.columns) == ["group", "x", "mean", "std", "n"] and out.empty


def test_sources_name_only_known_aliases_and_swe_lego_rl_reads_verls():
    from rundash_core import sources

    for kind in sources.kinds():
        unknown = set(sources.source_for(kind).aliases) - set(ALIASES)
        assert not unknown, (kind, unknown)
    assert sources.source_for("swe-lego-rl").aliases is sources.source_for("verl").aliases
    assert resolve("swe-lego-rl", ["critic/score/mean"], "reward") == ("critic/score/mean", 1.0)
    assert resolve("no-such-kind", ["critic/score/mean"], "reward") is None
