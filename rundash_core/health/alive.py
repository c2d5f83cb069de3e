"""The "alive" health rule: is the run advancing, stalled, stopped short or done?

Time here is data time: when a step was logged (its metric rows' time, else the run's last logged
time), never a file time; only the overview's status (from file times) says the files are still
being written. A run's typical step time comes from its own data, so a 10-second step and a
20-minute step are each judged by their own pace.
"""
from __future__ import annotations

import pandas as pd

from rundash_core.health.checks import Finding, Signals, Thresholds
from rundash_core.views.display_text import format_duration


def alive(s: Signals, t: Thresholds) -> list[Finding]:
    """Stalled: status says running (files are being written) but no new step for a while, or none
    at all that long after the start (a run with a step limit); stopped: not running and not done (before any step, or
    short of the step limit); a stop with no limit known is a note (it may be done)."""
    ov = s.overview
    if ov.status == "running":
        return _stall(s, t)
    if ov.status == "stopped" and not ov.finished:
        if ov.max_steps is None:  # (an eval-only run logs no step at all)
            at = f"at step {ov.step}" if ov.step is not None else "and logged no step"
            return [Finding("info", "alive", "stopped", None, ov.last_step, ov.last_step,
                            f"the run is not being written to {at} (no step limit and no finish logged, so it "
                            "may be done or cut short)", {"step": ov.step})]
        if ov.step is None:
            return [Finding("critical", "alive", "stopped", None, None, None,
                            f"the run stopped before logging a step (step 0 of {ov.max_steps})",
                            {"step": 0, "max_steps": ov.max_steps})]
        if ov.step < ov.max_steps:
            return [Finding("critical", "alive", "stopped", None, ov.last_step, ov.last_step,
                            f"the run stopped at step {ov.step} of {ov.max_steps}",
                            {"step": ov.step, "max_steps": ov.max_steps})]
    return []


def _stall(s: Signals, t: Thresholds) -> list[Finding]:
    ov = s.overview
    typical = typical_step_s(s)
    limit = max(t.stall_minutes * 60.0, t.stall_steps * typical if typical else 0.0)
    evidence = {"limit_s": limit, "typical_step_s": typical}
    if ov.step is None:
        started = ov.started if ov.started is not None else ov.created
        if started is None:
            return [Finding("info", "alive", "no_step_yet", None, None, None,
                            "no step logged yet (no time logged either, so rundash cannot tell for how long)",
                            evidence)]
        waited = s.now - started.timestamp()
        if waited <= limit or ov.max_steps is None:  # (no step limit: it may log no steps, as an eval does)
            until = f" (stalled after {format_duration(limit)})" if ov.max_steps is not None else ""
            return [Finding("info", "alive", "no_step_yet", None, None, None,
                            f"no step logged yet, {format_duration(waited)} after the run started{until}",
                            {**evidence, "seconds_since_start": waited})]
        return [Finding("critical", "alive", "stalled", None, None, None,
                        f"no step logged {format_duration(waited)} after the run started while its files are "
                        f"still written (limit {format_duration(limit)})", {**evidence, "seconds_since_start": waited})]
    last = last_step_time(s)
    if last is None:
        return []
    gap = s.now - last
    if gap <= limit:
        return []
    typical_text = f", {t.stall_steps:g}× its typical step of {format_duration(typical)}" if typical else ""
    return [Finding("critical", "alive", "stalled", None, ov.last_step, ov.last_step,
                    f"no new step for {format_duration(gap)} after step {ov.last_step} while the run's files are "
                    f"still written (limit {format_duration(limit)}{typical_text})",
                    {**evidence, "seconds_since_last_row": gap, "steps_per_hour": step_rate(s)})]


def _step_times(s: Signals) -> pd.Series:
    """The logged time of each step (its latest row), by step, ascending; empty without times."""
    tidy = s.tidy
    stepped = tidy[tidy["step"].notna() & tidy["time"].notna()]
    if stepped.empty:
        return pd.Series([], dtype="float64")
    return stepped.groupby(stepped["step"].astype("int64"))["time"].max().sort_index()


def last_step_time(s: Signals) -> float | None:
    """When the newest step was logged (data time): its metric rows' time, else the run's last
    logged time (a console log without per-step times: its last stamped line)."""
    per_step = _step_times(s)
    if len(per_step):
        return float(per_step.iloc[-1])
    return s.overview.updated.timestamp() if s.overview.updated is not None else None


def typical_step_s(s: Signals) -> float | None:
    """Seconds per step: the median over the last 20 steps' logged times, else of the logged step
    time (`timing_s/step`, `time/step`); None when the run logs neither."""
    per_step = _step_times(s).tail(21)
    if len(per_step) >= 2:
        seconds = per_step.diff().iloc[1:] / pd.Series(per_step.index, index=per_step.index).diff().iloc[1:]
        seconds = seconds[seconds > 0]
        if len(seconds):
            return float(seconds.median())
    found = s.concept("step time")
    if found is not None and len(found[1].dropna()):
        typical = float(found[1].dropna().iloc[-20:].median())
        return typical if typical > 0 else None
    return None


def step_rate(s: Signals) -> float | None:
    """Steps per hour over the last window of steps (from their logged times), None when unknown."""
    per_step = _step_times(s).tail(21)
    if len(per_step) < 2:
        return None
    dt = float(per_step.iloc[-1] - per_step.iloc[0])
    dsteps = int(per_step.index[-1] - per_step.index[0])
    return dsteps * 3600.0 / dt if dt > 0 else None
