"""The health rules: each reads `Signals` (frames only, never files) and returns `Finding`s.

Windows are trailing runs of logged steps (`window_for`); "early" is the first window, "recent"
the last. Spikes use a robust z-score: distance from the trailing window's median in units of its
median absolute deviation, so one spike does not hide the next and a noisy metric is not flagged
for its noise. Rules judge the run now: a spike that recovered, or an entropy that settled low
long ago, is a dated note (info); a warning is a condition of the latest steps.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rundash_core.charts import aliases
from rundash_core.health.alive import alive
from rundash_core.health.checks import Finding, Signals, Thresholds, window_for
from rundash_core.views import validation as val

MAD_SCALE = 1.4826  # MAD × this estimates the standard deviation of normal noise


def _step(s: pd.Series, i: int) -> int:
    return int(s.index[i])


def _four_digits(x: float) -> str:
    """`x` to four significant digits, as findings quote values."""
    return f"{x:.4g}"


def resolution(s: pd.Series) -> float:
    """The smallest step between two distinct logged values: a console log printing three decimals
    cannot show a move smaller than its last digit, so a spike must be several of these."""
    u = np.unique(s.to_numpy(dtype="float64")[np.isfinite(s.to_numpy(dtype="float64"))])
    return float(np.diff(u).min()) if len(u) > 1 else 0.0


def robust_z(s: pd.Series, window: int) -> pd.Series:
    """Each point's distance from the median of the `window` points before it, in robust standard
    deviations (MAD × 1.4826, floored at the values' print resolution and 0.1% of the median, so a
    flat or rounded history does not divide by zero)."""
    med = s.rolling(window, min_periods=max(3, window // 2)).median().shift(1)
    mad = (s - med).abs().rolling(window, min_periods=max(3, window // 2)).median().shift(1)
    floor = np.maximum(1e-3 * med.abs(), resolution(s)) + 1e-12
    return (s - med) / np.maximum(MAD_SCALE * mad, floor)


def _ended(s: Signals) -> bool:
    return s.overview.finished or s.overview.status == "completed"


def _spikes(s: Signals, t: Thresholds, concept: str, rule: str, area: str, *, both_ways: bool = False,
            label: str | None = None) -> list[Finding]:
    """Spikes by robust z. A warning only while the last one is current: fewer than
    `recovered_steps` steps logged after it and the run not finished. Else a dated note."""
    found = s.concept(concept)
    if found is None or len(found[1]) < 8:
        return []
    key, v = found
    z = robust_z(v, window_for(len(v), t))
    hit = (z.abs() if both_ways else z) > t.spike_z
    if not hit.any():
        return []
    steps = v.index[hit.to_numpy()]
    worst = z.abs().idxmax() if both_ways else z.idxmax()
    last = int(steps[-1])
    after = int((v.index > last).sum())
    recovered = after >= t.recovered_steps
    current = not recovered and not _ended(s)
    how = (f"recovered by step {int(v.index[v.index > last][t.recovered_steps - 1])}" if recovered
           else "at the run's end" if not current else "not yet recovered")
    return [Finding("warning" if current else "info", area, rule, key, int(steps[0]), last,
                    f"{label or concept} spiked {int(hit.sum())}× (worst {_four_digits(v[worst])} at step {worst}, "
                    f"robust z {_four_digits(z[worst])}); the last at step {last}, {how}",
                    {"spikes": int(hit.sum()), "worst_step": int(worst), "worst_value": float(v[worst]),
                     "z": float(z[worst]), "spike_steps": [int(x) for x in steps[:20]], "last_spike": last,
                     "steps_after": after, "recovered": recovered})]


# Stability ---------------------------------------------------------------------------------------
def entropy(s: Signals, t: Thresholds) -> list[Finding]:
    """Entropy collapsed below a share of its early level: a warning while it is still falling
    (the last window under half of the level three windows before), a dated note once it has
    settled low (converged policies are sharp); and entropy spikes."""
    found = s.concept("entropy")
    if found is None or len(found[1]) < 8:
        return []
    key, v = found
    w = window_for(len(v), t)
    early, recent = float(v.iloc[:w].median()), float(v.iloc[-w:].mean())
    out = []
    if early > 0 and recent < t.entropy_collapse * early:
        before = float(v.iloc[-4 * w:-3 * w].mean()) if len(v) >= 4 * w else early
        low = v.rolling(w).mean() < t.entropy_collapse * early
        since = int(low.idxmax())
        evidence = {"early": early, "recent": recent, "ratio": recent / early, "before": before, "low_since": since}
        if recent < 0.5 * before:
            out.append(Finding("warning", "stability", "entropy_collapse", key, _step(v, -w), _step(v, -1),
                               f"entropy collapsed: {_four_digits(recent)} over the last {w} steps vs {_four_digits(early)} early on, "
                               f"and still falling ({_four_digits(before)} {3 * w} steps before)", evidence))
        else:
            out.append(Finding("info", "stability", "entropy_low", key, since, _step(v, -1),
                               f"entropy settled low: {_four_digits(recent)} over the last {w} steps vs {_four_digits(early)} early on "
                               f"(below {t.entropy_collapse:.0%} of it since step {since})", evidence))
    return out + _spikes(s, t, "entropy", "entropy_spike", "stability")


def grad_norm(s: Signals, t: Thresholds) -> list[Finding]:
    return _spikes(s, t, "grad norm", "grad_norm_spike", "stability")


def loss(s: Signals, t: Thresholds) -> list[Finding]:
    return _spikes(s, t, "loss", "loss_spike", "stability", both_ways=True)


def mismatch_kl(s: Signals, t: Thresholds) -> list[Finding]:
    """Trainer vs inference policy KL (prime-rl mismatch_kl, verl rollout_corr/kl) rising."""
    found = s.concept("mismatch KL")
    if found is None or len(found[1]) < 8:
        return []
    key, v = found
    w = window_for(len(v), t)
    early, recent = float(v.iloc[:w].median()), float(v.iloc[-w:].mean())
    if recent > t.kl_rise * max(early, 1e-6) and recent > 1e-4:
        return [Finding("warning", "stability", "mismatch_kl_rising", key, _step(v, -w), _step(v, -1),
                        f"mismatch KL is rising: {_four_digits(recent)} over the last {w} steps vs {_four_digits(early)} early on",
                        {"early": early, "recent": recent})]
    return []


def non_finite(s: Signals, t: Thresholds) -> list[Finding]:
    """NaN / inf values in the metrics, and NaN counters (prime-rl loss/nan_count) above zero."""
    out = []
    tidy = s.tidy
    bad = tidy[~np.isfinite(tidy["value"].to_numpy(dtype="float64"))]
    for key, rows in bad.groupby(bad["metric"].astype(str), sort=True):
        steps = rows["step"].dropna()
        out.append(Finding("critical", "stability", "non_finite", key,
                           int(steps.min()) if len(steps) else None, int(steps.max()) if len(steps) else None,
                           f"{key} has {len(rows)} NaN/inf value(s)", {"count": len(rows)}))
    found = s.concept("nan count")
    if found is not None:
        key, v = found
        hit = v[v > 0]
        if len(hit):
            out.append(Finding("critical", "stability", "nan_count", key, int(hit.index[0]), int(hit.index[-1]),
                               f"{key} is above 0 at {len(hit)} step(s): NaN losses", {"steps": len(hit)}))
    return out


# Progress ----------------------------------------------------------------------------------------
def reward(s: Signals, t: Thresholds) -> list[Finding]:
    """A drop from the best window to the last, beyond the noise; a plateau over three windows."""
    found = s.concept("reward")
    if found is None or len(found[1]) < 8:
        return []
    key, v = found
    w = window_for(len(v), t)
    rolling = v.rolling(w).mean().dropna()
    noise = float(v.rolling(w).std().median()) if len(v) > w else float(v.std())
    peak_step = int(rolling.idxmax())
    peak, last = float(rolling.max()), float(rolling.iloc[-1])
    drop = peak - last
    if drop > max(2 * noise / np.sqrt(w), 0.05 * abs(peak), 1e-9) and peak_step < _step(v, -1):
        return [Finding("warning", "progress", "reward_drop", key, peak_step, _step(v, -1),
                        f"reward fell from {_four_digits(peak)} (window ending at step {peak_step}) to {_four_digits(last)} "
                        f"over the last {w} steps", {"peak": peak, "peak_step": peak_step, "recent": last})]
    if len(v) >= 4 * w:
        before = float(v.iloc[-3 * w:-2 * w].mean())
        if abs(last - before) < max(2 * noise / np.sqrt(w), 0.02 * abs(before), 1e-9):
            return [Finding("info", "progress", "reward_plateau", key, _step(v, -3 * w), _step(v, -1),
                            f"reward has plateaued around {_four_digits(last)} for the last {3 * w} steps",
                            {"recent": last, "before": before})]
    return []


def val_headline(s: Signals) -> val.Headline | None:
    """The headline validation statistic by step (`validation.headline`: the one Validation shows
    by default), else the "val score" alias over the metrics."""
    if len(s.validation) and "statistic" in s.validation:
        found = val.headline(s.validation)
        if found is not None:
            return found
    frame = aliases.canonical_frame(s.kind, s.tidy, ["val score"]) if len(s.tidy) else None
    if frame is None or frame.empty:
        return None
    frame = frame.dropna(subset=["step", "value"])
    if frame.empty:
        return None
    key = str(frame["source_key"].iloc[0])
    v = frame.groupby(frame["step"].astype("int64"))["value"].mean().sort_index().astype("float64")
    return val.Headline(key, key, v.rename_axis("step"), val.lower_is_better(key))


def val_series(s: Signals) -> tuple[str, pd.Series] | None:
    """(label, values by step) of the headline validation statistic."""
    found = val_headline(s)
    return (found.label, found.values) if found is not None else None


def val_score(s: Signals, t: Thresholds) -> list[Finding]:
    """The headline validation statistic's last event worse than its best beyond noise."""
    h = val_headline(s)
    if h is None or len(h.values) < 3:
        return []
    v = h.values
    best_step, best, last, last_step = h.best_step, h.best, float(v.iloc[-1]), int(v.index[-1])
    worse = last - best if h.lower_is_better else best - last
    if worse > max(0.02, 0.1 * abs(best)) and best_step != last_step:
        return [Finding("warning", "progress", "val_drop", h.label, best_step, last_step,
                        f"eval {h.label} {last:.3f} at step {last_step} is {'above' if h.lower_is_better else 'below'} "
                        f"its best {best:.3f} (step {best_step})",
                        {"best": best, "best_step": best_step, "last": last, "events": len(v),
                         "statistic": h.statistic})]
    return []


