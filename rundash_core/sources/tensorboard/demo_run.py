"""The TensorBoard demo run (`docs/formats/tensorboard.md`): what verl's `tensorboard` logger
leaves, `tensorboard_log/<project>/<experiment>/events.out.tfevents.*`, written with tensorboardX's
own record writer and summary builders.

A GRPO run of Qwen2.5-0.5B on GSM8K, launched twice: the first launch crashes at `CRASH_AT`, the
second resumes from the checkpoint at `RESUME_AT` and logs those steps again (the newest attempt
wins). verl's keys (`critic/score/mean`, `actor/entropy`, `response_length/mean`,
`val-core/openai/gsm8k/acc/mean@1`, `timing_s/step`, ...), validation at step 0 and every
`VAL_EVERY` steps; a config text summary and an hparams sub-writer (as `add_hparams` writes it)
naming the model. Records are built directly (not through `SummaryWriter`, whose file names and
first record carry the wall clock), so the run is a deterministic function of its end time.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

STEPS = 30
RESUME_AT = 20  # the checkpoint the second launch starts from
CRASH_AT = 24  # the last step the first launch logged
VAL_EVERY = 10
STEP_S = 31.0  # seconds per step (about: each step is drawn around it)
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
HOST = "demo-node"
SEED = 20261202


def _config(project: str, name: str) -> dict:
    return {"actor_rollout_ref.model.path": MODEL, "algorithm.adv_estimator": "grpo", "data.train_batch_size": 256,
            "actor_rollout_ref.rollout.n": 8, "actor_rollout_ref.actor.optim.lr": 1e-6,
            "trainer.total_training_steps": STEPS, "trainer.project_name": project, "trainer.experiment_name": name}


def _train_metrics(step: int, attempt: int) -> dict[str, float]:
    rng = np.random.default_rng([SEED, step, attempt])
    p = 1.0 - np.exp(-step / 12.0)
    score = 0.25 + 0.5 * p + rng.normal(0, 0.02)
    length = 180 + 70 * p + rng.normal(0, 6)
    return {
        "critic/score/mean": score, "critic/score/max": 1.0, "critic/score/min": 0.0,
        "critic/rewards/mean": score, "critic/advantages/mean": rng.normal(0, 0.01),
        "actor/entropy": 0.86 - 0.5 * p + rng.normal(0, 0.01), "actor/pg_loss": rng.normal(0.01, 0.01),
        "actor/ppo_kl": abs(rng.normal(0.0012, 0.0003)), "actor/pg_clipfrac": abs(rng.normal(0.003, 0.001)),
        "actor/grad_norm": abs(rng.normal(0.25, 0.05)), "actor/lr": 1e-6,
        "response_length/mean": length, "response_length/max": 1024.0,
        "response_length/clip_ratio": abs(rng.normal(0.011, 0.002)), "prompt_length/mean": 104.0,
        "perf/throughput": 1480 + rng.normal(0, 20), "timing_s/gen": 12.4 + rng.normal(0, 0.3),
        "timing_s/update_actor": 9.6 + rng.normal(0, 0.3), "timing_s/step": STEP_S + rng.normal(0, 0.5),
        "training/global_step": float(step), "training/epoch": 0.0,
    }


def _val_metrics(step: int) -> dict[str, float]:
    rng = np.random.default_rng([SEED, step, 99])
    acc = 0.3 + 0.45 * (1.0 - np.exp(-step / 12.0)) + rng.normal(0, 0.01)
    return {"val-core/openai/gsm8k/acc/mean@1": acc, "val-core/openai/gsm8k/reward/mean@1": acc}


class _File:
    """One event file written record by record with tensorboardX's `RecordWriter`."""

    def __init__(self, folder: Path, start: float):
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.record_writer import RecordWriter

        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"events.out.tfevents.{int(start)}.{HOST}"
        self._event, self._writer, self.last = Event, RecordWriter(str(self.path)), start
        self.write(Event(wall_time=start, file_version="brain.Event:2"))

    def write(self, event) -> None:
        self._writer.write(event.SerializeToString())
        self.last = event.wall_time

    def summary(self, summary, step: int, wall: float) -> None:
        self.write(self._event(wall_time=wall, step=step, summary=summary))

    def scalars(self, values: dict[str, float], step: int, wall: float) -> None:
        from tensorboardX.summary import scalar

        for i, (key, value) in enumerate(values.items()):  # verl: one add_scalar per key
            self.summary(scalar(key, float(value)), step, wall + i * 1e-4)

    def close(self) -> None:
        self._writer.close()
        os.utime(self.path, (self.last, self.last))


def write_tensorboard_run(root: str | os.PathLike, *, project: str = "verl-gsm8k",
                          name: str = "qwen2.5-0.5b-grpo-tb", t_end: float) -> Path:
    """`root/tensorboard_log/<project>/<name>/`, its last record about `t_end`; returns the run folder."""
    from tensorboardX.summary import hparams, text

    run = Path(root) / "tensorboard_log" / project / name
    run.mkdir(parents=True, exist_ok=True)
    launch2_steps = STEPS - RESUME_AT
    t0 = t_end - STEP_S * (CRASH_AT + launch2_steps) - 600.0  # 10 minutes down between the launches
    config = _config(project, name)
    for attempt, (first, last, start) in enumerate(((1, CRASH_AT, t0),
                                                    (RESUME_AT + 1, STEPS, t_end - STEP_S * launch2_steps - 5.0)), 1):
        f = _File(run, start)
        f.summary(text("config", "\n".join(f"{k}={v}" for k, v in config.items())), 0, start + 1.0)
        if attempt == 1:  # as `add_hparams` does: a writer of its own, in a sub-folder named by its time
            hp = _File(run / f"{start + 2.0:.6f}", start + 2.0)
            for summary in hparams({k: v for k, v in config.items()}, {}):
                hp.summary(summary, 0, start + 2.0)
            hp.close()
            f.scalars(_val_metrics(0), 0, start + 3.0)
        t = start + 4.0
        for step in range(first, last + 1):
            t += STEP_S
            f.scalars(_train_metrics(step, attempt), step, t)
            if step % VAL_EVERY == 0:
                f.scalars(_val_metrics(step), step, t + 0.5)
        f.close()
    return run
