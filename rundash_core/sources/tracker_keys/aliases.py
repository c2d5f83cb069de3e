"""Which tracker keys stand for each canonical alias (Compare) and health concept: verl's
candidates first (a verl run logged to W&B or TensorBoard, its keys as TensorBoard writers spell
them next), then TRL's; the first logged one wins."""
from __future__ import annotations

from rundash_core.charts.aliases import key_regexes, literal_keys
from rundash_core.sources.verl import aliases as verl_aliases

# tensorboardX and PyTorch's SummaryWriter rewrite "@" in a tag as "_": verl's val-core/<ds>/acc/mean@1
# is logged as .../mean_1 (tensorboard spec 3.2)
TAG_SPELLINGS = {
    "val score": key_regexes(r"val-core/(?P<ds>.+)/acc/mean_\d+", r"val-core/(?P<ds>.+)/reward/mean_\d+"),
}
TRL_ALIASES = {
    "reward": literal_keys("train/reward", "train/rewards/mean"),
    "entropy": literal_keys("train/entropy"),
    "KL": literal_keys("train/kl", "train/objective/kl"),
    "grad norm": literal_keys("train/grad_norm"),
    "response length": literal_keys("train/completions/mean_length"),
    "val score": key_regexes(r"eval/rewards/(?P<ds>[^/]+)/mean", r"eval/(?P<ds>reward)"),
    "learning rate": literal_keys("train/learning_rate"),
    "step time": literal_keys("train/step_time"),
}
TRL_CONCEPTS = {
    "loss": literal_keys("train/loss"),
    "truncation": literal_keys("train/completions/clipped_ratio"),
    "no-signal fraction": literal_keys("train/frac_reward_zero_std"),
}


def _merged(first: dict, then: dict) -> dict:
    return {name: (*first.get(name, ()), *then.get(name, ())) for name in dict.fromkeys([*first, *then])}


ALIASES = _merged(_merged(verl_aliases.ALIASES, TAG_SPELLINGS), TRL_ALIASES)
CONCEPTS = _merged(verl_aliases.CONCEPTS, TRL_CONCEPTS)
