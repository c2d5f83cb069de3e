"""Chart sections per run kind/flavor and the all-metrics key tree (rundash_core.charts.sections),
checked on the demo runs and the real logs in tests/data."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core.charts import sections as sec
from rundash_core.charts.keytree import key_tree
from rundash_core.charts.sections import covered_keys, sections_for
from rundash_core.sources.prime_rl.sections import COMMON_METRICS

from helpers import DATA

REAL = ["prime-rl", "prime-rl-old", "verl", "lego", "relax"]


def _load(path):
    run = rd.open_run(path)
    ov = run.overview()
    return run, ov, sorted(set(run.metrics()["metric"].astype(str)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple]:
    """name → (run, overview, keys) for the 7 demo runs and every run under tests/data."""
    from rundash_core import demo

    folder = demo.ensure_demo(tmp_path_factory.mktemp("demo") / "demo")
    paths = list(rd.discover([str(folder)])["path"])
    assert len(paths) == 7
    for d in REAL:
        paths += list(rd.discover([str(DATA / d)])["path"])
    return {Path(p).name: _load(p) for p in paths}


def _one(runs, kind, flavor="rl", contains=""):
    found = [v for n, v in runs.items() if v[0].kind == kind and v[1].flavor == flavor and contains in n]
    assert found, (kind, flavor, contains)
    return found[0]


def _sections(entry):
    run, ov, keys = entry
    return sections_for(run.kind, ov.flavor, keys, train_envs=ov.train_envs, eval_envs=ov.eval_envs)


def test_prime_rl_rl_sections_follow_the_overview_order(runs):
    entry = _one(runs, "prime-rl", contains="math-python+wiki-search--qwen3-4b--7c1e9a42")
    secs = _sections(entry)
    assert [s.title for s in secs] == ["train/agg", "train/math-python", "train/wiki-search", "eval/gsm8k",
                                       "stability", "inference", "performance"]
    assert [s.key for s in secs][:4] == ["train-agg", "train-math-python", "train-wiki-search", "eval-gsm8k"]
    train = secs[0].panels
    assert train[0].keys == ("train/agg/effective/agent/reward/mean",)  # effective before all
    assert train[1].keys == ("train/agg/all/agent/reward/mean",)
    assert [p.keys[0] for p in train[2:5]] == [f"train/agg/{m}" for m in COMMON_METRICS]
    inference = secs[5]
    assert {p.x for p in inference.panels} == {"time"}
    assert [p.title for p in inference.panels] == ["KV cache", "preemptions", "running", "waiting", "prefix cache",
                                                   "generation throughput", "prompt throughput", "dispatcher"]
    assert inference.panels[0].keys == tuple(f"inference/agg/kv_cache_usage_perc/{s}" for s in ("mean", "min", "max"))
    assert all(p.x == "step" for s in secs if s.title != "inference" for p in s.panels)
    assert [p.keys for p in secs[4].panels] == [("optim/grad_norm",), ("entropy/all/mean",), ("mismatch_kl/all/mean",),
                                                ("kl_ent_ratio/mean",)]
    assert [p.keys for p in secs[6].panels] == [("perf/mfu",), ("time/step",), ("time/wait_for_batch",),
                                                ("time/wait_for_policy",)]


def test_prime_rl_sft_has_no_inference_section(runs):
    secs = _sections(_one(runs, "prime-rl", flavor="sft"))
    assert [s.title for s in secs] == ["train", "stability", "performance"]
    assert [p.keys[0] for p in secs[0].panels] == ["loss/mean", "loss/perplexity", "val/loss", "val/perplexity",
                                                   "progress/epoch"]
    assert "optim/lr" in covered_keys(secs) and "perf/throughput" in covered_keys(secs)


def test_single_env_and_unknown_env_lists():
    keys = ["train/agg/effective/agent/reward/mean", "train/rt/effective/agent/reward/mean",
            "eval/a/all/agent/avg@2", "eval/b/all/agent/avg@4", "eval/b/all/cancelled/mean"]
    one = sections_for("prime-rl", "rl", keys, train_envs=["rt"], eval_envs=["a", "b"])
    assert [s.title for s in one] == ["train/rt", "eval/a", "eval/b"]
    assert one[0].panels[0].keys == ("train/rt/effective/agent/reward/mean",)
    unknown = sections_for("prime-rl", "rl", keys)
    assert [s.title for s in unknown] == ["train", "eval"]  # scope train/agg; eval pattern .*
    assert unknown[0].panels[0].keys == ("train/agg/effective/agent/reward/mean",)
    assert unknown[1].panels[0].keys == ("eval/a/all/agent/avg@2", "eval/b/all/agent/avg@4")
    assert sections_for("prime-rl", "eval", keys, eval_envs=["b"])[0].title == "eval/b"


def test_multi_agent_rewards_split_per_agent_and_timeout_variants():
    s = "train/agg"
    keys = [f"{s}/{sub}/{a}/reward/mean" for sub in ("effective", "all") for a in ("solver", "judge")]
    keys += [f"{s}/effective/solver/is_timeout/mean", f"{s}/all/judge/is_timeout/mean", f"{s}/all/solver/has_error/mean",
             "eval/e/effective/judge/reward/mean", "eval/e/all/judge/reward/mean"]
    secs = sections_for("prime-rl", "rl", keys, train_envs=["x", "y"], eval_envs=["e"])
    titles = [p.title for p in secs[0].panels]
    assert titles == ["reward · effective · judge", "reward · effective · solver", "reward · all · judge",
                      "reward · all · solver", "all/*/has_error/mean", "effective/*/is_timeout/mean",
                      "all/*/is_timeout/mean"]
    assert secs[1].panels[0].keys == ("eval/e/effective/judge/reward/mean", "eval/e/all/judge/reward/mean")


def test_verl_rl_sections(runs):
    secs = _sections(_one(runs, "verl", contains="gsm8k-math-grpo"))
    assert [s.title for s in secs] == ["Reward & score", "Policy", "Lengths", "Timing & throughput", "Validation"]
    assert secs[0].panels[0].keys[0] == "critic/score/mean"
    policy = {p.title: p.keys for p in secs[1].panels}
    assert policy["entropy"] == ("actor/entropy",) and policy["KL"] == ("actor/ppo_kl", "actor/kl_loss")
    val = {p.title: p.keys for p in secs[4].panels}
    assert val["val score · openai/gsm8k"] == ("val-core/openai/gsm8k/acc/mean@1",)
    assert val["val-aux mean · HuggingFaceH4/MATH-500"] == ("val-aux/HuggingFaceH4/MATH-500/reward/mean@1",)
    # the data sources come in the overview's order
    assert [t for t in val if t.startswith("val score")] == [f"val score · {d}" for d in _one(runs, "verl")[1].eval_envs]


def test_verl_historical_and_sft_logs():
    run, ov, keys = _load(DATA / "verl" / "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log")
    panels = {p.title: p.keys for s in sections_for(run.kind, ov.flavor, keys) for p in s.panels}
    assert panels["entropy"] == ("actor/entropy_loss",) and panels["learning rate"] == ("actor/lr(1e-4)",)
    assert panels["val score · openai/gsm8k"] == ("val/test_score/openai/gsm8k",)
    assert "timing/gen" in panels["generation time"] and "timing/update_critic" in panels["stage time"]
    assert panels["validation time"] == ("timing/testing",)
    run, ov, keys = _load(DATA / "verl" / "eh_gemma-2-2b-it-sft-0.411.log")
    assert ov.flavor == "sft"
    secs = sections_for(run.kind, ov.flavor, keys)
    assert [(s.title, [p.keys for p in s.panels]) for s in secs] == [
        ("Training", [("train/loss",), ("train/lr(1e-3)",)]), ("Validation", [("val/loss",)])]


def test_swe_lego_rl_gets_rollout_correction_and_async(runs):
    secs = {s.title: s for s in _sections(_one(runs, "swe-lego-rl"))}
    assert list(secs)[:3] == ["Reward & score", "Policy", "Lengths"]
    rc = covered_keys([secs["Rollout correction / IS"]])
    assert {"rollout_corr/kl", "rollout_corr/chi2_seq"} <= rc
    fa = covered_keys([secs["Async"]])
    assert "fully_async/count/current_param_version" in fa and "trainer/idle_ratio" in fa
    assert covered_keys([secs["Validation"]]) >= {"val-core/unknown/reward/mean@1", "val-aux/num_turns/mean"}


def test_relax_reward_lengths_status(runs):
    secs = _sections(_one(runs, "relax"))
    assert [s.title for s in secs] == ["Reward", "Lengths", "Status", "Eval"]
    assert secs[0].panels[0].keys == ("rollout/reward/mean", "rollout/reward/max", "rollout/reward/min")
    assert secs[1].panels[0].keys[0] == "rollout/response_length/mean"
    assert all(k.startswith("rollout/status/") for k in secs[2].panels[0].keys)
    by_ds = {p.title: p.keys for p in secs[3].panels}["eval reward by dataset"]
    assert by_ds == ("eval/aime24/reward/mean", "eval/gpqa_diamond/reward/mean")


def test_every_panel_key_is_logged_and_nothing_is_empty(runs):
    for name, entry in runs.items():
        secs = _sections(entry)
        assert secs, name
        assert covered_keys(secs) <= set(entry[2]), name
        assert len({s.key for s in secs}) == len(secs), name
        for s in secs:
            assert s.panels and all(p.keys and len(set(p.keys)) == len(p.keys) for p in s.panels), (name, s.title)


def test_prefix_narrowing_matches_a_full_scan(runs, monkeypatch):
    """The bisect on each regex's literal prefix must find exactly what a full scan finds."""
    fast = {n: _sections(e) for n, e in runs.items()}
    sec._sections.cache_clear()
    monkeypatch.setattr(sec, "_compiled", lambda rx: (re.compile(rx), ""))
    slow = {n: _sections(e) for n, e in runs.items()}
    sec._sections.cache_clear()
    assert fast == slow


