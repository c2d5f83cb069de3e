"""Health inputs built in memory: a tidy metrics frame from plain series, the `Signals` the checks
read, seeded noise around a level; and the check-in entry's fields as the monitor-run runbook
lays them out."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from rundash_core.health.checks import Signals
from rundash_core.overview import Overview

T0 = 1_900_000_000.0
DT = 10.0  # seconds per step


def tidy(series: dict, *, dt: float = DT) -> pd.DataFrame:
    """A tidy metrics frame: key -> values (steps 1..n) or (producer, values)."""
    rows = []
    for key, spec in series.items():
        producer, values = spec if isinstance(spec, tuple) else ("trainer", spec)
        for i, v in enumerate(values, start=1):
            rows.append({"step": i, "time": T0 + i * dt, "metric": key, "value": float(v), "producer": producer})
    frame = pd.DataFrame(rows, columns=["step", "time", "metric", "value", "producer"])
    return frame.astype({"step": "Int64", "time": "float64", "value": "float64", "metric": "category",
                         "producer": "category"})


def signals(series: dict, *, kind: str = "prime-rl", status: str = "completed", now: float | None = None,
            max_steps: int | None = None, validation: pd.DataFrame | None = None, finished: bool = True) -> Signals:
    n = max((len(v[1] if isinstance(v, tuple) else v) for v in series.values()), default=0)
    ov = Overview(run_id="r", name="r", kind=kind, path="/r", status=status, step=n or None,
                  max_steps=max_steps if max_steps is not None else (n or None), last_step=n or None,
                  finished=finished)
    return Signals(kind=kind, overview=ov, tidy=tidy(series), validation=validation,
                   now=now if now is not None else T0 + (n + 1) * DT)


def noise(n: int, level: float, scale: float = 0.02, seed: int = 0) -> np.ndarray:
    return level + np.random.default_rng(seed).normal(0, scale, n)


HEADER = re.compile(r"^## \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$")
FIELDS = ("**Run**: ", "**Step**: ", "**Health**: ", "**Progress**: ", "**Stability**: ", "**Performance**: ", "**Notes**: ")


def checkin_fields(md: str) -> dict[str, str]:
    """The entry's `**Field**: value` lines by field name (asserting the monitor-run layout)."""
    lines = md.splitlines()
    assert HEADER.match(lines[0]), lines[0]
    found = {}
    for line in lines[1:]:
        for f in FIELDS:
            if line.startswith(f):
                found[f.strip("*: ")] = line[len(f):]
    assert list(found) == [f.strip("*: ") for f in FIELDS]  # every field, in the runbook's order
    return found
