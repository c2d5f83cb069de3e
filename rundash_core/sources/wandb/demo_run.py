"""A W&B demo run (wandb spec 1): a verl GRPO run logged with verl's `wandb` logger, offline, that
crashed (exit code 1) and was resumed from its last checkpoint: two `offline-run-*-<id>` folders,
one run id, the resumed attempt logging the steps after the checkpoint again.

Written with wandb's own protobuf `Record`s framed as wandb-core frames them (`records.Writer`,
byte for byte what wandb writes: `tests/unit/test_wandb_records.py`), not with `wandb.init`:
that starts wandb's service and takes seconds; this takes milliseconds. Deterministic for a
given end time. Returns None when the `wandb` package (the `rundash[wandb]` extra) is missing.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from rundash_core.sources.wandb import log, records

RUN_ID = "demo7k2q"
PROJECT, NAME = "verl-gsm8k", "qwen2.5-3b-grpo-wandb"
MODEL = "Qwen/Qwen2.5-3B-Instruct"
STEP_S = 42.0  # seconds per training step


def config() -> dict:
    return {"actor_rollout_ref": {"model": {"path": MODEL}, "actor": {"ppo_mini_batch_size": 64, "optim": {"lr": 1e-6}},
                                  "rollout": {"name": "vllm", "n": 5}},
            "algorithm": {"adv_estimator": "grpo", "kl_ctrl": {"kl_coef": 0.001}},
            "data": {"train_batch_size": 256, "max_response_length": 1024},
            "trainer": {"project_name": PROJECT, "experiment_name": NAME, "total_training_steps": 30,
                        "save_freq": 10, "test_freq": 10, "logger": ["console", "wandb"]}}


def step_values(step: int, attempt: int) -> dict:
    """verl's metrics of one step: smooth curves, a little different after the resume (other seeds)."""
    wobble = math.sin(step * 1.7 + attempt) * 0.02
    score = 0.25 + 0.5 * (1 - math.exp(-step / 12)) + wobble
    out = {
        "critic/score/mean": score, "critic/rewards/mean": score, "critic/advantages/mean": wobble / 10,
        "actor/entropy": 0.9 * math.exp(-step / 40) + 0.1, "actor/ppo_kl": 0.001 + step * 2e-5,
        "actor/pg_loss": -wobble, "actor/grad_norm": 0.3 + abs(wobble) * 5, "actor/lr": 1e-6,
        "response_length/mean": 180 + 4 * step, "response_length/clip_ratio": 0.01 + step * 5e-4,
        "timing_s/step": STEP_S + wobble * 50, "perf/throughput": 1500 + 10 * step,
        "training/global_step": step, "training/epoch": step // 20,
    }
    if step % 10 == 0:
        out["val-core/openai/gsm8k/reward/mean@1"] = score - 0.03
    return out


def _items(container, values: dict) -> None:
    for key, value in values.items():
        item = container.add()
        item.nested_key.append(key)
        item.value_json = json.dumps(value)


def history_record(pb, values: dict, step: int, t: float, runtime: float) -> bytes:
    """One `run.log(values, step=step)` as wandb writes it: the values and `_step`, `_timestamp`,
    `_runtime`, each key one `nested_key` part, values as JSON."""
    record = pb.Record()
    _items(record.history.item, {**values, "_step": step, "_timestamp": t, "_runtime": runtime})
    return record.SerializeToString()


def summary_record(pb, values: dict) -> bytes:
    record = pb.Record()
    _items(record.summary.update, values)
    return record.SerializeToString()


def run_record(pb, run_id: str, *, project: str, name: str, config: dict, start: float, resumed: bool = False) -> bytes:
    record = pb.Record()
    run = record.run
    run.run_id, run.project, run.display_name, run.resumed = run_id, project, name, resumed
    run.start_time.seconds, run.start_time.nanos = int(start), int(round(start % 1 * 1e9))
    _items(run.config.update, {"_wandb": {}, **config})
    return record.SerializeToString()


def metric_record(pb, *, name: str = "", glob: str = "", step_metric: str = "") -> bytes:
    """`run.define_metric(name or glob, step_metric=...)`."""
    record = pb.Record()
    m = record.metric
    m.name, m.glob_name, m.step_metric = name, glob, step_metric
    m.options.defined = True
    m.options.step_sync = bool(step_metric)
    return record.SerializeToString()


def exit_record(pb, code: int, runtime: float) -> bytes:
    record = pb.Record()
    record.exit.exit_code, record.exit.runtime = code, int(runtime)
    return record.SerializeToString()


def write_attempt(folder: Path, run_id: str, payloads, *, mtime: float | None = None) -> Path:
    """`folder/run-<id>.wandb` holding `payloads`, framed (spec 2.1)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "files").mkdir(exist_ok=True)
    path = folder / f"run-{run_id}.wandb"
    with open(path, "wb") as fh:
        writer = records.Writer(fh)
        for payload in payloads:
            writer.write(payload)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def folder_name(run_id: str, start: float) -> str:
    return f"offline-run-{time.strftime('%Y%m%d_%H%M%S', time.gmtime(start))}-{run_id}"


def write_wandb_run(root: Path, t_end: float, *, steps: int = 30, crash_after: int = 17, resume_from: int = 10) -> Path | None:
    """`root/wandb/` with the run's two attempt folders; the newest one's path (None without wandb).
    Attempt 1 logs steps 1..crash_after and dies (exit code 1); attempt 2 resumes the checkpoint
    of step `resume_from` and logs resume_from+1..steps, then finishes (exit code 0)."""
    pb = log.wandb_proto()
    if pb is None:
        return None
    cfg = config()
    cfg["trainer"]["total_training_steps"] = steps
    span = (crash_after + (steps - resume_from)) * STEP_S + 300.0
    start1 = t_end - span
    start2 = start1 + crash_after * STEP_S + 240.0
    out = None
    for attempt, (start, first, last, code) in enumerate(
            ((start1, 1, crash_after, 1), (start2, resume_from + 1, steps, 0)), 1):
        payloads = [run_record(pb, RUN_ID, project=PROJECT, name=NAME, config=cfg, start=start, resumed=attempt > 1)]
        t = start + 30.0
        for step in range(first, last + 1):
            t += STEP_S
            values = step_values(step, attempt)
            payloads.append(history_record(pb, values, step, t, t - start))
            payloads.append(summary_record(pb, values))
        payloads.append(exit_record(pb, code, t - start))
        folder = Path(root) / "wandb" / folder_name(RUN_ID, start)
        write_attempt(folder, RUN_ID, payloads, mtime=t + 1.0)
        out = folder
    return out
