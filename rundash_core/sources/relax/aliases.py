"""Which Relax metrics (derived per step from its rollout files) stand for each canonical alias
(Compare, `charts.aliases`) and each health concept (`health.checks`)."""
from __future__ import annotations

from rundash_core.charts.aliases import key_regexes, literal_keys

ALIASES = {
    "reward": literal_keys("rollout/reward/mean"),
    "response length": literal_keys("rollout/response_length/mean"),
    "val score": key_regexes(r"eval/(?P<ds>.+)/reward/mean"),
}

CONCEPTS = {
    "truncation": literal_keys("rollout/status/truncated"),
    "error fraction": literal_keys("rollout/status/failed"),
    "no-signal fraction": literal_keys("rollout/groups/zero_variance"),
}
