"""Rule-based health checks over a run's frames: `Finding`s and the one-word health state.

The rules (`health_rules`) read frames only: the tidy metrics frame, the overview and the
validation frame, gathered once into `Signals`. A rule asks for a *concept* ("reward", "mismatch
KL", "wait for batch", ...), never a kind: `Signals.concept` resolves it to the key the run logged,
through the canonical aliases (`charts.aliases`) where one exists and the `CONCEPTS` below for what
the aliases do not cover; either way the run's `Source` says which of its keys stand for the name,
so one rule serves every kind, one registered from outside the package too.

The verdict (`health_state`) is the run's state now, the first that holds of:

- **Down**: not being written and not finished: it stopped short of its step limit, or before
  logging its first step ("step 0 of 58") (a critical "alive" finding other than `stalled`).
- **Stalled**: its files are still written (status running) but it has not advanced: no new step
  for several of its typical step times (the logged step times, else `timing_s/step`, with a floor
  of `Thresholds.stall_minutes`), or, for a run with a step limit, no step at all that long after
  it started (`stalled`). A run that logged no time at all cannot be timed: a note says so.
- **Degraded**: alive or finished, and something is wrong at its latest steps (a warning or
  critical finding: a condition over the last window, a spike not yet recovered).
- **Stopped**: not being written, nothing wrong at its end, but with no step limit and no finish
  logged rundash cannot tell done from cut short (the `stopped` info finding; an eval-only run,
  which logs no steps, reads so too).
- **Healthy**: advancing, or finished (said so, or reached its step limit), with nothing wrong at
  its latest steps. Info findings (a spike that recovered, a plateau, an entropy that settled low)
  are dated notes: they never set the verdict.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from rundash_core.charts import aliases
from rundash_core.charts.series import SeriesIndex, series_index
from rundash_core.overview import Overview

SEVERITIES = ("critical", "warning", "info")  # most severe first
AREAS = ("alive", "stability", "progress", "performance")
HEALTH_STATES = ("Healthy", "Degraded", "Stopped", "Stalled", "Down")
VERDICTS = {  # what each verdict says of the run now (one line each, for pages and the CLI)
    "Healthy": "advancing, or finished, with nothing wrong at its latest steps",
    "Degraded": "alive or finished, with something wrong at its latest steps",
    "Stopped": "not being written; no step limit or finish logged, so it may be done or cut short",
    "Stalled": "its files are written but it has not advanced for several of its typical step times",
    "Down": "stopped short of its step limit, or before its first step",
}


@dataclass(frozen=True)
class Finding:
    """One thing a health rule noticed: how bad, where (area, metric, steps), what, and the numbers
    behind it (`evidence`, JSON-safe) so a reader can check the rule's reasoning."""

    severity: str  # critical | warning | info
    area: str  # alive | stability | progress | performance
    rule: str  # the rule's id, e.g. "grad_norm_spike"
    metric: str | None  # the logged key the rule read (None: the run as a whole)
    step_start: int | None
    step_end: int | None
    message: str
    evidence: dict = field(default_factory=dict)

    @property
    def steps(self) -> str:
        """`12`, `12–40` or "" (no step range)."""
        if self.step_start is None:
            return ""
        if self.step_end is None or self.step_end == self.step_start:
            return str(self.step_start)
        return f"{self.step_start}–{self.step_end}"

    def to_dict(self) -> dict:
        return {k: json_safe(v) for k, v in asdict(self).items()}


def json_safe(value):
    """Numbers, text, lists and dicts as JSON can hold them: NaN/inf become None, numpy scalars
    plain Python, timestamps ISO text."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if value is None or value is pd.NA:
        return None
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Thresholds:
    """The rules' knobs; the defaults suit most runs (tests pass their own)."""

    stall_minutes: float = 5.0  # the least time without a new step, while running, that is a stall
    stall_steps: float = 5.0  # ... or this many typical step times, when longer
    recovered_steps: int = 3  # a spike with this many normal steps logged after it has recovered
    window: int = 20  # steps per trailing window (shorter runs use a quarter of their steps)
    spike_z: float = 6.0  # robust z-score (median/MAD of the trailing window) of a spike
    entropy_collapse: float = 0.25  # recent entropy below this share of its early level
    kl_rise: float = 3.0  # recent mismatch KL above this multiple of its early level
    truncation: float = 0.2
    errors: float = 0.1
    no_signal: float = 0.5
    mfu_drop: float = 0.7  # recent MFU below this share of its best window
    staleness_steps: float = 4.0


# The concepts the rules ask for beyond the canonical aliases (or with another meaning: the "KL"
# alias is verl's PPO KL), with what each means. Each source says which of its keys stand for
# which (`Source.concepts`, in `rundash_core/sources/<kind>/aliases.py`), in order; a regex
# candidate takes its first match in sorted key order.
CONCEPTS: dict[str, str] = {
    "loss": "the training loss (the policy loss of an RL run)",
    "mismatch KL": "KL between the trainer's and the inference engine's policy",
    "nan count": "a counter of NaN losses",
    "truncation": "share of samples cut at the length limit",
    "error fraction": "share of samples that errored, were aborted or filtered as invalid",
    "no-signal fraction": "share of groups whose rewards do not vary (no learning signal)",
    "trainable fraction": "share of samples that can be trained on (no signal = 1 - this)",
    "wait for batch": "seconds per step the trainer waits for a batch",
    "trainer step time": "seconds per trainer step",
    "wait for policy": "seconds per step the orchestrator waits for new weights",
    "orchestrator step time": "seconds per orchestrator step",
    "trainer idle ratio": "share of the time the (fully-async) trainer is idle",
    "rollouter idle ratio": "share of the time the (fully-async) rollouter is idle",
    "staleness": "how many steps behind the policy the trained samples were generated",
    "dropped stale": "samples dropped per step for being too stale",
    "dropped stale total": "samples dropped so far for being too stale (a running count)",
    "MFU": "model FLOPs utilization",
}


