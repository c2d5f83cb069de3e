"""Merged metric rows of one metrics JSONL file (prime-rl `metrics.jsonl`, verl's file logger).

Why this shape: a trainer writes several partial rows per step and the merge rule is "last value
in file order wins, per (producer, step, key)". Rows of one writer repeat a few key sets, so new
rows are grouped by key set and each group becomes one dense value matrix (no sparse wide table);
the merge is a vectorised scatter into one `Block` per producer (rows = steps), where a cell
written twice keeps the value of the later line. A refresh ingests only appended rows; the tidy
frame is derived from the blocks on demand and cached until the next change.

Step-keyed rows are merged per (producer, step); time-keyed rows (`step: null`) are kept one per
row with their time. Producers are never merged with each other.
"""
from __future__ import annotations

import itertools
import operator
import re
import threading
from collections.abc import Callable

import numpy as np
import pandas as pd

from rundash_core import cache
from rundash_core.io.jsonl import JsonlTail
from rundash_core.metrics.block import Block, TidyLog
from rundash_core.numbers import finite_float

_RESERVED = ("step", "time", "_timestamp", "producer")
_TRAINER_KEY = re.compile(
    r"^(perf|optim|loss|entropy|system|mismatch_kl|kl_ent_ratio|is_masked|masked_|unmasked_|max_vio|routing_|ref_kl|val)[/_]?")
_ORCH_KEY = re.compile(r"^(train|batch|off_policy|curriculum|eval)/|^progress/")


def _step_of(value) -> int:
    """A row's step, or -1 for a time-keyed row (null, absent, or not a whole number)."""
    if type(value) is int:
        return value if 0 <= value < 1 << 62 else -1
    if type(value) is float and value.is_integer() and 0 <= value < 1 << 62:  # orjson reads 10**30 as 1e30
        return int(value)
    return -1


def _time_of(value) -> float:
    return float(value) if type(value) in (int, float) else np.nan


def _column(chosen: list[dict], shape: tuple, key: str, dtype, convert) -> np.ndarray:
    """One reserved field (step, time) of rows sharing a key set, as an array."""
    if key not in shape:
        return np.full(len(chosen), convert(None), dtype=dtype)
    raw = list(map(operator.itemgetter(key), chosen))
    plain = (int,) if dtype is np.int64 else (int, float)
    if all(type(v) in plain for v in raw):  # the usual case: one conversion in C
        try:
            arr = np.array(raw, dtype=dtype)
            return np.where(arr >= 0, arr, -1) if dtype is np.int64 else arr
        except OverflowError:
            pass
    return np.fromiter(map(convert, raw), dtype=dtype, count=len(raw))


_SERIALS = itertools.count(1)
MAX_KEYS = 20_000  # distinct metric names one run may have (real runs: a few thousand)


