"""The run contract every source format implements: `Run`, its `Overview`, and `Problem`s.

A `Run` is cheap to create: it reads nothing until a frame is asked for, and every frame reflects
the files as they are now (readers re-check fingerprints and parse only appended bytes). Heavy
parsed state lives in the process-wide cache (`rundash_core.cache`), so two `Run` objects for the
same directory share it.

Every kind answers every method with frames of one schema (`rundash_core.frames`), empty where it
has no such data, and says in `capabilities` what it offers (read without I/O: what it learned when
it last listed its files): pages ask that, never `kind`. A new
source subclasses `Run`, registers in `rundash_core.sources`, and passes `tests/unit/test_contract.py`.
"""
from __future__ import annotations

import abc
import functools
import hashlib
import os
from dataclasses import dataclass

import pandas as pd

from rundash_core import frames
from rundash_core.frames import Episode
from rundash_core.io.files import shown_path
from rundash_core.metrics.wide import wide_metrics
from rundash_core.overview import Overview, utc  # noqa: F401  (the contract's summary; `utc` for sources)
from rundash_core.safety.gate import GATED, gate_method, inside

CAPABILITIES = ("metrics", "config", "attempts", "samples", "episodes", "validation", "logs", "tokens",
                "failure_modes", "reports")


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


def path_run_id(path: str) -> str:
    """A short id derived from the absolute path: stable across restarts, used as fallback key."""
    return hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:10]


