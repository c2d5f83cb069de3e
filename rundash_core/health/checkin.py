"""The monitor-run check-in entry (prime-rl's `monitor-run` runbook) from a run's frames and findings.

    ## YYYY-MM-DD HH:MM UTC

    **Run**: `name` · running · 3h 05m
    **Step**: 140 / 200
    **Health**: Healthy | Degraded | Stopped | Stalled | Down

    **Progress**: ...   **Stability**: ...   **Performance**: ...   **Notes**: ...

rundash only renders it (page panel, `rundash check-in`); whoever owns the run appends it to the
run's STATUS.md, rundash never writes into a run directory. Name, status, step and duration are the
run's one summary (`run.overview()`, through `Signals`), as the run card and the runs list show them.
"""
from __future__ import annotations

import time

import pandas as pd

from rundash_core.health.alive import step_rate
from rundash_core.health.checks import Finding, Signals, health, health_state
from rundash_core.health.rules import val_headline
from rundash_core.views.display_text import format_duration, md_code

# (concept, label, unit[, skipped when this concept is logged]) per line of the entry; units: "%" (a
# share), "s", "tok" or "" (plain)
PROGRESS = [("reward", "reward", ""), ("response length", "seq_len", "tok"), ("truncation", "truncation", "%"),
            ("error fraction", "errors", "%")]
STABILITY = [("entropy", "entropy", ""), ("mismatch KL", "mismatch_kl", ""), ("grad norm", "grad_norm", ""),
             ("loss", "loss", "")]
PERFORMANCE = [("trainer step time", "trainer step", "s"), ("wait for batch", "trainer wait_for_batch", "s"),
               ("orchestrator step time", "orchestrator step", "s"), ("wait for policy", "orch wait_for_policy", "s"),
               ("step time", "step time", "s", "trainer step time"), ("throughput", "throughput", "tok/s/GPU"),
               ("MFU", "MFU", ""), ("staleness", "off-policy", "steps")]


def _num(x: float, unit: str) -> str:
    if unit == "%":
        return f"{x:.1%}"
    text = f"{x:.4g}"
    return f"{text} {unit}" if unit else text


def _line(signals: Signals, items, *, lookback: int = 20) -> list[str]:
    """`label value (was v N steps ago)` for each concept the run logs."""
    parts = []
    for concept, label, unit, *unless in items:
        if unless and signals.concept(unless[0]) is not None:
            continue
        found = signals.concept(concept)
        if found is None:
            continue
        _key, s = found
        s = s.dropna()
        if s.empty:
            continue
        text = f"{label} {_num(float(s.iloc[-1]), unit)}"
        if len(s) > lookback:
            text += f" (was {_num(float(s.iloc[-1 - lookback]), unit)} at step {int(s.index[-1 - lookback])})"
        parts.append(text)
    return parts


def _flags(findings: list[Finding], area: str) -> list[str]:
    return [f"⚠ {f.message}" for f in findings if f.area == area and f.severity in ("critical", "warning")]


def _sentence(parts: list[str], absent: str) -> str:
    return "; ".join(parts) + "." if parts else absent


def _area(values: list[str], findings: list[Finding], area: str, absent: str) -> str:
    """An area's line: its numbers, then its warnings and critical findings flagged."""
    return _sentence(values + _flags(findings, area), absent)


def eval_text(signals: Signals) -> list[str]:
    """`eval avg@2 0.750 at step 20 (best 0.833 at step 10)`: the headline validation statistic
    (the one Validation shows by default, `validation.headline`), the series val_drop reads."""
    h = val_headline(signals)
    if h is None or not len(h.values):
        return []
    v = h.values
    return [f"eval {h.label} {v.iloc[-1]:.3f} at step {int(v.index[-1])} (best {h.best:.3f} at step {h.best_step})"]


def checkin_markdown(signals: Signals, findings: list[Finding], *, problems: list | None = None,
                     now: float | None = None) -> str:
    """The check-in entry as Markdown, stamped `now` (UTC)."""
    now = signals.now if now is None else now
    ov = signals.overview
    stamp = pd.Timestamp(now, unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M UTC")
    step = "n/a" if ov.step is None else str(ov.step)
    max_steps = "∞" if ov.max_steps is None else str(ov.max_steps)

    progress = _line(signals, PROGRESS)
    progress += eval_text(signals)
    stability = _line(signals, STABILITY)
    performance = _line(signals, PERFORMANCE)
    rate = step_rate(signals)
    if rate:
        performance.append(f"{rate:.3g} steps/h")

    notes = [f.message for f in findings if f.area == "alive" or f.severity == "info"]
    if ov.attempts > 1:
        notes.append(f"resumed {ov.attempts - 1}×")
    if problems:
        notes.append(f"{len(problems)} file problem(s): " + "; ".join(str(p) for p in problems[:3]))

    run = f"{md_code(ov.name)} · {ov.status} · {format_duration(ov.duration_s)}"
    lines = [f"## {stamp}", "", f"**Run**: {run}", f"**Step**: {step} / {max_steps}",
             f"**Health**: {health_state(findings)}", "",
             f"**Progress**: {_area(progress, findings, 'progress', 'no progress metrics logged.')}",
             f"**Stability**: {_area(stability, findings, 'stability', 'no stability metrics logged.')}",
             f"**Performance**: {_area(performance, findings, 'performance', 'no timing metrics logged.')}",
             "", f"**Notes**: {_sentence(notes, 'nothing notable.')}", ""]
    return "\n".join(lines)


def run_checkin(run, *, now: float | None = None) -> str:
    """The check-in entry of a run as its files are now."""
    now = time.time() if now is None else now
    signals = Signals.from_run(run, now=now)
    return checkin_markdown(signals, health(signals), problems=run.problems(), now=now)