class MetricStore:
    """Follows one metrics JSONL file and keeps its merged rows; thread-safe."""

    def __init__(self, path: str, *, default_producer: str = "trainer", timed_producer: str = "orch",
                 infer_producer: bool = True, tail=None):
        # `tail` follows the file and yields row dicts ({"step", "time", "producer", key: number});
        # JSONL by default, a console-log reader for sources whose metrics are printed lines.
        self.tail = tail if tail is not None else JsonlTail(path)
        self.default_producer = default_producer
        self.timed_producer = timed_producer
        self.infer_producer = infer_producer  # False: every legacy row is default_producer's (sft, eval)
        self.lock = threading.RLock()
        self.serial = next(_SERIALS)  # which store: a store made again (after eviction) is another one
        self.version = 0
        self._reset()

    def _reset(self) -> None:
        self.stepped: dict[str, Block] = {}
        self.timed: dict[str, Block] = {}
        self.first_time: float | None = None
        self.last_time: float | None = None
        self.restarts: list[tuple[str, int]] = []  # (producer, step) where the step went back
        self._max_step: dict[str, int] = {}
        self._tidy: tuple[int, pd.DataFrame] | None = None
        self.log = TidyLog()
        self._log_stale = False  # a logged cell was overwritten: rebuild the log from the blocks
        self.ignored_columns: dict[str, str] = {}  # key -> type of the values that were ignored
        self._keys: set[str] = set()  # distinct metric names taken (at most MAX_KEYS)

    @property
    def path(self) -> str:
        return self.tail.path

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in (*self.stepped.values(), *self.timed.values())) + self.log.nbytes

    def refresh(self) -> bool:
        """Parse what was appended since the last call; True when anything changed."""
        with self.lock:
            result = self.tail.poll()
            if result is None:
                return False
            if result.reset:
                self._reset()
            if result.rows:
                self._ingest(result.parsed)
            self.version += 1
            return True

    # Ingest -------------------------------------------------------------------------------------
    def _ingest(self, parsed) -> None:
        rows = parsed.rows
        by_keys: dict[tuple, list[int]] = {}
        for i, row in enumerate(rows):
            by_keys.setdefault(tuple(row), []).append(i)
        n = len(rows)
        steps = np.empty(n, dtype=np.int64)
        times = np.empty(n)
        # per (producer, keyed_by_step): list of (file positions, metric keys, value matrix)
        parts: dict[tuple[str, bool], list] = {}
        for shape, idx in by_keys.items():
            chosen = [rows[i] for i in idx]
            idx = np.asarray(idx, dtype=np.int64)
            keys = self._admit(tuple(k for k in shape if k not in _RESERVED), parsed.line_of(int(idx[0])))
            steps[idx] = _column(chosen, shape, "step", np.int64, _step_of)
            if "step" in shape and (steps[idx] < 0).any():
                self._bad_steps(chosen, idx, steps, parsed)
            times[idx] = _column(chosen, shape, "time" if "time" in shape else "_timestamp", np.float64, _time_of)
            values = self._values(chosen, idx, keys, parsed)
            legacy = self._legacy_producer(keys)
            prods = [p if type(p := r.get("producer")) is str else None for r in chosen]
            keyed = steps[idx] >= 0
            prods = np.array([p or (legacy if k else self.timed_producer) for p, k in zip(prods, keyed.tolist())],
                             dtype=object)
            for prod in dict.fromkeys(prods.tolist()):
                sel = prods == prod
                for by_step in (True, False):
                    mask = sel & (keyed == by_step)
                    if mask.any():
                        parts.setdefault((prod, by_step), []).append((idx[mask], keys, values[mask]))
        self._note_times(times)
        self.log.reserve(sum(int(v.size) for items in parts.values() for _, _, v in items))
        for (prod, by_step), items in parts.items():
            if by_step:
                self._merge_stepped(prod, items, steps, times)
            else:
                self._append_timed(prod, items, times)

    def _admit(self, keys: tuple, line: int) -> tuple:
        """The keys this store takes: all while it holds fewer than MAX_KEYS distinct names (a
        line of two million distinct keys is not two million metrics); the rest are a problem."""
        new = [k for k in keys if k not in self._keys]
        room = MAX_KEYS - len(self._keys)
        if len(new) > room:
            self.tail.problems.add(f"more than {MAX_KEYS:,} distinct metric names: the rest are left out", line)
            dropped = set(new[max(room, 0):])
            new, keys = new[:max(room, 0)], tuple(k for k in keys if k not in dropped)
        self._keys.update(new)
        return keys

    def _bad_steps(self, chosen: list[dict], idx: np.ndarray, steps: np.ndarray, parsed) -> None:
        """A `step` that is a number but no step (negative, fractional, too large) is a problem of
        its line; the row's values stay, keyed by time (a null step is a time-keyed row by design)."""
        for i, row in zip(idx.tolist(), chosen):
            v = row["step"]
            if steps[i] < 0 and type(v) in (int, float):
                self.tail.problems.add("step is not a whole number from 0 to 2^62 (row kept by time)", parsed.line_of(i))

    def _values(self, chosen: list[dict], idx: np.ndarray, keys: tuple, parsed) -> np.ndarray:
        """The (rows × keys) float matrix of rows that share a key set; non-numbers become NaN
        and are counted as problems of their line."""
        k = len(keys)
        if k == 0:
            return np.empty((len(chosen), 0))
        get = operator.itemgetter(*keys) if k > 1 else (lambda r: (r[keys[0]],))
        try:  # numbers only (the writer's contract): one C loop
            flat = np.fromiter(itertools.chain.from_iterable(map(get, chosen)), dtype=np.float64,
                               count=len(chosen) * k)
        except (TypeError, ValueError):
            flat = np.array([self._number(key, v, parsed.line_of(i))
                             for i, r in zip(idx.tolist(), chosen) for key, v in zip(keys, get(r))],
                            dtype=np.float64)
        return flat.reshape(len(chosen), k)

    def _number(self, key: str, value, line: int) -> float:
        number = finite_float(value, bools=True, keep_nan_inf=True)  # the contract: values as logged
        if number is not None:
            return number
        if value is not None:
            self.ignored_columns.setdefault(key, type(value).__name__)
            self.tail.problems.add(f"non-numeric value for key {key!r} (ignored)", line)
        return np.nan

    def _legacy_producer(self, keys: tuple) -> str:
        """Producer of a step-keyed row without `producer` (prime-rl spec 4.6), from its keys."""
        if not self.infer_producer:
            return self.default_producer
        if any(_TRAINER_KEY.match(k) for k in keys):
            return "trainer"
        if any(_ORCH_KEY.match(k) for k in keys):
            return "orch"
        return self.default_producer

    def _note_times(self, times: np.ndarray) -> None:
        finite = times[np.isfinite(times)]
        if finite.size:
            if self.first_time is None:
                self.first_time = float(finite[0])
            top = float(finite.max())
            self.last_time = top if self.last_time is None else max(self.last_time, top)

    def _merge_stepped(self, prod: str, items: list, steps: np.ndarray, times: np.ndarray) -> None:
        block = self.stepped.setdefault(prod, Block(keyed_by_step=True))
        rows_before = block.n
        positions = np.sort(np.concatenate([pos for pos, _, _ in items]))
        self._note_restarts(prod, steps[positions])
        uniq, inverse = np.unique(steps[positions], return_inverse=True)
        block.columns_for(list(dict.fromkeys(k for _, keys, _ in items for k in keys)))  # grow once
        row_at = block.rows_for_steps(uniq)[inverse]  # block row of each position, in file order
        placed = [(pos, row_at[np.searchsorted(positions, pos)], block.columns_for(keys), keys, values)
                  for pos, keys, values in items]
        risky = _rows_written_twice(placed, rows_before)
        careful = []
        for pos, rows, cols, keys, values in placed:
            hit = np.isin(rows, risky) if risky.size else np.zeros(len(rows), dtype=bool)
            if hit.any():
                careful.append((pos[hit], rows[hit], cols, keys, values[hit]))
            if not hit.all():  # the common case (a cold load, new steps): cells new and written once
                ok = ~hit
                self._write_new(block, prod, pos[ok], rows[ok], cols, keys, values[ok], times)
        if careful:
            self._write_last_wins(block, prod, careful, times)
        t = times[positions]
        np.fmax.at(block.tmax, row_at, t)
        np.fmin.at(block.tmin, row_at, t)

    def _write_new(self, block: Block, prod: str, pos, rows, cols, keys, values, times) -> None:
        """Write cells nobody wrote before, and log them as tidy rows."""
        t = times[pos]
        block.values[rows[:, None], cols] = values
        block.cell_time[rows[:, None], cols] = t[:, None]
        if not self._log_stale:
            step = block.steps[rows] if block.keyed_by_step else None
            self.log.append_matrix(values, self.log.codes(keys), t, step, prod)

    def _write_last_wins(self, block: Block, prod: str, placed: list, times: np.ndarray) -> None:
        """Cells may be written twice (a step logged again, rows merging into an existing step):
        the latest line wins, and a logged cell that changes makes the tidy log stale."""
        cap_r = block.values.shape[0]
        cells, order, vals = [], [], []
        for pos, rows, cols, _keys, values in placed:
            r, c = np.nonzero(~np.isnan(values))
            cells.append(cols[c] * cap_r + rows[r])  # index into the column-major storage
            order.append(pos[r])
            vals.append(values[r, c])
        cells, order, vals = np.concatenate(cells), np.concatenate(order), np.concatenate(vals)
        flat = block.flat()
        latest = np.full(flat.size, -1, dtype=np.int64)
        np.maximum.at(latest, cells, order)
        keep = order == latest[cells]
        cells, vals, order = cells[keep], vals[keep], order[keep]
        existed = ~np.isnan(flat[cells])
        flat[cells] = vals
        block.flat("cell_time")[cells] = times[order]
        if existed.any():
            self._log_stale = True
        elif not self._log_stale:
            self.log.append_cells(block, prod, cells)

    def _note_restarts(self, prod: str, steps: np.ndarray) -> None:
        prev = self._max_step.get(prod, -1)
        running = np.maximum.accumulate(np.concatenate([[prev], steps]))
        back = np.flatnonzero(steps < running[:-1])
        starts = back[np.concatenate([[True], np.diff(back) > 1])] if back.size else back
        self.restarts.extend((prod, int(steps[i])) for i in starts)
        self._max_step[prod] = int(running[-1])

    def _append_timed(self, prod: str, items: list, times: np.ndarray) -> None:
        block = self.timed.setdefault(prod, Block(keyed_by_step=False))
        positions = np.sort(np.concatenate([pos for pos, _, _ in items]))
        block.columns_for(list(dict.fromkeys(k for _, keys, _ in items for k in keys)))  # grow once
        new_rows = block.append_rows(len(positions))
        for pos, keys, values in items:
            rows = new_rows[np.searchsorted(positions, pos)]
            self._write_new(block, prod, pos, rows, block.columns_for(keys), keys, values, times)
        block.tmax[new_rows] = times[positions]
        block.tmin[new_rows] = times[positions]

    # Views --------------------------------------------------------------------------------------
    @property
    def stamp(self) -> tuple[int, int]:
        """(serial, version): changes whenever what the store holds changes."""
        return self.serial, self.version

    def max_step(self) -> int | None:
        steps = [int(b.steps[: b.n].max()) for b in self.stepped.values() if b.n]
        return max(steps) if steps else None

    def last_step_logging_a_number(self) -> int | None:
        """The highest step with a finite value (`metrics.steps_done`: a row of NaNs is no step done)."""
        steps = [int(b.steps[: b.n][np.isfinite(b.values[: b.n, : len(b.keys)]).any(axis=1)].max(initial=-1))
                 for b in self.stepped.values() if b.n]
        top = max(steps, default=-1)
        return top if top >= 0 else None

    def min_step(self) -> int | None:
        steps = [int(b.steps[: b.n].min()) for b in self.stepped.values() if b.n]
        return min(steps) if steps else None

    def producers(self) -> list[str]:
        return list(dict.fromkeys([*self.stepped, *self.timed]))

    def tidy(self) -> pd.DataFrame:
        """One row per (producer, step, metric) plus one per time-keyed (row, metric); `time` is
        when the value was written. Row order is not meaningful."""
        with self.lock:
            if self._tidy is None or self._tidy[0] != self.version:
                if self._log_stale:
                    self.log = TidyLog()
                    for prod, block in [*self.stepped.items(), *self.timed.items()]:
                        self.log.append_cells(block, prod, block.logged_cells())
                    self._log_stale = False
                self._tidy = (self.version, self.log.frame())
            # a copy: callers may modify what they get without touching the cached frame (cheap
            # under copy-on-write, which pandas 3 always uses)
            return self._tidy[1].copy(deep=not _COW)

    def wide(self, producer: str, metrics: list[str] | None = None) -> pd.DataFrame:
        """Merged step rows of one producer: step, time, time_first, one column per metric."""
        with self.lock:
            b = self.stepped.get(producer)
            if b is None or b.n == 0:
                return pd.DataFrame({"step": pd.array([], dtype="Int64"), "time": []})
            keys = b.keys if metrics is None else [m for m in metrics if m in b.key_index]
            return b.wide(keys)