def lengths(s: Signals, t: Thresholds) -> list[Finding]:
    """Response length drifting (×2 up or down from early on) and a high truncation share."""
    out = []
    found = s.concept("response length")
    if found is not None and len(found[1]) >= 8:
        key, v = found
        w = window_for(len(v), t)
        early, recent = float(v.iloc[:w].mean()), float(v.iloc[-w:].mean())
        if early > 0 and (recent > 2 * early or recent < 0.5 * early):
            out.append(Finding("info", "progress", "length_drift", key, _step(v, -w), _step(v, -1),
                               f"response length drifted from {_four_digits(early)} to {_four_digits(recent)} tokens",
                               {"early": early, "recent": recent}))
    out += _recent_share(s, t, "truncation", "truncation", t.truncation, "of responses are truncated")
    return out


def _recent_share(s: Signals, t: Thresholds, concept: str, rule: str, limit: float, what: str, *,
                  complement: bool = False, area: str = "progress") -> list[Finding]:
    found = s.concept(concept)
    if found is None:
        return []
    key, v = found
    v = 1.0 - v if complement else v
    w = window_for(len(v), t)
    recent = float(v.iloc[-w:].mean())
    if recent > limit:
        severity = "critical" if rule == "errors" and recent > 0.5 else "warning"
        return [Finding(severity, area, rule, key, _step(v, -min(w, len(v))), _step(v, -1),
                        f"{recent:.0%} {what} (last {min(w, len(v))} steps; limit {limit:.0%})",
                        {"recent": recent, "limit": limit})]
    return []


