"""The run model every source format implements: `Run`, its `Overview`, and `Problem`s.

A `Run` is cheap to create: it reads nothing until a frame is asked for, and every frame reflects
the files as they are now (readers re-check fingerprints and parse only appended bytes). Heavy
parsed state lives in the process-wide cache (`rundash_core.cache`), so two `Run` objects for the
same directory share it.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

import pandas as pd

from .metricstore import MetricStore, empty_tidy

KINDS = ("prime-rl", "verl", "swe-lego-rl", "relax")
STATUSES = ("running", "completed", "stopped", "unknown")
RUNNING_WINDOW_S = 180.0


class RunError(Exception):
    """A directory or file that cannot be opened as a run; the message says which and why."""


@dataclass(frozen=True)
class Problem:
    """One file that could not be fully read: which file, what was wrong, how many times."""

    path: str
    what: str
    count: int = 1
    line: int | None = None  # first line where it happened, for line-based files

    def __str__(self) -> str:
        where = f" (first at line {self.line})" if self.line else ""
        times = f" ×{self.count}" if self.count > 1 else ""
        return f"{self.path}: {self.what}{times}{where}"


@dataclass
class Overview:
    """What the run card shows."""

    run_id: str
    name: str
    kind: str
    path: str
    status: str = "unknown"
    step: int | None = None
    max_steps: int | None = None
    created: pd.Timestamp | None = None
    started: pd.Timestamp | None = None
    updated: pd.Timestamp | None = None
    duration_s: float | None = None
    model: str | None = None
    attempts: int = 1
    train_envs: list[str] = field(default_factory=list)
    eval_envs: list[str] = field(default_factory=list)
    flavor: str = "rl"

    @property
    def progress(self) -> str:
        """`min(step, max)/max`, with ∞ when the run has no step limit."""
        if self.step is None:
            return "n/a"
        if self.max_steps is None:
            return f"{self.step}/∞"
        return f"{min(self.step, self.max_steps)}/{self.max_steps}"


def utc(ts: float | None) -> pd.Timestamp | None:
    """Epoch seconds → a UTC pandas Timestamp (None stays None)."""
    if ts is None or ts != ts:
        return None
    return pd.Timestamp(ts, unit="s", tz="UTC")


def derive_status(*, finished: bool, updated: float | None, step: int | None, max_steps: int | None,
                  now: float | None = None) -> str:
    """The running/completed/stopped rule shared by all sources (prime-rl spec 7.2)."""
    now = time.time() if now is None else now
    if finished:
        return "completed"
    if updated is not None and now - updated < RUNNING_WINDOW_S:
        return "running"
    if step is not None and max_steps is not None and step >= max_steps:
        return "completed"
    if updated is None and step is None:
        return "unknown"
    return "stopped"


def path_run_id(path: str) -> str:
    """A short id derived from the absolute path: stable across restarts, used as fallback key."""
    return hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:10]


class Run:
    """Base class of every source's run. Subclasses fill in the readers."""

    kind: str = "unknown"

    def __init__(self, path: str | os.PathLike, run_id: str | None = None):
        self.path = os.path.abspath(os.fspath(path))
        self.name = os.path.basename(self.path.rstrip(os.sep))
        self.run_id = run_id or self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} {self.name!r} at {self.path}>"

    # Frames -----------------------------------------------------------------------------------
    def store(self) -> MetricStore | None:
        """The `MetricStore` the metrics come from, refreshed; None when the run has none (yet).
        Sources that derive their metrics another way override `metrics()` instead."""
        return None

    def metrics(self) -> pd.DataFrame:
        """Tidy metrics: step (Int64), time (float64), metric (str), value (float64), producer."""
        store = self.store()
        return store.tidy() if store is not None else empty_tidy()

    def metrics_wide(self, metrics: list[str] | None = None, producer: str | None = None) -> pd.DataFrame:
        """One row per (producer, step), one column per metric; time-keyed rows are left out."""
        raise NotImplementedError

    def config(self) -> dict:
        raise NotImplementedError

    def configs(self, attempt: int | None = None) -> dict[str, object]:
        raise NotImplementedError

    def attempts(self) -> list[int]:
        return [1]

    def latest_attempt(self) -> int | None:
        """The attempt shown by default (None when the source has no attempts)."""
        return None

    def overview(self) -> Overview:
        raise NotImplementedError

    def problems(self) -> list[Problem]:
        return []