def test_literal_prefix():
    assert sec._literal_prefix(re.escape("train/math-python") + "/x") == "train/math-python/x"
    assert sec._literal_prefix("eval/.*/all") == "eval/"
    assert sec._literal_prefix(r"a\-?b") == "a" and sec._literal_prefix("ab?c") == "a"


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="run kind"):
        sections_for("mlflow", "rl", ["a"])


def test_key_tree_reaches_every_key(runs):
    for name, (_run, _ov, keys) in runs.items():
        tree = key_tree(keys)
        assert sorted(tree.all_keys()) == keys and tree.n_keys == len(keys), name
    keys = _one(runs, "prime-rl", contains="7c1e9a42")[2]
    tree = key_tree(keys)
    train = next(c for c in tree.children if c.name == "train")
    agg = next(c for c in train.children if c.name == "agg")
    eff = next(c for c in agg.children if c.name == "effective")
    assert eff.path == "train/agg/effective" and "train/agg/effective/num_turns/mean" in eff.all_keys()
    turns = next(c for c in eff.children if c.name == "num_turns")
    assert turns.keys == ["train/agg/effective/num_turns/mean"]
    shallow = key_tree(keys, max_depth=2)
    node = next(c for c in next(c for c in shallow.children if c.name == "train").children if c.name == "agg")
    assert not node.children and "train/agg/effective/num_turns/mean" in node.keys