def signal(s: Signals, t: Thresholds) -> list[Finding]:
    """Errored rollouts and rollouts with no training signal (zero advantage, all-equal groups)."""
    out = _recent_share(s, t, "error fraction", "errors", t.errors, "of rollouts errored")
    if s.concept("no-signal fraction") is not None:
        out += _recent_share(s, t, "no-signal fraction", "no_signal", t.no_signal,
                             "of groups carry no signal (zero advantage)")
    else:
        out += _recent_share(s, t, "trainable fraction", "no_signal", t.no_signal,
                             "of rollouts carry no training signal (not trainable)", complement=True)
    return out


# Performance -------------------------------------------------------------------------------------
def _recent_mean(s: Signals, t: Thresholds, concept: str) -> tuple[str, float, pd.Series] | None:
    found = s.concept(concept)
    if found is None or not len(found[1]):
        return None
    key, v = found
    return key, float(v.iloc[-window_for(len(v), t):].mean()), v


def waiting(s: Signals, t: Thresholds) -> list[Finding]:
    """Who waits on whom: the trainer on batches (→ more inference) or the orchestrator on the
    policy (→ more trainers); verl fully-async idle ratios say the same."""
    out = []
    pairs = [("wait for batch", "trainer step time", "trainer_waits",
              "the trainer waits on batches longer than it computes: add inference"),
             ("wait for policy", "orchestrator step time", "orchestrator_waits",
              "the orchestrator waits on the policy longer than it works: add trainers")]
    for wait_c, step_c, rule, advice in pairs:
        wait, step = _recent_mean(s, t, wait_c), _recent_mean(s, t, step_c)
        if wait is None or step is None:
            continue
        active = step[1] - wait[1]
        if wait[1] > max(active, 0.0) and wait[1] > 0:
            v = wait[2]
            out.append(Finding("warning", "performance", rule, wait[0], _step(v, -window_for(len(v), t)),
                               _step(v, -1), f"{advice} (wait {_four_digits(wait[1])} s vs active {_four_digits(active)} s per step)",
                               {"wait_s": wait[1], "active_s": active}))
    for concept, rule, advice in (("trainer idle ratio", "trainer_waits", "the trainer is idle most of the time: "
                                   "add rollout capacity"),
                                  ("rollouter idle ratio", "orchestrator_waits", "the rollouter is idle most of "
                                   "the time: add trainers")):
        found = _recent_mean(s, t, concept)
        if found is not None and found[1] > 0.5:
            v = found[2]
            out.append(Finding("warning", "performance", rule, found[0], _step(v, -window_for(len(v), t)),
                               _step(v, -1), f"{advice} (idle {found[1]:.0%})", {"idle_ratio": found[1]}))
    return out


