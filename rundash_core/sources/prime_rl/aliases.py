"""Which prime-rl keys stand for each canonical alias (Compare, `charts.aliases`) and each health
concept (`health.checks`), in order: the first logged one wins (spec 8.3 for the key names)."""
from __future__ import annotations

from rundash_core.charts.aliases import key_regexes, literal_keys

ALIASES = {
    "reward": literal_keys("train/agg/effective/agent/reward/mean")
    + key_regexes(r"train/agg/effective/[^/]+/reward/mean", r"train/[^/]+/effective/[^/]+/reward/mean"),
    "entropy": literal_keys("entropy/all/mean"),
    "KL": literal_keys("mismatch_kl/all/mean"),
    "grad norm": literal_keys("optim/grad_norm"),
    "response length": literal_keys("train/agg/effective/num_output_tokens/mean", "train/agg/all/num_output_tokens/mean")
    + key_regexes(r"train/agg/effective/[^/]+/num_output_tokens/mean", r"train/agg/all/[^/]+/num_output_tokens/mean",
                  # single-env runs without train/agg (with several envs and no agg: the first env)
                  r"train/[^/]+/effective/num_output_tokens/mean", r"train/[^/]+/all/num_output_tokens/mean"),
    "throughput": literal_keys("perf/throughput_per_gpu"),
    "val score": key_regexes(r"eval/(?P<ds>.+)/all/[^/]+/avg@\d+", r"eval/(?P<ds>.+)/effective/[^/]+/reward/mean",
                             r"eval/(?P<ds>.+)/all/[^/]+/reward/mean"),
    "learning rate": literal_keys("optim/lr"),
    "step time": literal_keys("time/step", producer="trainer"),
}

CONCEPTS = {
    "loss": literal_keys("loss/mean"),
    "mismatch KL": literal_keys("mismatch_kl/all/mean"),
    "nan count": literal_keys("loss/nan_count"),
    "truncation": key_regexes(r"train/agg/effective/[^/]+/is_truncated/mean",
                              r"train/[^/]+/effective/[^/]+/is_truncated/mean"),
    "error fraction": key_regexes(r"train/agg/all/[^/]+/has_error/mean", r"train/agg/all/has_error/mean",
                                  r"train/[^/]+/all/[^/]+/has_error/mean", r"train/[^/]+/all/has_error/mean"),
    "trainable fraction": key_regexes(r"train/agg/all/[^/]+/is_trainable/mean",
                                      r"train/[^/]+/all/[^/]+/is_trainable/mean"),
    "wait for batch": literal_keys("time/wait_for_batch", producer="trainer") + literal_keys("time/wait_for_batch"),
    "trainer step time": literal_keys("time/step", producer="trainer"),
    "wait for policy": literal_keys("time/wait_for_policy", producer="orch") + literal_keys("time/wait_for_policy"),
    "orchestrator step time": literal_keys("time/step", producer="orch"),
    "staleness": literal_keys("off_policy/mean", "dispatcher/off_policy/mean"),
    "dropped stale": literal_keys("off_policy/dropped"),
    "MFU": literal_keys("perf/mfu"),
}
