"""Which trainer step a Harbor `step_NNNN` folder belongs to (`docs/formats/swe-lego-rl.md` 2.1–2.3).

The folder number is the `global_steps` the agent loop got with the batch:

- synchronous training: it is the trainer step (training and validation folders alike);
- fully-async training: it is the rollouter's sample counter, many folders per trainer step.
  Validation folders are mapped by the log (`val_map:` lines, else the `test_gen_batch` /
  `rollouter/validate_time` pairing). Training folders are not: nothing written says which trainer
  step consumed a folder. Trial times against the trainer's step times would be a guess (the console
  log prints no time per step, and a finished sample can wait in the queue past the next update,
  `staleness_threshold`), so they keep their folder number only.

How a run tells: fully-async when the logged config holds verl's fully-async recipe section
`async_training`, or the log prints `rollouter/validate_time` (only the fully-async rollouter
does); synchronous when a config was logged without either. With no config and no such line the
flavor is unknown and only the log's own mappings count. (`actor_rollout_ref.rollout.mode:
'async'` is vLLM's server mode, used by synchronous training too: it says nothing here.)
"""
from __future__ import annotations

SYNC, ASYNC = "sync", "fully-async"


def training_flavor(config: dict, rollouter_seen: bool) -> str | None:
    """SYNC, ASYNC, or None when neither the config nor the log says."""
    if rollouter_seen or (isinstance(config, dict) and "async_training" in config):
        return ASYNC
    return SYNC if isinstance(config, dict) and config else None


def trainer_step(folder: int, *, validation: bool, flavor: str | None, logged: int | None) -> int | None:
    """The trainer step of one folder: the log's mapping (`logged`: explicit, else paired) for a
    validation folder; in synchronous training the folder number itself; else None (shown by
    folder, never by a guessed step)."""
    if validation and logged is not None:
        return logged
    return folder if flavor == SYNC else None
