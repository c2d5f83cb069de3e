"""Compact numbers of a run for terminals, agents and LLMs: the key metrics of each chart section
(latest value) and the numbers of one metric (`series_numbers`: first / last / min / max / trend
over windows).

Sections are the Metrics page's (`charts.sections`), so "the key metrics of a section" are the
first key of each of its first panels: what a person looks at first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from rundash_core.charts import sections as sections_mod
from rundash_core.health.checks import Signals


@dataclass(frozen=True)
class KeyMetric:
    section: str
    metric: str
    step: int | None
    value: float | None


def key_metrics(signals: Signals, *, panels_per_section: int = 4) -> list[KeyMetric]:
    """Latest value of the first key of each of a section's first panels, section by section."""
    ov = signals.overview
    try:
        secs = sections_mod.sections_for(signals.kind, ov.flavor, signals.keys, train_envs=ov.train_envs,
                                          eval_envs=ov.eval_envs)
    except ValueError:  # a kind without chart sections
        return []
    out = []
    for sec in secs:
        for panel in [p for p in sec.panels if p.x == "step"][:panels_per_section]:
            key = panel.keys[0]
            s = signals.series(key)
            s = s[s.notna()]
            last = (int(s.index[-1]), float(s.iloc[-1])) if len(s) else (None, None)
            out.append(KeyMetric(sec.title, key, *last))
    return out


def trend(s: pd.Series, windows: int = 4) -> list[float]:
    """Mean of each of `windows` equal runs of the series, in step order: its shape in a few numbers."""
    s = s.dropna()
    if s.empty:
        return []
    n = min(windows, len(s))
    size = math.ceil(len(s) / n)
    return [float(s.iloc[i:i + size].mean()) for i in range(0, len(s), size)]


def series_numbers(s: pd.Series) -> dict:
    """first / last / min / max (with their steps) and the window trend of one per-step series."""
    s = s.dropna()
    if s.empty:
        return {}
    return {"steps": f"{int(s.index[0])}–{int(s.index[-1])}", "n": len(s), "first": float(s.iloc[0]),
            "last": float(s.iloc[-1]), "min": float(s.min()), "min_step": int(s.idxmin()), "max": float(s.max()),
            "max_step": int(s.idxmax()), "trend": trend(s)}