def staleness(s: Signals, t: Thresholds) -> list[Finding]:
    out = []
    found = _recent_mean(s, t, "staleness")
    if found is not None and found[1] > t.staleness_steps:
        v = found[2]
        out.append(Finding("warning", "performance", "staleness", found[0], _step(v, -window_for(len(v), t)),
                           _step(v, -1), f"rollouts are {_four_digits(found[1])} steps off-policy on average",
                           {"recent": found[1], "limit": t.staleness_steps}))
    dropped = s.concept("dropped stale")
    total = s.concept("dropped stale total")
    if dropped is not None:
        key, v = dropped
        n = float(v.iloc[-window_for(len(v), t):].sum())
    elif total is not None:
        key, v = total
        tail = v.iloc[-window_for(len(v), t) - 1:]
        n = float(tail.iloc[-1] - tail.iloc[0])
    else:
        return out
    if n > 0:
        out.append(Finding("warning", "performance", "stale_dropped", key, _step(v, -window_for(len(v), t)),
                           _step(v, -1), f"{_four_digits(n)} stale rollouts dropped recently", {"dropped": n}))
    return out


def mfu(s: Signals, t: Thresholds) -> list[Finding]:
    found = s.concept("MFU")
    if found is None or len(found[1]) < 8:
        return []
    key, v = found
    w = window_for(len(v), t)
    rolling = v.rolling(w).mean().dropna()
    best, recent = float(rolling.max()), float(rolling.iloc[-1])
    if best > 0 and recent < t.mfu_drop * best:
        return [Finding("warning", "performance", "mfu_drop", key, _step(v, -w), _step(v, -1),
                        f"MFU dropped to {_four_digits(recent)} from {_four_digits(best)} (best window)", {"best": best, "recent": recent})]
    return []


RULES = [alive, entropy, grad_norm, loss, mismatch_kl, non_finite, reward, val_score, lengths, signal, waiting,
         staleness, mfu]
