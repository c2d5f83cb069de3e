"""What tracker runs' keys mean (`rundash_core.sources.tracker_keys`), for both tracker kinds: a
verl run's W&B or TensorBoard keys get verl's sections and aliases, a TRL run's get TRL's, the
model comes from either config shape, and each alias resolves to the same quantity as it does for
a verl console log."""
from __future__ import annotations

import pytest

from rundash_core.charts.aliases import resolve
from rundash_core.charts.sections import covered_keys, sections_for
from rundash_core.sources import tracker_keys

TRACKERS = ("wandb", "tensorboard")
VERL_KEYS = ("critic/score/mean", "actor/entropy", "actor/ppo_kl", "actor/grad_norm", "response_length/mean",
             "actor/lr", "timing_s/step", "val-core/openai/gsm8k/acc/mean@1", "actor/pg_loss")
TRL_KEYS = ("train/reward", "train/reward_std", "train/kl", "train/entropy", "train/loss", "train/grad_norm",
            "train/learning_rate", "train/completions/mean_length", "train/completions/max_length",
            "train/completions/clipped_ratio", "train/rewards/accuracy_reward/mean", "train/frac_reward_zero_std",
            "train/clip_ratio/region_mean", "train/epoch", "train/global_step")


def test_the_model_comes_from_a_verl_or_an_hf_config():
    verl = {"actor_rollout_ref": {"model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"}}, "trainer": {"project_name": "p"}}
    assert tracker_keys.config_model(verl) == "Qwen/Qwen2.5-0.5B-Instruct"
    assert tracker_keys.config_model({"actor_rollout_ref.model.path": "flat/dotted"}) == "flat/dotted"
    assert tracker_keys.config_model({"model_name_or_path": "Qwen/Qwen3-0.6B", "learning_rate": 1e-6}) == "Qwen/Qwen3-0.6B"
    assert tracker_keys.config_model({"model_name_or_path": "  ", "lr": 1}) is None
    assert tracker_keys.config_model({"actor_rollout_ref": "not a mapping"}) is None


@pytest.mark.parametrize("kind", TRACKERS)
def test_a_trl_run_gets_trl_sections_and_a_verl_run_verls(kind):
    trl = sections_for(kind, "rl", TRL_KEYS)
    titles = [s.title for s in trl]
    assert titles[:3] == ["Reward", "Policy", "Completions"]
    assert covered_keys(trl) >= set(TRL_KEYS) - {"train/global_step"}  # (the step metric is the x axis)
    verl = sections_for(kind, "rl", VERL_KEYS)
    assert [s.title for s in verl][:2] == ["Reward & score", "Policy"] and "Completions" not in [s.title for s in verl]
    assert covered_keys(verl) == set(VERL_KEYS)


@pytest.mark.parametrize("kind", TRACKERS)
def test_aliases_pick_verl_keys_then_trl_keys(kind):
    verl_reads = {"reward": "critic/score/mean", "entropy": "actor/entropy", "KL": "actor/ppo_kl",
                  "grad norm": "actor/grad_norm", "response length": "response_length/mean", "learning rate": "actor/lr",
                  "step time": "timing_s/step", "val score": "val-core/openai/gsm8k/acc/mean@1"}
    for alias, key in verl_reads.items():
        assert resolve(kind, VERL_KEYS, alias) == (key, 1.0), alias
        assert resolve("verl", VERL_KEYS, alias) == (key, 1.0), alias  # what a console log's run reads
    trl_reads = {"reward": "train/reward", "entropy": "train/entropy", "KL": "train/kl", "grad norm": "train/grad_norm",
                 "response length": "train/completions/mean_length", "learning rate": "train/learning_rate"}
    for alias, key in trl_reads.items():
        assert resolve(kind, TRL_KEYS, alias) == (key, 1.0), alias
    assert resolve(kind, ("train/reward", "critic/score/mean"), "reward") == ("critic/score/mean", 1.0)  # verl's first


@pytest.mark.parametrize("kind", TRACKERS)
def test_verls_validation_keys_as_tensorboard_writers_spell_them(kind):
    """tensorboardX writes verl's `mean@1` as `mean_1` (tensorboard spec 3.2): the same per-source
    validation panel and the same "val score" as the console log's spelling."""
    at, under = ("val-core/openai/gsm8k/acc/mean@1",), ("val-core/openai/gsm8k/acc/mean_1",)
    panels = lambda keys: [(p.title, p.keys) for s in sections_for(kind, "rl", keys) for p in s.panels]
    assert panels(under) == [("val score · openai/gsm8k", under)] and panels(at) == [("val score · openai/gsm8k", at)]
    assert resolve(kind, under, "val score") == (under[0], 1.0)