class Run(abc.ABC):
    """Base class of every source's run: the abstract readers, and the defaults every kind shares
    (empty frames of the right schema for what a kind does not have).

    The one gate (`rundash_core.safety.gate`): every reader in `gate.GATED` (samples, episode, logs,
    configs, reports, problems, ...) answers with secrets hidden, in every subclass too (wrapped
    here, in `__init_subclass__`), so no surface can read run text around it. `reveal=True` (or
    `rd.open_run(path, reveal=True)`) is a notebook's explicit opt-in to raw values;
    `config(redacted=False)` / `configs(redacted=False)` the same for one call."""

    kind: str = "unknown"
    kind_capabilities: frozenset[str] = frozenset({"metrics"})  # what every run of the kind offers
    reveal: bool = False  # raw values from every reader (the run's owner, in a notebook)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in GATED:
            if name in cls.__dict__:
                setattr(cls, name, gate_method(cls.__dict__[name]))

    def __init__(self, path: str | os.PathLike, run_id: str | None = None):
        self.path = os.path.abspath(os.fspath(path))
        self.name = shown_path(os.path.basename(self.path.rstrip(os.sep)))  # a non-UTF-8 name: \xff escapes
        self.run_id = run_id or self.name
        self._listed: dict[str, frozenset[str]] = {}  # what each listing of the run's files last found

    @property
    def capabilities(self) -> frozenset[str]:
        """What this run offers (names from `CAPABILITIES`): pages, the terminal view and the AI
        context ask this, never `kind`. Reading it does no I/O: it is the kind's fixed set
        (`kind_capabilities`) plus what the run's own listings last found in its files (verl: its
        generation-dump folders, listed by `samples()`, `episode()`, `problems()`; prime-rl: its
        `reports/`, listed by `reports()`, `problems()`). So it changes only when one of those
        reads runs: a folder that appears (or goes) shows from the next one (the app's sidebar and
        the terminal card read `problems()` on every refresh); a `Run` that has read nothing yet
        offers the fixed set."""
        listed = self._listed.copy()  # (another thread may be listing: one consistent look)
        return self.kind_capabilities.union(*listed.values())

    def _found(self, listing: str, capabilities) -> None:
        """Remember what `listing` (a reader that just listed the run's files: "dumps", "reports")
        found they offer (empty: nothing): `capabilities` answers from this, nothing else."""
        self._listed[listing] = frozenset(capabilities)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} {self.name!r} at {self.path}>"

    @functools.cached_property
    def real_path(self) -> str:
        """The run's path with symlinks resolved (once per Run object): what cache keys use."""
        return os.path.realpath(self.path)

    # Summary -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def overview(self, now: float | None = None) -> Overview:
        """The run's one summary: what the card, the runs list, `rundash status`, the check-in, the
        terminal view, Compare and the AI context show; cached by the files' fingerprints, status
        as of `now`."""

    # Metrics -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def metrics(self) -> pd.DataFrame:
        """Tidy metrics: step (Int64), time (float64), metric, value (float64), producer."""

    @abc.abstractmethod
    def metrics_version(self) -> tuple:
        """Changes whenever `metrics()` would answer differently: what derived views are keyed by."""

    def metrics_wide(self, metrics: list[str] | None = None, producer: str | None = None) -> pd.DataFrame:
        """One row per step, one column per metric (`step`, `time`, then the metrics); time-keyed
        rows are left out. A key logged by several producers is namespaced `producer:key`."""
        return wide_metrics(self.metrics(), metrics=metrics, producer=producer)

    # Config --------------------------------------------------------------------------------------
    def config(self, *, redacted: bool = True) -> dict:
        """The resolved config of the latest attempt ({} when the run has none), secrets hidden by
        the gate (`redacted=False` for the run's owner in a notebook)."""
        return self.read_config()

    def configs(self, attempt: int | None = None, *, redacted: bool = True) -> dict[str, object]:
        """Every config file of an attempt (default: the latest), by relative name, secrets hidden
        by the gate (text files with `redact_text`; `redacted=False`: as the files say)."""
        return self.read_configs(attempt)

    @abc.abstractmethod
    def read_config(self) -> dict:
        """`config()` as the files say it: what a source implements."""

    @abc.abstractmethod
    def read_configs(self, attempt: int | None = None) -> dict[str, object]:
        """`configs()` as the files say it: what a source implements."""

    def attempts(self) -> list[int]:
        return [1]

    def latest_attempt(self) -> int | None:
        """The attempt shown by default."""
        return self.attempts()[-1]

    def resume_steps(self) -> list[int]:
        """Steps at which the run resumed (a new attempt began), for markers on the charts."""
        return []

    @abc.abstractmethod
    def problems(self) -> list[Problem]:
        """Files that could not be fully read, and why."""

    # Samples -------------------------------------------------------------------------------------
    def samples(self, split: str | None = None, step: int | None = None) -> pd.DataFrame:
        """One row per sample/episode (`frames.SAMPLES`)."""
        return frames.empty(frames.SAMPLES)

    def episode(self, sample_id: str) -> Episode:
        """The full record of one listed sample; KeyError when the run has no such sample, RunError
        (naming the file and why) when its record cannot be read."""
        raise KeyError(f"{self.run_id}: no sample {sample_id!r}")

    def live_samples(self) -> pd.DataFrame:
        """Episodes still being generated (prime-rl spec 5.7), as `frames.SAMPLES` rows whose
        `status` is 'in flight: <stage>' (pending, boot, setup, running, finalize, scoring, done,
        error) and whose `sample_id` is 'live-<trace or dispatch id>'; `episode()` opens their
        partial trace. Read-only and short-lived: an episode that lands in the stream leaves this
        frame. Empty for kinds that write no in-flight records."""
        return frames.empty(frames.SAMPLES)

    def steps(self) -> pd.DataFrame:
        """Per step: samples, mean reward, whether it holds eval samples (`frames.STEPS`)."""
        with inside():  # (numbers only: no text of the samples is answered)
            s = self.samples()
        s = s[s["step"].notna()]
        if s.empty:
            return frames.empty(frames.STEPS)
        g = s.groupby("step", sort=True)
        out = pd.DataFrame({"step": g.size().index, "samples": g.size().to_numpy(),
                            "reward_mean": g["reward"].mean().to_numpy(),
                            "eval": g["split"].agg(lambda x: bool((x != "train").any())).to_numpy()})
        return frames.typed(out, frames.STEPS)

    def validation(self) -> pd.DataFrame:
        """Per validation event × source × statistic (`frames.VALIDATION`)."""
        return frames.empty(frames.VALIDATION)

    def val_cot(self) -> pd.DataFrame:
        """Chain-of-thought share of the val responses per event (`frames.VAL_COT`)."""
        return frames.empty(frames.VAL_COT)

    def failure_modes(self, event: str | None = None) -> pd.DataFrame:
        """Why each task of a val event (default: the last) failed (`frames.FAILURE_MODES`)."""
        return frames.empty(frames.FAILURE_MODES)

    def eval_plan(self) -> pd.DataFrame:
        """Eval episodes expected per env and step (`frames.EVAL_PLAN`), from a plan.json."""
        return frames.empty(frames.EVAL_PLAN)

    def health(self, now: float | None = None) -> list:
        """Rule-based health findings (`rundash_core.health.checks`: list of `Finding`), from the frames."""
        from rundash_core.health.checks import run_health

        return run_health(self, now=now)

    # Logs ----------------------------------------------------------------------------------------
    def logs(self) -> pd.DataFrame:
        """One row per log file (`frames.LOGS`)."""
        return frames.empty(frames.LOGS)

    def read_log(self, paths: list[str], *, tail: int = 1000, before: int | dict | None = None,
                 pattern: str | None = None, levels: list[str] | None = None, after: dict | None = None,
                 seen: dict | None = None, actors: list[str] | None = None) -> pd.DataFrame:
        """Lines of the given log files, merged by time (`frames.LOG_LINES`); `before`/`after`
        page older / follow appended bytes (`seen`: the last read's `versions`, to tell a replaced
        file), `actors` keeps Ray actors' lines (`rundash_core.logs.reading`)."""
        from rundash_core.logs.reading import read_log

        listing = self.logs()
        return read_log(listing, paths, tail=tail, before=before, after=after, seen=seen, pattern=pattern,
                        levels=levels, actors=actors) if len(listing) else frames.empty(frames.LOG_LINES)

    # Reports -------------------------------------------------------------------------------------
    def reports(self) -> pd.DataFrame:
        """The run's reports (`frames.REPORTS`; prime-rl: `reports/*.md`, `rundash_core.views.reports`)."""
        return frames.empty(frames.REPORTS)

    def report(self, name: str):
        """One report of `reports()` by name (`reports.Report`: title, front matter, body; an
        unreadable one says why in `error`), secrets hidden by the gate; KeyError when not listed."""
        from rundash_core.views.reports import read_report

        listing = self.reports()
        rows = listing[listing["name"] == name]
        if rows.empty:
            raise KeyError(f"{self.run_id}: no report {name!r}")
        return read_report(rows["path"].iloc[0])


for _name in GATED:  # the base class's own readers (the defaults) pass the gate too
    setattr(Run, _name, gate_method(getattr(Run, _name)))
