"""A run's event files merged into one tidy metrics log (tensorboard spec 4.2): files in time order
(the earliest wall time of their records, the name as tiebreak; never the file time: a copy gets
fresh ones), the last value written of a (metric, step) winning, so the newest attempt wins on
repeated steps. NaN and inf stay as logged.

Why this shape: a refresh of a live run brings a few new rows at steps no row had yet; those are
appended to the arrays the tidy frame is a view of (frames handed out are never written again).
Only when a new row meets an old (metric, step), when a file was replaced, or when a file sorts
before one already merged, is the log merged again from the files' chunks (no file is re-read).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rundash_core.sources.tensorboard.event_file import EventFile

PRODUCER = "trainer"
NO_STEP = np.iinfo(np.int64).min


class Columns:
    """Tidy rows (step, time, metric code, value) in arrays with spare capacity; append-only."""

    def __init__(self):
        self.n = 0
        self.step = np.empty(0, np.int64)
        self.time = np.empty(0, np.float64)
        self.code = np.empty(0, np.int32)
        self.value = np.empty(0, np.float64)
        self.no_na = np.zeros(0, bool)

    @property
    def nbytes(self) -> int:
        return 29 * len(self.step)

    def append(self, step, time, code, value) -> None:
        m = len(step)
        if self.n + m > len(self.step):
            cap = max(self.n + m, len(self.step) * 3 // 2, 1024)
            for name in ("step", "time", "code", "value"):
                grown = np.empty(cap, getattr(self, name).dtype)
                grown[: self.n] = getattr(self, name)[: self.n]
                setattr(self, name, grown)
            self.no_na = np.zeros(cap, bool)
        sl = slice(self.n, self.n + m)
        self.step[sl], self.time[sl], self.code[sl], self.value[sl] = step, time, code, value
        self.n += m

    def frame(self, names: list[str]) -> pd.DataFrame:
        n = self.n
        return pd.DataFrame({
            "step": pd.arrays.IntegerArray(self.step[:n], self.no_na[:n]),
            "time": self.time[:n],
            "metric": pd.Categorical.from_codes(self.code[:n], categories=names, validate=False),
            "value": self.value[:n],
            "producer": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=[PRODUCER], validate=False),
        }, copy=False)


@dataclass
class EventSource:
    """One event file of the run: where it is (relative to the run), whether it is an attempt (a
    file in the run folder itself) or a sub-writer's (a sub-folder: `add_scalars`, `add_hparams`)."""

    rel: str
    path: str
    attempt: bool


def metric_name(rel_dir: str, tag: str) -> str:
    """A sub-writer's tag as a metric of the run (tensorboard spec 4.3): tensorboardX's
    `add_scalars(main, {sub: v})` writes tag `main` into `<main>/<sub>/`, PyTorch's into
    `<main with / as _>_<sub>/`: both read `main/sub`; any other sub-folder prefixes its tags."""
    rel_dir = rel_dir.replace(os.sep, "/")
    if not rel_dir:
        return tag
    if rel_dir.startswith(tag + "/"):
        return rel_dir
    flat = tag.replace("/", "_") + "_"
    if rel_dir.startswith(flat) and len(rel_dir) > len(flat):
        return f"{tag}/{rel_dir[len(flat):]}"
    return f"{rel_dir}/{tag}"


