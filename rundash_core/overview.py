"""The run's one summary, `Overview`, and the rules every source shares to fill it: the status
(running / completed / stopped, `derive_status`), times as UTC timestamps (`utc`), and the fields
every surface shows (`summary_fields`, `trainer_names`, `resumes_text`). A source builds one in
`Run.overview()`; the card, the runs list, Compare, Health, the check-in, `rundash status`, the
terminal view and the AI context read it, so no two surfaces can differ."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import pandas as pd

STATUSES = ("running", "completed", "stopped", "unknown")
RUNNING_WINDOW_S = 180.0
STALE_DATA_S = 86400.0  # data this old is not a live run, however fresh its files (a copy)


@dataclass
class Overview:
    """The run's one summary: the run card, its row in the runs list, `rundash status`, the
    check-in, the terminal card, Compare's runs table and the AI context all read this (through
    `summary_fields` where they show it as fields), so no two surfaces can differ.

    `name` is what the user named the run: its folder, or its log file without the suffix (what
    the runs list lists it by), or for a W&B run the name it was given (its folder is a stamp); the trainer's own project and experiment names are `project` and
    `experiment`. `step` is steps done. Times come from the data (first and last logged time),
    never from file times, so a copied run reads the same; only `touched` (the newest file time)
    is a file time: it says whether the run is still being written (status "running")."""

    run_id: str
    name: str
    kind: str
    path: str
    status: str = "unknown"
    step: int | None = None  # steps done: the last step logged, plus one when steps count from 0
    max_steps: int | None = None
    created: pd.Timestamp | None = None  # the first logged time
    started: pd.Timestamp | None = None
    updated: pd.Timestamp | None = None  # the last logged time
    updated_estimated: bool = False  # `updated` is start + the logged step times (no stamp at the end)
    duration_s: float | None = None
    model: str | None = None
    attempts: int = 1
    train_envs: list[str] = field(default_factory=list)
    eval_envs: list[str] = field(default_factory=list)
    flavor: str = "rl"
    finished: bool = False  # the run said it is done (a final print, every chunk sealed)
    last_step: int | None = None  # the last step number logged
    touched: pd.Timestamp | None = None  # the newest file time of the run
    project: str | None = None  # the trainer's project name (verl `trainer.project_name`)
    experiment: str | None = None  # the trainer's experiment name (verl `trainer.experiment_name`)
    resumed_from: list[int] = field(default_factory=list)  # the checkpoint step each later attempt resumed from

    @property
    def progress(self) -> str:
        """`min(step, max)/max`, with ∞ when the run has no step limit."""
        if self.step is None:
            return "n/a"
        if self.max_steps is None:
            return f"{self.step}/∞"
        return f"{min(self.step, self.max_steps)}/{self.max_steps}"

    def status_at(self, now: float) -> str:
        """Running: a file was written within the last few minutes and the data's last time (when
        it has one, logged rather than estimated) is not days old (a fresh copy of an old run is
        not running; an estimate leaves out downtime, so it cannot say that)."""
        updated = None if self.updated_estimated else _seconds(self.updated)
        stale = updated is not None and now - updated > STALE_DATA_S
        return derive_status(finished=self.finished, updated=_seconds(self.touched), step=self.step,
                             max_steps=self.max_steps, now=now, stale=stale)

    def at(self, now: float | None = None) -> Overview:
        """This summary with its status and duration as of `now` (a cached summary turns from
        running to stopped without a re-read); while running, its duration ticks to `now`."""
        now = time.time() if now is None else now
        status = self.status_at(now)
        updated, started = _seconds(self.updated), _seconds(self.started)
        end = now if status == "running" and updated is not None else updated
        out = copy.copy(self)  # (dataclasses.replace costs more than the rest of a cached summary)
        out.status = status
        if end is not None and started is not None:  # (no times: the duration the data says, if any)
            out.duration_s = end - started if end >= started else None
        return out


SUMMARY_FIELDS = ("run_id", "name", "project", "experiment", "kind", "flavor", "path", "status", "step",
                  "max_steps", "last_step", "model", "attempts", "resumed_from", "train_envs", "eval_envs",
                  "created", "updated", "duration_s")


def summary_fields(ov: Overview) -> dict:
    """The summary as the fields every surface shows (`SUMMARY_FIELDS`, lists copied)."""
    return {k: list(v) if isinstance(v := getattr(ov, k), list) else v for k in SUMMARY_FIELDS}


def trainer_names(ov: Overview) -> str:
    """The trainer's project and experiment names, as the card's secondary line ("" when none)."""
    parts = [f"project {ov.project}" if ov.project else "", f"experiment {ov.experiment}" if ov.experiment else ""]
    return " · ".join(p for p in parts if p)


def resumes_text(ov: Overview) -> str:
    """How many times the run resumed, and from which steps when the data says ("1 (resumed from step 100)")."""
    n = max(ov.attempts - 1, 0)
    steps = ", ".join(str(s) for s in ov.resumed_from)
    return f"{n} (resumed from step {steps})" if n and steps else str(n)


def _seconds(ts: pd.Timestamp | None) -> float | None:
    return ts.timestamp() if ts is not None else None


def utc(ts: float | None) -> pd.Timestamp | None:
    """Epoch seconds → a UTC pandas Timestamp (None stays None)."""
    if ts is None or ts != ts:
        return None
    try:
        return pd.Timestamp(ts, unit="s", tz="UTC")
    except (OverflowError, ValueError):
        return None


def derive_status(*, finished: bool, updated: float | None, step: int | None, max_steps: int | None,
                  now: float | None = None, stale: bool = False) -> str:
    """The running/completed/stopped rule shared by all sources (prime-rl spec 7.2): `updated` is
    the newest file time; `stale`: the data itself is old (a fresh copy), so not running."""
    now = time.time() if now is None else now
    if finished:
        return "completed"
    if updated is not None and now - updated < RUNNING_WINDOW_S and not stale:
        return "running"
    if step is not None and max_steps is not None and step >= max_steps:
        return "completed"
    if updated is None and step is None:
        return "unknown"
    return "stopped"
