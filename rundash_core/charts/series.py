"""Series of a panel, cut out of a run's tidy metrics frame.

A section of a 20k-step × 300-metric run draws ~20 keys out of ~6M tidy rows; `SeriesIndex` sorts
the rows by metric once per frame version (a radix sort of the category codes) so every key is a
contiguous slice afterwards, instead of a full-frame mask per key.
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rundash_core import cache

X_STEP, X_TIME = "step", "time"
X_FRACTION = "fraction"  # Compare: step / the run's last step, so runs of any length span 0 to 1


@dataclass(frozen=True)
class Series:
    """One line of a chart: a metric of one producer (or one run, in Compare) at full resolution."""

    metric: str
    producer: str
    label: str
    x: np.ndarray  # float64, ascending
    y: np.ndarray  # float64, may hold NaN
    x_kind: str  # "step", "time" (seconds since the run's first record), "fraction" or the x metric's name
    step: np.ndarray | None = None  # the step of each point (None when time-keyed)

    def __len__(self) -> int:
        return len(self.x)

    def frame(self) -> pd.DataFrame:
        """The undownsampled points, as the CSV download writes them."""
        cols = {"metric": self.metric, "producer": self.producer}
        if self.step is not None and self.x_kind != X_STEP:
            cols["step"] = self.step
        cols[{X_TIME: "time_s", X_FRACTION: "fraction_of_run"}.get(self.x_kind, self.x_kind)] = self.x
        cols["value"] = self.y
        return pd.DataFrame(cols)


_TOKENS = itertools.count(1)


class SeriesIndex:
    """The rows of each (metric, producer) of one tidy frame, found once and sliced per key."""

    def __init__(self, tidy: pd.DataFrame, *, t0: float | None = None):
        self.rows = len(tidy)
        self.token = next(_TOKENS)  # this index's identity (charts built from it are cached by it)
        self.source = None  # the run it indexes, when `series_index` built it (then charts are shared)
        metric = tidy["metric"]
        if not isinstance(metric.dtype, pd.CategoricalDtype):
            metric = metric.astype("category")
        codes = metric.cat.codes.to_numpy()
        self._code = {str(k): i for i, k in enumerate(metric.cat.categories)}
        self._order = np.argsort(codes, kind="stable")
        self._bounds = np.searchsorted(codes[self._order], np.arange(len(self._code) + 1))
        step = tidy["step"]
        self._has_step = step.notna().to_numpy()
        self._step = step.to_numpy(dtype="float64", na_value=np.nan)
        self._time = tidy["time"].to_numpy(dtype="float64")
        self._value = tidy["value"].to_numpy(dtype="float64")
        prod = tidy["producer"]
        if not isinstance(prod.dtype, pd.CategoricalDtype):
            prod = prod.astype("category")
        self._prod_codes = prod.cat.codes.to_numpy()
        self._producers = [str(p) for p in prod.cat.categories]
        finite = self._time[np.isfinite(self._time)]
        # relative time counts from the run's first record (`t0` when the caller knows it better)
        self.t0 = t0 if t0 is not None else (float(finite.min()) if len(finite) else None)
        self.time_estimated = False  # times summed from step durations, not logged (`view.estimated_times`)
        steps = self._step[self._has_step]
        self.last_step = float(steps.max()) if len(steps) else None  # "fraction of run" divides by it

    @property
    def metrics(self) -> list[str]:
        return list(self._code)

    def positions(self, metric: str) -> np.ndarray:
        """Row positions of `metric`, in frame order (file order for one producer)."""
        code = self._code.get(metric)
        if code is None:
            return np.empty(0, dtype=np.intp)
        return self._order[self._bounds[code]:self._bounds[code + 1]]

    def producers_of(self, metric: str) -> list[str]:
        pos = self.positions(metric)
        return [self._producers[c] for c in np.unique(self._prod_codes[pos])] if len(pos) else []

    def raw(self, metric: str, producer: str | None = None):
        """(has_step, step, time, value) arrays of one metric (optionally one producer)."""
        pos = self.positions(metric)
        if producer is not None and len(pos):
            pos = pos[self._prod_codes[pos] == self._producers.index(producer)]
        return self._has_step[pos], self._step[pos], self._time[pos], self._value[pos]

    def series(self, metric: str, *, x: str = X_STEP, label: str | None = None) -> list[Series]:
        """One `Series` per producer logging `metric`, against `x` ("step", "time" or a metric).
        A metric with only time-keyed rows (prime-rl `inference/*`) plots against time."""
        producers = self.producers_of(metric)
        out = []
        for prod in producers:
            name = label or (metric if len(producers) == 1 else f"{metric} ({prod})")
            s = self._one(metric, prod, x, name)
            if s is not None:
                out.append(s)
        return out

    def _one(self, metric: str, prod: str, x: str, label: str) -> Series | None:
        has_step, step, time, value = self.raw(metric, prod)
        if x == X_STEP and has_step.any():
            keep = has_step
            return _sorted(metric, prod, label, step[keep], value[keep], X_STEP, step[keep])
        if x in (X_STEP, X_TIME) or not has_step.any():
            keep = np.isfinite(time)
            if not keep.any() or self.t0 is None:
                return None
            st = np.where(has_step, step, np.nan)[keep]
            return _sorted(metric, prod, label, time[keep] - self.t0, value[keep], X_TIME,
                           None if np.isnan(st).all() else st)
        xs = self._x_by_step(x, prod)
        if xs is None:
            return None
        steps = step[has_step]
        xv = _lookup(xs, steps)
        keep = np.isfinite(xv)
        return _sorted(metric, prod, label, xv[keep], value[has_step][keep], x, steps[keep])

    def _x_by_step(self, metric: str, prod: str):
        """(steps, values) of the x-axis metric, from the same producer when it logs it, else any."""
        for producer in (prod, None):
            if producer is not None and producer not in self.producers_of(metric):
                continue
            has_step, step, _, value = self.raw(metric, producer)
            if has_step.any():
                steps, vals = step[has_step], value[has_step]
                order = np.argsort(steps, kind="stable")
                steps, vals = steps[order], vals[order]
                last = np.r_[steps[1:] != steps[:-1], True]  # last write of a step wins
                return steps[last], vals[last]
        return None


def _lookup(table, steps: np.ndarray) -> np.ndarray:
    keys, vals = table
    at = np.searchsorted(keys, steps)
    at_c = np.minimum(at, len(keys) - 1)
    hit = (at < len(keys)) & (keys[at_c] == steps)
    return np.where(hit, vals[at_c], np.nan)


def _sorted(metric, prod, label, x, y, kind, step) -> Series:
    if len(x) > 1 and (np.diff(x) < 0).any():
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
        step = step[order] if step is not None else None
    return Series(metric, prod, label, np.asarray(x, dtype="float64"), np.asarray(y, dtype="float64"), kind, step)


def _index_size(ix: SeriesIndex) -> int:
    return ix.rows * 40 + 4096


def series_index(run) -> SeriesIndex:
    """The index of a run's current metrics, shared through the process cache and rebuilt when the
    run's `metrics_version()` changes (its store grew or was re-read)."""
    version = run.metrics_version()  # before the frame: an index is never older than its stamp
    source = (os.path.realpath(run.path), run.run_id)

    def build() -> SeriesIndex:
        index = SeriesIndex(run.metrics())
        index.source = source
        return index

    return cache.shared.current(("series-index", *source), version, build, size=_index_size)