class Signals:
    """A run's frames as the rules read them: per-step series by key or concept, the overview,
    the validation frame, and `now` (so a test can place a run in time)."""

    def __init__(self, *, kind: str, overview: Overview, tidy: pd.DataFrame,
                 validation: pd.DataFrame | None = None, now: float | None = None, index: SeriesIndex | None = None):
        self.kind = kind
        self.overview = overview
        self.tidy = tidy
        self.validation = validation if validation is not None else pd.DataFrame()
        self.now = time.time() if now is None else now
        self.index = index if index is not None and index.rows == len(tidy) else SeriesIndex(tidy)
        self.keys = sorted(self.index.metrics)

    @classmethod
    def from_run(cls, run, *, now: float | None = None) -> Signals:
        """The run's frames now; the per-key index is the charts' shared one (built once per
        metrics version)."""
        now = time.time() if now is None else now
        index = series_index(run)
        return cls(kind=run.kind, overview=run.overview(now), tidy=run.metrics(), validation=run.validation(),
                   now=now, index=index)

    def series(self, key: str, producer: str | None = None) -> pd.Series:
        """Values of one key by step (ascending, the last write of a step wins; time-keyed rows
        left out); empty when not logged."""
        if producer is not None and producer not in self.index.producers_of(key):
            return pd.Series([], dtype="float64")
        has_step, step, _t, value = self.index.raw(key, producer)
        s = pd.Series(value[has_step], index=step[has_step].astype("int64"), dtype="float64")
        s = s[~s.index.duplicated(keep="last")].sort_index()
        return s.rename_axis("step")

    def concept(self, name: str) -> tuple[str, pd.Series] | None:
        """(logged key, series × factor) of a concept, or None when the run logs none of its keys."""
        if name in aliases.ALIASES:
            found = aliases.resolve_sources(self.kind, self.keys, name)
            cands = [c for _src, _key, c in found[:1]]
            keys = [key for _src, key, _candidate in found[:1]]
        else:
            from rundash_core import sources  # here, not at the top: the registry imports every source

            if name not in CONCEPTS:
                raise KeyError(f"unknown health concept {name!r}; known: {', '.join(CONCEPTS)}")
            source = sources.source_for(self.kind)
            cands, keys = [], []
            for c in (source.concepts.get(name, ()) if source is not None else ()):
                matched = [k for k in self.keys if re.fullmatch(c.pattern, k)] if c.regex else (
                    [c.pattern] if c.pattern in self.index.metrics else [])
                if matched:
                    cands.append(c)
                    keys.append(matched[0])
        for key, c in zip(keys, cands):
            s = self.series(key, c.producer)
            if len(s):
                return key, s * c.factor
        return None

    def last_time(self) -> float | None:
        """The newest logged time of any metric row (data time, not file time)."""
        t = self.tidy["time"].to_numpy(dtype="float64") if len(self.tidy) else np.empty(0)
        t = t[np.isfinite(t)]
        return float(t.max()) if len(t) else None


def window_for(n: int, thresholds: Thresholds) -> int:
    """Steps per trailing window: the configured window, or a quarter of a short series (min 3)."""
    return max(3, min(thresholds.window, n // 4))


def health(signals: Signals, *, thresholds: Thresholds | None = None) -> list[Finding]:
    """Every rule over the run's signals, most severe first (then by area, then step)."""
    from rundash_core.health.rules import RULES

    t = thresholds or Thresholds()
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule(signals, t))
    return sorted(out, key=lambda f: (SEVERITIES.index(f.severity), AREAS.index(f.area),
                                      f.step_start if f.step_start is not None else -1))


def run_health(run, *, now: float | None = None, thresholds: Thresholds | None = None) -> list[Finding]:
    """`Run.health()`: the findings of a run as its files are now."""
    return health(Signals.from_run(run, now=now), thresholds=thresholds)


def health_state(findings: list[Finding]) -> str:
    """The verdict: Down, Stalled, Degraded, Stopped or Healthy, as the module docstring defines."""
    alive = [f for f in findings if f.area == "alive"]
    if any(f.severity == "critical" and f.rule != "stalled" for f in alive):
        return "Down"
    if any(f.severity == "critical" and f.rule == "stalled" for f in alive):
        return "Stalled"
    if any(f.severity in ("critical", "warning") for f in findings):
        return "Degraded"
    if any(f.rule == "stopped" for f in alive):
        return "Stopped"
    return "Healthy"


def findings_frame(findings: list[Finding]) -> pd.DataFrame:
    """The findings as a table (severity, area, metric, steps, message, rule) for pages."""
    return pd.DataFrame([{"severity": f.severity, "area": f.area, "metric": f.metric or "", "steps": f.steps,
                          "message": f.message, "rule": f.rule} for f in findings],
                        columns=["severity", "area", "metric", "steps", "message", "rule"])