class RunState:
    """Everything read of one run's event files, shared by every `Run` of the folder (one entry of
    the process cache), behind one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.files: dict[str, EventFile] = {}
        self.sources: dict[str, EventSource] = {}
        self.order: list[str] = []  # rel names, in merge order
        self.merged: dict[str, tuple[int, int, list[int]]] = {}  # rel -> (generation, chunks merged, code map)
        self.names: dict[str, int] = {}
        self.cols = Columns()
        self.max_step = np.empty(0, np.int64)  # per metric code: the highest step merged
        self.version = 0

    @property
    def nbytes(self) -> int:
        return self.cols.nbytes + sum(f.nbytes for f in self.files.values())

    def refresh(self, sources: list[EventSource]) -> None:
        """Re-stat (and read on) every file; merge what is new."""
        changed = set(self.sources) != {s.rel for s in sources}
        self.sources = {s.rel: s for s in sources}
        for rel in [r for r in self.files if r not in self.sources]:
            del self.files[rel]
        for s in sources:
            f = self.files.get(s.rel)
            if f is None:
                f = self.files[s.rel] = EventFile(s.path)
            changed |= f.refresh()
        if not changed and self.order:
            return
        order = sorted(self.sources, key=lambda r: (self.files[r].first_time is None, self.files[r].first_time or 0.0, r))
        intact = all(rel not in self.merged or self.merged[rel][0] == self.files[rel].generation for rel in order)
        if not self.order or order[: len(self.order)] != self.order or not intact or not self._append_new(order):
            self._merge_all(order)
        self.order = order
        self.version += 1

    def _codes_of(self, rel: str, f: EventFile, have: list[int]) -> np.ndarray:
        """Global metric codes of the file's tags (the map grows with the file's tag table)."""
        rel_dir = os.path.dirname(rel) if not self.sources[rel].attempt else ""
        tags = list(f.tags)
        for tag in tags[len(have):]:
            have.append(self.names.setdefault(metric_name(rel_dir, tag), len(self.names)))
        return np.asarray(have, dtype=np.int32)

    def _new_rows(self, order: list[str], merged: dict) -> tuple[list, ...]:
        parts = ([], [], [], [])
        for rel in order:
            f = self.files[rel]
            gen, done, have = merged.get(rel, (f.generation, 0, []))
            cmap = self._codes_of(rel, f, have)
            for c in f.chunks[done:]:
                for part, a in zip(parts, (c.steps, c.times, cmap[c.codes], c.values)):
                    part.append(a)
            merged[rel] = (f.generation, len(f.chunks), have)
        return parts

    def _append_new(self, order: list[str]) -> bool:
        """Append the rows read since the last merge when each is at a new (metric, step): the
        usual refresh of a live run. False: a merge of everything is needed."""
        merged = {rel: (g, n, list(have)) for rel, (g, n, have) in self.merged.items()}
        names_before = dict(self.names)
        steps, times, codes, values = (np.concatenate(p) if p else np.empty(0) for p in self._new_rows(order, merged))
        if len(steps):
            codes = codes.astype(np.int32)
            steps = steps.astype(np.int64)
            known = codes < len(self.max_step)
            later = np.ones(len(steps), bool)
            later[known] = steps[known] > self.max_step[codes[known]]
            if not later.all() or last_writes(codes, steps) is not None:
                self.names = names_before
                return False
            self.cols.append(steps, times, codes, values)
            self._raise_max(codes, steps)
        self.merged = merged
        return True

    def _merge_all(self, order: list[str]) -> None:
        self.names, merged = {}, {}
        parts = self._new_rows(order, merged)
        self.merged = merged
        steps, times, codes, values = (np.concatenate(p) for p in parts) if parts[0] else (
            np.empty(0, np.int64), np.empty(0), np.empty(0, np.int32), np.empty(0))
        keep = last_writes(codes, steps)
        if keep is not None:
            steps, times, codes, values = steps[keep], times[keep], codes[keep], values[keep]
        self.cols = Columns()
        self.cols.append(steps, times, codes, values)
        self.max_step = np.empty(0, np.int64)
        self._raise_max(codes.astype(np.int32), steps.astype(np.int64))

    def _raise_max(self, codes: np.ndarray, steps: np.ndarray) -> None:
        if len(self.max_step) < len(self.names):
            self.max_step = np.concatenate([self.max_step, np.full(len(self.names) - len(self.max_step), NO_STEP)])
        np.maximum.at(self.max_step, codes, steps)

    def frame(self) -> pd.DataFrame:
        return self.cols.frame(list(self.names))


def last_writes(codes: np.ndarray, steps: np.ndarray) -> np.ndarray | None:
    """Which rows to keep so each (metric, step) keeps its last write (in row order), as a mask; None
    when no pair repeats (the usual file: nothing to drop)."""
    if len(codes) < 2:
        return None
    order = np.lexsort((steps, codes))  # stable: rows of one pair stay in row order
    c, s = codes[order], steps[order]
    last = np.ones(len(order), bool)
    last[:-1] = (c[1:] != c[:-1]) | (s[1:] != s[:-1])
    if last.all():
        return None
    keep = np.zeros(len(order), bool)
    keep[order[last]] = True
    return keep
