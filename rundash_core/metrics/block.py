"""Growable metric matrices, and the append-only log the tidy frame is a view of.

A `Block` holds one producer's merged rows: one row per step (or per time-keyed row), one column
per key, NaN where a key was not logged, plus the time each cell was written. Storage is
column-major with spare capacity (rows and columns), so appending rows is cheap and a whole-block
scan is contiguous: spare cells are NaN and drop out with the gaps.

A `TidyLog` holds the tidy rows (one per logged cell) in arrays with spare capacity. New cells are
appended; rows already handed out are never written again, so `frame()` is a zero-copy view and a
refresh costs what was appended. Only when a cell is overwritten (the same step and key logged
twice, as after a resume) is the log rebuilt from the blocks.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


class Block:
    def __init__(self, keyed_by_step: bool):
        self.keyed_by_step = keyed_by_step
        self.keys: list[str] = []
        self.key_index: dict[str, int] = {}
        self.n = 0
        self.values = np.empty((0, 0), order="F")
        self.cell_time = np.empty((0, 0), order="F")  # when each cell's value was written
        self.steps = np.empty(0, dtype=np.int64)
        self.tmax = np.empty(0)
        self.tmin = np.empty(0)
        self.step_row: dict[int, int] = {}

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.cell_time.nbytes + 3 * self.steps.nbytes

    def _reserve(self, rows: int, cols: int) -> None:
        cap_r, cap_c = self.values.shape
        if rows <= cap_r and cols <= cap_c:
            return
        new_r = max(rows, cap_r + cap_r // 2, 16) if rows > cap_r else cap_r
        new_c = max(cols, cap_c + cap_c // 4, 8) if cols > cap_c else cap_c
        for name in ("values", "cell_time"):
            grown = np.full((new_r, new_c), np.nan, order="F")
            grown[: self.n, :cap_c] = getattr(self, name)[: self.n]
            setattr(self, name, grown)
        for name, fill in (("steps", -1), ("tmax", np.nan), ("tmin", np.nan)):
            old = getattr(self, name)
            grown = np.full(new_r, fill, dtype=old.dtype)
            grown[: self.n] = old[: self.n]
            setattr(self, name, grown)

    def columns_for(self, keys) -> np.ndarray:
        """Column index of each key, adding columns for new keys."""
        for k in keys:
            if k not in self.key_index:
                self.key_index[k] = len(self.keys)
                self.keys.append(k)
        self._reserve(self.n, len(self.keys))
        return np.fromiter((self.key_index[k] for k in keys), dtype=np.int64, count=len(keys))

    def append_rows(self, count: int) -> np.ndarray:
        self._reserve(self.n + count, len(self.keys))
        rows = np.arange(self.n, self.n + count)
        self.n += count
        return rows

    def rows_for_steps(self, steps: np.ndarray) -> np.ndarray:
        """Row of each (unique) step, appending rows for steps not seen before."""
        rows = np.fromiter((self.step_row.get(s, -1) for s in steps.tolist()), dtype=np.int64, count=len(steps))
        new = rows < 0
        if new.any():
            added = self.append_rows(int(new.sum()))
            rows[new] = added
            self.steps[added] = steps[new]
            self.step_row.update(zip(steps[new].tolist(), added.tolist()))
        return rows

    def flat(self, name: str = "values") -> np.ndarray:
        """A writable 1-D view of a cell matrix in storage order (cell = column * capacity + row)."""
        return getattr(self, name).T.reshape(-1)

    def logged_cells(self) -> np.ndarray:
        """Storage index of every logged cell, column after column."""
        k = len(self.keys)
        region = self.flat()[: k * self.values.shape[0]]
        return np.flatnonzero(~np.isnan(region))

    def wide(self, keys: list[str]) -> pd.DataFrame:
        """step, time, time_first and one column per key, one row per step in step order."""
        order = np.argsort(self.steps[: self.n], kind="stable")
        frame = pd.DataFrame({
            "step": pd.array(self.steps[: self.n][order], dtype="Int64"),
            "time": self.tmax[: self.n][order],
            "time_first": self.tmin[: self.n][order],
        })
        cols = [self.key_index[k] for k in keys]
        values = self.values[: self.n][order][:, cols]
        return pd.concat([frame, pd.DataFrame(values, columns=keys)], axis=1)


class TidyLog:
    """Tidy rows (step, time, metric, value, producer) in growable arrays; append-only."""

    FIELDS = (("step", np.int64), ("step_na", bool), ("time", np.float64), ("metric", np.int32),
              ("value", np.float64), ("producer", np.int16))

    def __init__(self):
        self.n = 0
        self.arrays = {name: np.empty(0, dtype=dt) for name, dt in self.FIELDS}
        self.metrics: dict[str, int] = {}  # metric name -> category code
        self.producers: dict[str, int] = {}

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def codes(self, keys: list[str]) -> np.ndarray:
        return np.fromiter((self.metrics.setdefault(k, len(self.metrics)) for k in keys), dtype=np.int32,
                           count=len(keys))

    def reserve(self, m: int) -> None:
        """Room for m more rows; growing copies into new arrays, so frames already handed out
        keep the old ones untouched."""
        cap = len(self.arrays["value"])
        if self.n + m > cap:
            new_cap = max(self.n + m, cap + cap // 2, 1024)
            for name, dt in self.FIELDS:
                grown = np.empty(new_cap, dtype=dt)
                grown[: self.n] = self.arrays[name][: self.n]
                self.arrays[name] = grown

    def _slot(self, m: int) -> slice:
        self.reserve(m)
        self.n += m
        return slice(self.n - m, self.n)

    def _fill(self, sl: slice, producer: str, value, time, metric, step) -> None:
        a = self.arrays
        a["value"][sl] = value
        a["time"][sl] = time
        a["metric"][sl] = metric
        a["producer"][sl] = self.producers.setdefault(producer, len(self.producers))
        a["step_na"][sl] = step is None
        a["step"][sl] = 0 if step is None else step

    def append_cells(self, block: Block, producer: str, cells: np.ndarray) -> None:
        """Append the tidy rows of a block's cells (storage indices)."""
        if len(cells):
            col, row = np.divmod(cells, block.values.shape[0])
            self._fill(self._slot(len(cells)), producer, block.flat()[cells], block.flat("cell_time")[cells],
                       self.codes(block.keys)[col], block.steps[row] if block.keyed_by_step else None)

    def append_matrix(self, values: np.ndarray, codes: np.ndarray, times: np.ndarray,
                      steps: np.ndarray | None, producer: str) -> None:
        """Append the logged cells of a (rows × keys) matrix: row r has times[r] and steps[r]."""
        n, k = values.shape
        present = ~np.isnan(values)
        if present.all():  # the usual case: plain repeats, no masking
            cols = (values.ravel(), np.repeat(times, k), np.tile(codes, n),
                    None if steps is None else np.repeat(steps, k))
        else:
            cols = (values[present], np.broadcast_to(times[:, None], (n, k))[present],
                    np.broadcast_to(codes, (n, k))[present],
                    None if steps is None else np.broadcast_to(steps[:, None], (n, k))[present])
        if len(cols[0]):
            self._fill(self._slot(len(cols[0])), producer, *cols)

    def frame(self) -> pd.DataFrame:
        """The tidy frame: views of rows [0, n), which are never written again."""
        a = {name: arr[: self.n] for name, arr in self.arrays.items()}
        return pd.DataFrame({
            "step": pd.arrays.IntegerArray(a["step"], a["step_na"]),
            "time": a["time"],
            "metric": pd.Categorical.from_codes(a["metric"], categories=list(self.metrics), validate=False),
            "value": a["value"],
            "producer": pd.Categorical.from_codes(a["producer"], categories=list(self.producers), validate=False),
        }, copy=False)
