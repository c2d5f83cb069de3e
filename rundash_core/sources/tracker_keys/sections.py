"""Chart sections for a tracker's run: verl's (a verl run's W&B or TensorBoard keys are its console
log's) and TRL's GRPO/PPO trainer keys. `charts.sections` drops panels whose keys a run did not
log, so a verl-style and a TRL-style run each see only their own."""
from __future__ import annotations

from rundash_core.charts.sections import MEAN_MAX_MIN, KeyRegex, SectionSpecs, panel, stat_keys
from rundash_core.sources.verl import sections as verl_sections

_C = "train/completions"
TRL = [
    ("Reward", [panel("reward", "train/reward", "train/rewards/mean"), panel("reward std", "train/reward_std"),
                panel("reward per function", KeyRegex(r"train/rewards/[^/]+/mean")),
                panel("reward std per function", KeyRegex(r"train/rewards/[^/]+/std")),
                panel("zero-std groups", "train/frac_reward_zero_std")]),
    ("Policy", [panel("KL", "train/kl", "train/objective/kl"), panel("entropy", "train/entropy"),
                panel("loss", "train/loss"), panel("grad norm", "train/grad_norm"),
                panel("learning rate", "train/learning_rate"),
                panel("clip ratio", KeyRegex(r"train/clip_ratio(?:/.+)?")),
                panel("epoch", "train/epoch")]),
    ("Completions", [panel("completion length", *stat_keys(_C, "mean_length", "max_length", "min_length")),
                     panel("terminated length", *stat_keys(_C, "mean_terminated_length", "max_terminated_length",
                                                           "min_terminated_length")),
                     panel("clipped ratio", f"{_C}/clipped_ratio"),
                     panel("other completions", KeyRegex(f"{_C}/.+"), rest=True),
                     panel("tokens", "train/num_tokens")]),
    ("Eval", [panel("eval reward", "eval/reward", KeyRegex(r"eval/rewards/[^/]+/mean")),
              panel("eval completion length", *stat_keys("eval/completions", *(f"{s}_length" for s in MEAN_MAX_MIN))),
              panel("eval loss", "eval/loss"), panel("other eval", KeyRegex(r"eval/.+"), rest=True)]),
    ("Speed", [panel("step time", "train/step_time"), panel("runtime", "train_runtime", "train/train_runtime"),
               panel("samples per second", "train/train_samples_per_second", "train_samples_per_second")]),
]


def sections(flavor: str, keys: tuple[str, ...], train_envs: tuple[str, ...],
             eval_envs: tuple[str, ...]) -> SectionSpecs:
    """verl's sections (its RL table, whatever the flavor: a tracker does not say SFT), then TRL's."""
    return [*verl_sections.sections("rl", keys, train_envs, eval_envs), *TRL]
