"""Which verl keys stand for each canonical alias (Compare, `charts.aliases`) and each health
concept (`health.checks`), in order: the first logged one wins. The keys of every verl version
(spec 8.1-8.2; the scaled `lr(1e-4)` keys carry their factor), its SFT trainer's `train/*`, and
the fully-async trainer's; SWE-Lego-RL logs the same keys and its `Source` reuses these."""
from __future__ import annotations

from rundash_core.charts.aliases import KeyCandidate, key_regexes, literal_keys

ALIASES = {
    "reward": literal_keys("critic/score/mean", "critic/rewards/mean"),
    "entropy": literal_keys("actor/entropy", "actor/entropy_loss"),
    "KL": literal_keys("actor/ppo_kl", "actor/kl_loss"),
    "grad norm": literal_keys("actor/grad_norm", "train/grad_norm"),
    "response length": literal_keys("response_length/mean"),
    "throughput": literal_keys("perf/throughput", "actor/perf/throughput", "Tokens/Sec/GPU"),
    "val score": key_regexes(r"val-core/(?P<ds>.+)/acc/mean@\d+", r"val-core/(?P<ds>.+)/reward/mean@\d+",
                             r"val/test_score/(?P<ds>.+)", r"test_score/(?P<ds>.+)"),
    "learning rate": (KeyCandidate("actor/lr"), KeyCandidate("actor/lr(1e-4)", 1e-4), KeyCandidate("train/lr"),
                      KeyCandidate("train/lr(1e-3)", 1e-3)),
    "step time": literal_keys("timing_s/step", "timing/step", "perf/time_per_step", "time_per_step"),
    "generation time per token": (KeyCandidate("timing_per_token_ms/gen"), KeyCandidate("timing_per_token/gen", 1000.0)),
}

CONCEPTS = {
    "loss": literal_keys("actor/pg_loss", "actor/loss", "train/loss"),
    "mismatch KL": literal_keys("rollout_corr/kl", "rollout_corr/k3_kl"),
    "truncation": literal_keys("response_length/clip_ratio"),
    "error fraction": literal_keys("response/aborted_ratio", "trajectory_filter/invalid_ratio"),
    "trainer idle ratio": literal_keys("trainer/idle_ratio"),
    "rollouter idle ratio": literal_keys("rollouter/idle_ratio"),
    "dropped stale total": literal_keys("fully_async/count/dropped_stale_samples"),
    "MFU": literal_keys("perf/mfu/actor", "actor/perf/mfu", "train/mfu", "mfu/actor"),
}
