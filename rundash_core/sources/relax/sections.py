"""Relax's chart sections, over the metrics its reader derives per step from the rollout files
(`rollout_file`: rollout/* per train step, eval/* per eval step)."""
from __future__ import annotations

from rundash_core.charts.sections import MEAN_MAX_MIN, KeyRegex, panel, stat_keys
from rundash_core.sources.relax.rollout_file import STATUSES as ROW_STATUSES

STATUSES = (*ROW_STATUSES, "unknown")  # the status shares the reader derives: each row's, else unknown
SECTIONS = [
    ("Reward", [panel("reward", *stat_keys("rollout/reward", *MEAN_MAX_MIN)), panel("reward std", "rollout/reward/std"),
                panel("zero-variance groups", "rollout/groups/zero_variance"),
                panel("samples", "rollout/samples", "rollout/reward/count")]),
    ("Lengths", [panel("response length", "rollout/response_length/mean", "rollout/response_length/max"),
                 panel("total length", "rollout/total_length/mean", "rollout/total_length/max")]),
    ("Status", [panel("status fractions", *stat_keys("rollout/status", *STATUSES)),
                panel("other statuses", KeyRegex("rollout/status/.+"), rest=True)]),
    ("Eval", [panel("eval reward", *stat_keys("eval/reward", *MEAN_MAX_MIN)),
              panel("eval reward by dataset", KeyRegex("eval/.+/reward/mean")),
              panel("eval response length", "eval/response_length/mean", "eval/response_length/max",
                    KeyRegex("eval/.+/response_length/mean")),
              panel("eval status fractions", *stat_keys("eval/status", *STATUSES)),
              panel("eval samples", "eval/samples", KeyRegex("eval/.+/samples"))])]