def test_key_tree_regex_filter(runs):
    keys = _one(runs, "prime-rl", contains="7c1e9a42")[2]
    got = key_tree(keys, pattern=r"reward/mean$").all_keys()
    assert got and sorted(got) == sorted(k for k in keys if re.search(r"reward/mean$", k))
    assert key_tree(keys, pattern="KV_CACHE").all_keys()  # case-insensitive
    assert key_tree(keys, pattern="no-such-key").n_keys == 0
    with pytest.raises(ValueError, match="invalid regex"):
        key_tree(keys, pattern="(reward")


def test_catch_all_panels_take_only_keys_nothing_else_shows():
    keys = ["rollout_corr/kl", "rollout_corr/k3_kl", "rollout_corr/brand_new", "fully_async/monitor/x",
            "fully_async/count/current_param_version", "critic/score/mean"]
    panels = {p.title: p.keys for s in sections_for("verl", "rl", keys) for p in s.panels}
    assert panels["rollout vs training KL"] == ("rollout_corr/kl", "rollout_corr/k3_kl")
    assert panels["other rollout_corr"] == ("rollout_corr/brand_new",)
    assert panels["other fully_async"] == ("fully_async/monitor/x",)
    assert covered_keys(sections_for("verl", "rl", keys)) == set(keys)


def test_every_kind_charts_through_its_registered_table():
    """A kind's sections are the table its `Source` carries; SWE-Lego-RL's are verl's (the same
    table, not a copy), so the same keys give the same sections."""
    from rundash_core import sources

    assert sources.source_for("swe-lego-rl").sections is sources.source_for("verl").sections
    keys = ["critic/score/mean", "actor/entropy", "timing_s/step"]
    assert sections_for("swe-lego-rl", "rl", keys) == sections_for("verl", "rl", keys)
    for kind in sources.kinds():
        assert sources.source_for(kind).sections is not None, kind
