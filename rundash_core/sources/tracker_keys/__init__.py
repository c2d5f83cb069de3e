"""What the keys that trackers (W&B, TensorBoard) record mean: not a kind of run but the vocabulary
the tracker sources share, since a run logged to W&B or TensorBoard may come from verl (verl's
`wandb` / `tensorboard` loggers log the keys its console log shows) or from TRL (`train/reward`,
`train/kl`, `train/completions/*`, ...). Charts drop the panels whose keys a run did not log, so
one table serves both (`sections`); Compare and health take verl's candidates, then TRL's
(`aliases`)."""
from __future__ import annotations

from collections.abc import Mapping

MODEL_KEYS = ("actor_rollout_ref.model.path", "model_name_or_path", "model.path", "model_name", "model")


def config_model(config: Mapping) -> str | None:
    """The model a run trains, from its config: verl's `actor_rollout_ref.model.path`, HF / TRL's
    `model_name_or_path`, ... (nested dicts or dotted flat keys, as trackers store either)."""
    for key in MODEL_KEYS:
        value = _lookup(config, key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _lookup(config: Mapping, dotted: str):
    if dotted in config:
        return config[dotted]
    node = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node