_COW = int(pd.__version__.split(".")[0]) >= 3


def _rows_written_twice(placed: list, rows_before: int) -> np.ndarray:
    """Block rows where a cell may be written twice: rows that existed before this batch, a step
    repeated within one key set (a resume), or a step shared by key sets with a common key."""
    risky = []
    seen: list[tuple[int, int, set, np.ndarray]] = []
    for _pos, rows, _cols, keys, _values in placed:
        if not rows.size:
            continue
        uniq, counts = np.unique(rows, return_counts=True)
        risky += [rows[rows < rows_before], uniq[counts > 1]]
        lo, hi, keyset = uniq[0], uniq[-1], set(keys)
        risky += [np.intersect1d(uniq, other) for olo, ohi, okeys, other in seen
                  if lo <= ohi and olo <= hi and not keyset.isdisjoint(okeys)]
        seen.append((lo, hi, keyset, uniq))
    return np.unique(np.concatenate(risky)) if risky else np.empty(0, dtype=np.int64)


def empty_tidy() -> pd.DataFrame:
    """The tidy metrics frame of a run with no metric rows (same columns and dtypes)."""
    return TidyLog().frame()


def shared_store(key, factory: Callable[[], MetricStore]) -> MetricStore:
    """The store kept under `key` in the process-wide cache (made by `factory` the first time),
    refreshed; when it grew, the cache evicts to stay within its bound."""
    store = cache.shared.get_or_create(key, factory)
    if store.refresh():
        cache.shared.evict()
    return store
