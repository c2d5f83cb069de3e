"""Merged metric rows of one metrics JSONL file, kept as per-producer wide arrays.

Why wide arrays: a trainer writes several partial rows per step and the merge rule is "last value
in file order wins, per (producer, step, key)". Keeping one float64 matrix per producer (rows =
steps, columns = keys, NaN = not logged) makes that merge a vectorised pass at cold load and an
O(appended rows) update on refresh; the tidy frame is derived from the matrices on demand (one
ravel and mask per producer) and cached until the next change.

Step-keyed rows are merged per (producer, step); time-keyed rows (`step: null`) are kept one per
row with their time. Producers are never merged with each other.
"""
from __future__ import annotations

import re
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .io.jsonl import JsonlTail, LineProblems

_COW = int(pd.__version__.split(".")[0]) >= 3 or pd.options.mode.copy_on_write is True
_RESERVED = ("step", "time", "_timestamp", "producer")
_TRAINER_KEY = re.compile(
    r"^(perf|optim|loss|entropy|system|mismatch_kl|kl_ent_ratio|is_masked|masked_|unmasked_|max_vio|routing_|ref_kl|val)[/_]?")
_ORCH_KEY = re.compile(r"^(train|batch|off_policy|curriculum|eval|progress)/")


class _Block:
    """A growable float64 matrix with one row per step (or per time-keyed row)."""

    def __init__(self):
        self.keys: list[str] = []
        self.key_index: dict[str, int] = {}
        self.n = 0
        self.values = np.empty((0, 0))
        self.steps = np.empty(0, dtype=np.int64)
        self.tmax = np.empty(0)
        self.tmin = np.empty(0)
        self.step_row: dict[int, int] = {}

    def _reserve(self, rows: int, cols: int) -> None:
        cap_r, cap_c = self.values.shape
        if rows <= cap_r and cols <= cap_c:
            return
        new_r = max(rows, cap_r + cap_r // 2, 16) if rows > cap_r else cap_r
        new_c = max(cols, cap_c + cap_c // 4, 8) if cols > cap_c else cap_c
        values = np.full((new_r, new_c), np.nan)
        values[: self.n, :cap_c] = self.values[: self.n]
        self.values = values
        for name in ("steps", "tmax", "tmin"):
            old = getattr(self, name)
            grown = np.full(new_r, -1 if name == "steps" else np.nan, dtype=old.dtype)
            grown[: self.n] = old[: self.n]
            setattr(self, name, grown)

    def columns_for(self, keys: list[str]) -> np.ndarray:
        for k in keys:
            if k not in self.key_index:
                self.key_index[k] = len(self.keys)
                self.keys.append(k)
        self._reserve(self.n, len(self.keys))
        return np.array([self.key_index[k] for k in keys], dtype=np.int64)

    def append_rows(self, count: int) -> np.ndarray:
        self._reserve(self.n + count, len(self.keys))
        rows = np.arange(self.n, self.n + count)
        self.n += count
        return rows

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + 3 * self.steps.nbytes


def _numeric(col: pa.ChunkedArray) -> np.ndarray | None:
    t = col.type
    if pa.types.is_null(t):
        return np.full(len(col), np.nan)
    if pa.types.is_boolean(t):
        col = pc.cast(col, pa.float64())
    elif not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None
    return col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def _last_per_group(values: np.ndarray, group: np.ndarray, ngroups: int) -> np.ndarray:
    """For each group, the last non-NaN value in row order (NaN when the group has none)."""
    pos = np.flatnonzero(~np.isnan(values))
    out = np.full(ngroups, np.nan)
    if pos.size == 0:
        return out
    last = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(last, group[pos], pos)
    has = last >= 0
    out[has] = values[last[has]]
    return out


def coerce_metric_row(row: dict, line: int, problems: LineProblems) -> dict | None:
    """Keep what a metrics row may hold (numbers, step, producer); count the rest."""
    out = {}
    for k, v in row.items():
        if k == "producer":
            out[k] = v if isinstance(v, str) else None
        elif v is None or isinstance(v, (int, float)):
            out[k] = float(v) if isinstance(v, bool) else v
        else:
            problems.add(f"non-numeric value for key {k!r} (ignored)", line)
    step = out.get("step")
    if isinstance(step, float):
        out["step"] = int(step) if step == step and abs(step) != float("inf") else None
    return out


class MetricStore:
    """Follows one metrics JSONL file and keeps its merged rows; thread-safe."""

    def __init__(self, path: str, *, default_producer: str = "trainer", timed_producer: str = "orch",
                 infer_producer: bool = True):
        self.tail = JsonlTail(path, coerce_row=coerce_metric_row)
        self.default_producer = default_producer
        self.timed_producer = timed_producer
        self.infer_producer = infer_producer  # False: every legacy row is default_producer's (sft, eval)
        self.lock = threading.RLock()
        self.version = 0
        self._reset()

    def _reset(self) -> None:
        self.stepped: dict[str, _Block] = {}
        self.timed: dict[str, _Block] = {}
        self.first_time: float | None = None
        self.last_time: float | None = None
        self.restarts: list[tuple[str, int]] = []  # (producer, step) where the step went back
        self._max_step: dict[str, int] = {}
        self._tidy: tuple[int, pd.DataFrame] | None = None
        self.ignored_columns: dict[str, str] = {}

    @property
    def path(self) -> str:
        return self.tail.path

    @property
    def nbytes(self) -> int:
        n = sum(b.nbytes for b in (*self.stepped.values(), *self.timed.values()))
        if self._tidy is not None:
            n += int(self._tidy[1].memory_usage(index=False, deep=False).sum())
        return n

    def refresh(self) -> bool:
        """Parse what was appended since the last call; True when anything changed."""
        with self.lock:
            result = self.tail.poll()
            if result is None:
                return False
            if result.reset:
                self._reset()
            if result.table.num_rows:
                self._ingest(result.table)
            self.version += 1
            return True

    # Ingest -------------------------------------------------------------------------------------
    def _ingest(self, table: pa.Table) -> None:
        n = table.num_rows
        names = table.column_names
        step = self._steps(table)
        time = self._times(table)
        producer = self._producers(table, step)
        metric_cols: dict[str, np.ndarray] = {}
        for name in names:
            if name in _RESERVED:
                continue
            arr = _numeric(table.column(name))
            if arr is None:
                self.ignored_columns[name] = str(table.column(name).type)
                continue
            metric_cols[name] = arr
        finite_t = time[~np.isnan(time)]
        if finite_t.size:
            self.first_time = float(finite_t[0]) if self.first_time is None else self.first_time
            self.last_time = float(finite_t.max()) if self.last_time is None else max(self.last_time, float(finite_t.max()))
        stepped_mask = step >= 0
        for prod in pd.unique(producer):
            sel = producer == prod
            self._merge_stepped(str(prod), np.flatnonzero(sel & stepped_mask), step, time, metric_cols)
            self._append_timed(str(prod), np.flatnonzero(sel & ~stepped_mask), time, metric_cols)
        del n

    def _steps(self, table: pa.Table) -> np.ndarray:
        """Step per row; -1 for time-keyed rows (step null or absent)."""
        if "step" not in table.column_names:
            return np.full(table.num_rows, -1, dtype=np.int64)
        col = table.column("step")
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            return np.full(table.num_rows, -1, dtype=np.int64)
        arr = pc.fill_null(pc.cast(col, pa.float64()), -1.0).to_numpy()
        arr = np.where(np.isfinite(arr) & (arr >= 0), arr, -1)
        return arr.astype(np.int64)

    @staticmethod
    def _times(table: pa.Table) -> np.ndarray:
        for name in ("time", "_timestamp"):
            if name in table.column_names:
                arr = _numeric(table.column(name))
                if arr is not None:
                    return arr
        return np.full(table.num_rows, np.nan)

    def _producers(self, table: pa.Table, step: np.ndarray) -> np.ndarray:
        n = table.num_rows
        if "producer" in table.column_names and pa.types.is_string(table.column("producer").type):
            prod = np.asarray(table.column("producer").to_pylist(), dtype=object)
        else:
            prod = np.full(n, None, dtype=object)
        missing = np.array([p is None for p in prod]) if n else np.zeros(0, bool)
        if missing.any():
            prod[missing] = self._infer_producers(table, missing, step)
        return prod

    def _infer_producers(self, table: pa.Table, rows: np.ndarray, step: np.ndarray) -> np.ndarray:
        """Legacy rows without `producer` (prime-rl spec 4.6)."""
        if not self.infer_producer:  # rule 1: an sft run's rows are all the trainer's
            return np.full(int(rows.sum()), self.default_producer, dtype=object)
        has_trainer = np.zeros(table.num_rows, bool)
        has_orch = np.zeros(table.num_rows, bool)
        for name in table.column_names:
            if name in _RESERVED:
                continue
            valid = pc.is_valid(table.column(name)).to_numpy(zero_copy_only=False)
            if _TRAINER_KEY.match(name):
                has_trainer |= valid
            elif _ORCH_KEY.match(name):
                has_orch |= valid
        out = np.where(has_trainer, "trainer", np.where(has_orch, "orch", self.default_producer))
        out = np.where(step < 0, self.timed_producer, out)
        return out[rows].astype(object)

    def _merge_stepped(self, prod: str, rows: np.ndarray, step, time, cols: dict[str, np.ndarray]) -> None:
        if rows.size == 0:
            return
        block = self.stepped.setdefault(prod, _Block())
        s = step[rows]
        self._note_restarts(prod, s)
        uniq, inverse = np.unique(s, return_inverse=True)
        g = len(uniq)
        keys = [k for k, v in cols.items() if not np.isnan(v[rows]).all()]
        col_idx = block.columns_for(keys)
        targets = np.array([block.step_row.get(int(x), -1) for x in uniq], dtype=np.int64)
        new = targets < 0
        if new.any():
            new_rows = block.append_rows(int(new.sum()))
            targets[new] = new_rows
            block.steps[new_rows] = uniq[new]
            for st, r in zip(uniq[new].tolist(), new_rows.tolist()):
                block.step_row[st] = r
        for k, c in zip(keys, col_idx):
            merged = _last_per_group(cols[k][rows], inverse, g)
            ok = ~np.isnan(merged)
            block.values[targets[ok], c] = merged[ok]
        t = time[rows]
        tmax = np.full(g, -np.inf)
        np.maximum.at(tmax, inverse, np.nan_to_num(t, nan=-np.inf))
        tmin = np.full(g, np.inf)
        np.minimum.at(tmin, inverse, np.nan_to_num(t, nan=np.inf))
        old_max, old_min = block.tmax[targets], block.tmin[targets]
        block.tmax[targets] = np.fmax(old_max, np.where(np.isfinite(tmax), tmax, np.nan))
        block.tmin[targets] = np.fmin(old_min, np.where(np.isfinite(tmin), tmin, np.nan))

    def _note_restarts(self, prod: str, steps: np.ndarray) -> None:
        prev = self._max_step.get(prod, -1)
        running = np.maximum.accumulate(np.concatenate([[prev], steps]))
        back = np.flatnonzero(steps < running[:-1])
        starts = back[np.concatenate([[True], np.diff(back) > 1])] if back.size else back
        self.restarts.extend((prod, int(steps[i])) for i in starts)
        self._max_step[prod] = int(running[-1])

    def _append_timed(self, prod: str, rows: np.ndarray, time, cols: dict[str, np.ndarray]) -> None:
        if rows.size == 0:
            return
        block = self.timed.setdefault(prod, _Block())
        keys = [k for k, v in cols.items() if not np.isnan(v[rows]).all()]
        col_idx = block.columns_for(keys)
        new_rows = block.append_rows(rows.size)
        for k, c in zip(keys, col_idx):
            block.values[new_rows, c] = cols[k][rows]
        block.tmax[new_rows] = time[rows]
        block.tmin[new_rows] = time[rows]

    # Views --------------------------------------------------------------------------------------
    def max_step(self) -> int | None:
        steps = [int(b.steps[: b.n].max()) for b in self.stepped.values() if b.n]
        return max(steps) if steps else None

    def min_step(self) -> int | None:
        steps = [int(b.steps[: b.n].min()) for b in self.stepped.values() if b.n]
        return min(steps) if steps else None

    def producers(self) -> list[str]:
        return list(dict.fromkeys([*self.stepped, *self.timed]))

    def tidy(self) -> pd.DataFrame:
        """One row per (producer, step, metric) plus one per time-keyed (row, metric)."""
        with self.lock:
            if self._tidy is None or self._tidy[0] != self.version:
                self._tidy = (self.version, self._build_tidy())
            # a copy: callers may modify what they get without touching the cached frame (cheap
            # under copy-on-write, which pandas 3 always uses)
            return self._tidy[1].copy(deep=not _COW)

    def _build_tidy(self) -> pd.DataFrame:
        categories: dict[str, int] = {}
        parts = []
        for timed, blocks in ((False, self.stepped), (True, self.timed)):
            for prod, b in blocks.items():
                n, k = b.n, len(b.keys)
                if n == 0 or k == 0:
                    continue
                flat = b.values[:n, :k].T.ravel()
                keep = ~np.isnan(flat)
                codes = np.array([categories.setdefault(key, len(categories)) for key in b.keys], dtype=np.int32)
                parts.append((
                    prod,
                    flat[keep],
                    np.repeat(codes, n)[keep],
                    None if timed else np.tile(b.steps[:n], k)[keep],
                    np.tile(b.tmax[:n], k)[keep],
                ))
        return _tidy_frame(parts, list(categories), self.producers())

    def wide(self, producer: str, metrics: list[str] | None = None) -> pd.DataFrame:
        """Merged step rows of one producer: step, time, time_first, one column per metric."""
        with self.lock:
            b = self.stepped.get(producer)
            if b is None or b.n == 0:
                return pd.DataFrame({"step": pd.array([], dtype="Int64"), "time": []})
            keys = b.keys if metrics is None else [m for m in metrics if m in b.key_index]
            idx = [b.key_index[k] for k in keys]
            order = np.argsort(b.steps[: b.n], kind="stable")
            data = {"step": b.steps[: b.n][order], "time": b.tmax[: b.n][order],
                    "time_first": b.tmin[: b.n][order]}
            vals = b.values[: b.n][order][:, idx]
            frame = pd.DataFrame(data)
            frame = pd.concat([frame, pd.DataFrame(vals, columns=keys)], axis=1)
            frame["step"] = frame["step"].astype("Int64")
            return frame


def _tidy_frame(parts, categories: list[str], producers: list[str]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({
            "step": pd.array([], dtype="Int64"), "time": np.empty(0), "metric": pd.Categorical([]),
            "value": np.empty(0), "producer": pd.Categorical([]),
        })
    prod_codes = {p: i for i, p in enumerate(producers)}
    values = np.concatenate([p[1] for p in parts])
    codes = np.concatenate([p[2] for p in parts])
    steps = np.concatenate([p[3] if p[3] is not None else np.zeros(len(p[1]), np.int64) for p in parts])
    step_na = np.concatenate([np.full(len(p[1]), p[3] is None) for p in parts])
    times = np.concatenate([p[4] for p in parts])
    prod = np.concatenate([np.full(len(p[1]), prod_codes[p[0]], dtype=np.int16) for p in parts])
    return pd.DataFrame({
        "step": pd.arrays.IntegerArray(steps, step_na),
        "time": times,
        "metric": pd.Categorical.from_codes(codes, categories=categories),
        "value": values,
        "producer": pd.Categorical.from_codes(prod, categories=producers),
    }, copy=False)


def empty_tidy() -> pd.DataFrame:
    """The tidy metrics frame of a run with no metric rows (same columns and dtypes)."""
    return _tidy_frame([], [], [])
