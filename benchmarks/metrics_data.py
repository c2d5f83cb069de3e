"""A synthetic prime-rl `monitors/file/metrics.jsonl`, and an independent reading of it.

Why synthetic: no real prime-rl output is public, and a benchmark needs a file of a chosen size.
Keys follow the naming grammar of the format notes (`metrics_keys`); rows follow the writers
(trainer: 5 rows per step; orchestrator: one big row per step, eval rows now and then, time-keyed
inference and periodic rows; a resume that rewrites a few steps). Values: counters are ints, most
statistics short floats (6 decimals), the trainer's global tensor statistics full float32 reprs.

Per-env keys (`train/<env>/...`, `batch/<env>`, `entropy/<env>/...`) are written only for the
envs in the current env mix; the mix changes every `mix_steps` steps (a curriculum). So each
producer has `keys` distinct keys over the run, but a row holds fewer of them; with every key in
every row the key text alone of 10k steps × 2 × 300 keys is about 225 MB.

`independent_merge` reads the file with a plain JSON parser and the spec's merge rule, without
rundash; the benchmark checks rundash's tidy frame against it.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from benchmarks.metrics_keys import (
    ORCH_ERROR_KEYS,
    PERIODIC_KEYS,
    env_of,
    inference_keys,
    orch_eval_keys,
    orch_train_keys,
    trainer_key_groups,
    value_model,
)


@dataclass
class Spec:
    """What to generate. Steps are 1..steps; `resume_back` steps are written twice (a resume)."""

    steps: int = 10000
    keys: int = 300  # distinct keys per producer
    seed: int = 0
    infer_every: int = 2  # one time-keyed inference row every N step positions
    periodic_every: int = 3  # one time-keyed dispatcher/... row every N step positions
    eval_every: int = 25  # one orch eval row (step-keyed) every N steps
    engines: int = 4
    resume_back: int = 3  # at 2/3 of the run, go back this many steps (0: no resume)
    mix_steps: int = 100  # the env mix changes every N steps
    env_share: float = 0.4  # chance that an env other than the first is in a mix
    start_time: float = 1758912000.0
    step_seconds: float = 30.0

    def step_sequence(self) -> list[int]:
        if self.resume_back <= 0 or self.steps < 3 * self.resume_back:
            return list(range(1, self.steps + 1))
        r = (2 * self.steps) // 3
        return list(range(1, r + 1)) + list(range(r - self.resume_back + 1, self.steps + 1))

    def env_mix(self, step: int, n_envs: int) -> tuple[bool, ...]:
        """Which envs are in the batch at `step` (the first always is)."""
        draw = np.random.default_rng((self.seed, step // self.mix_steps)).random(n_envs) < self.env_share
        return (True, *map(bool, draw[1:]))


def _format_column(col: np.ndarray, fmt: str, lo: float, span: float) -> list[str]:
    """The JSON text of one key's values (see `metrics_keys.value_model` for the formats)."""
    if fmt == "int":
        return list(map(str, col.astype(np.int64).tolist()))
    if fmt == "intfloat":
        return list(map(repr, np.floor(col).tolist()))
    if fmt == "full":
        return list(map(repr, col.astype(np.float32).astype(np.float64).tolist()))
    strs = [repr(round(x, 6)) for x in col.tolist()]
    if fmt == "zero":
        return ["0" if x < lo + 0.95 * span else s for x, s in zip(col.tolist(), strs)]
    return strs


class RowKind:
    """One kind of row (e.g. the trainer's optim row) and how to write many of them fast."""

    def __init__(self, name: str, keys: list[str], producer: str, step_keyed: bool, due: Callable[[int, int], bool],
                 dt: float, extras: list[str] | None = None, extra_p: float = 0.0):
        self.name, self.keys, self.producer, self.step_keyed, self.due, self.dt = name, keys, producer, step_keyed, due, dt
        self.prefix = [json.dumps(k) + ": " for k in keys]
        self.models = [value_model(k) for k in keys]
        self.env = np.array([env_of(k) if step_keyed else -1 for k in keys], dtype=np.int64)
        self.extras = [json.dumps(k) + ": " for k in (extras or [])]
        self.extra_p = extra_p
        self.tail = f', "producer": "{producer}"}}\n'

    def columns(self, mix: tuple[bool, ...]) -> np.ndarray:
        """The key columns written when `mix` says which envs are in the batch."""
        present = np.array([True, *mix], dtype=bool)  # index 0: keys of no env (env -1)
        return np.flatnonzero(present[self.env + 1])

    def lines(self, rng: np.random.Generator, items: list[tuple[int | None, float]], cols: np.ndarray) -> list[str]:
        """JSON lines for (step, time) items (step None: a time-keyed row) with the keys `cols`."""
        if not items:
            return []
        vals = rng.random((len(items), len(cols)))
        strs = []
        for c, j in enumerate(cols.tolist()):
            lo, hi, fmt = self.models[j]
            strs.append(_format_column(lo + (hi - lo) * vals[:, c], fmt, lo, hi - lo))
        prefix = [self.prefix[j] for j in cols.tolist()]
        extra = rng.random((len(items), len(self.extras))) < self.extra_p if self.extras else None
        out = []
        for i, ((step, t), row) in enumerate(zip(items, zip(*strs))):
            body = ", ".join(map(str.__add__, prefix, row))
            if extra is not None:
                body += "".join(f", {p}{int(rng.integers(1, 6))}" for p, on in zip(self.extras, extra[i]) if on)
            head = '{{"step": {}, "time": {!r}, '.format("null" if step is None else step, round(t, 6))
            out.append(head + body + self.tail)
        return out


def row_kinds(spec: Spec) -> list[RowKind]:
    """Row kinds in the order they are written within one step."""
    groups = trainer_key_groups(spec.keys)
    always = lambda pos, step: True  # noqa: E731
    kinds = [
        RowKind("orch", orch_train_keys(spec.keys), "orch", True, always, 0.0, ORCH_ERROR_KEYS, 0.1),
        RowKind("inference", inference_keys(spec.engines), "orch", False,
                lambda pos, step: pos % spec.infer_every == 0, 4.0),
    ]
    for name, keys, dt in zip(("perf", "optim", "tensor", "time", "system"), groups, (20.0, 20.01, 20.05, 20.06, 20.07)):
        kinds.append(RowKind(f"trainer-{name}", keys, "trainer", True, always, dt))
    kinds.append(RowKind("periodic", PERIODIC_KEYS, "orch", False, lambda pos, step: pos % spec.periodic_every == 0, 25.0))
    kinds.append(RowKind("eval", orch_eval_keys(), "orch", True, lambda pos, step: step % spec.eval_every == 0, 28.0))
    return kinds


def lines_for(spec: Spec, kinds: list[RowKind], rng, positions: list[tuple[int, int]]) -> list[str]:
    """The lines of (position, step) pairs in file order; position p is written at start + p × step_seconds."""
    n_envs = 1 + max(int(k.env.max(initial=0)) for k in kinds)
    mixes = {step: spec.env_mix(step, n_envs) for step in {s for _, s in positions}}
    per_kind: list[dict[int, str]] = []
    for kind in kinds:
        by_cols: dict[tuple, list[tuple[int, int]]] = {}
        for pos, step in positions:
            if kind.due(pos, step):
                cols = tuple(kind.columns(mixes[step]).tolist())
                by_cols.setdefault(cols, []).append((pos, step))
        lines: dict[int, str] = {}
        for cols, due in by_cols.items():
            items = [(step if kind.step_keyed else None, spec.start_time + pos * spec.step_seconds + kind.dt)
                     for pos, step in due]
            lines.update(zip((pos for pos, _ in due), kind.lines(rng, items, np.array(cols, dtype=np.int64))))
        per_kind.append(lines)
    return [d[pos] for pos, _ in positions for d in per_kind if pos in d]


def count_values(line: str) -> int:
    """Metric values in one generated line (keys other than step, time, producer)."""
    return line.count('": ') - 3


@dataclass
class Generated:
    path: str
    bytes: int
    lines: int
    values: int  # metric values written (before any merge)
    seconds: float
    positions: int


def generate_run(run_dir: str, spec: Spec, chunk: int = 256) -> Generated:
    """A prime-rl run dir (`configs/` so it is detected) with `monitors/file/metrics.jsonl`."""
    start = time.perf_counter()
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(os.path.join(run_dir, "configs"))
    os.makedirs(os.path.join(run_dir, "monitors", "file"))
    path = os.path.join(run_dir, "monitors", "file", "metrics.jsonl")
    rng = np.random.default_rng(spec.seed)
    kinds = row_kinds(spec)
    seq = spec.step_sequence()
    n_lines = values = 0
    with open(path, "w", encoding="utf-8", buffering=8 << 20) as f:
        for i in range(0, len(seq), chunk):
            lines = lines_for(spec, kinds, rng, [(i + j, s) for j, s in enumerate(seq[i:i + chunk])])
            f.write("".join(lines))
            n_lines += len(lines)
            values += sum(map(count_values, lines))
    return Generated(path, os.path.getsize(path), n_lines, values, time.perf_counter() - start, len(seq))


class Appender:
    """Continues a generated run as its writers would: new steps after the last one (orchestrator
    row, the trainer's 5 rows, eval rows) with the time-keyed rows between them. Never rewrites a
    step, so every appended value is a new tidy row."""

    def __init__(self, path: str, spec: Spec, seed: int = 1):
        self.path, self.spec = path, spec
        self.kinds = row_kinds(spec)
        self.rng = np.random.default_rng((spec.seed, seed))
        self.pos = len(spec.step_sequence())
        self.step = spec.steps + 1
        self.pending: list[str] = []

    def append(self, n_rows: int) -> list[str]:
        """Append the next `n_rows` lines to the file; returns them."""
        while len(self.pending) < n_rows:
            self.pending += lines_for(self.spec, self.kinds, self.rng, [(self.pos + j, self.step + j) for j in range(4)])
            self.pos += 4
            self.step += 4
        lines, self.pending = self.pending[:n_rows], self.pending[n_rows:]
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(lines))
        return lines


# Independent merge (plain JSON, the spec's rule) --------------------------------------------------

@dataclass
class Merged:
    """Step-keyed values per (producer, step) — last value in file order wins, and its time is the
    time of the line that wrote it — and time-keyed values one per row, with the row's time."""

    stepped: dict  # (producer, step) -> ({key: value}, {key: time})
    timed: list  # (producer, time, key, value)

    @property
    def tidy_rows(self) -> int:
        return sum(len(v) for v, _ in self.stepped.values()) + len(self.timed)


def independent_merge(lines: Iterable[bytes | str], loads: Callable = json.loads) -> Merged:
    """`loads`: json.loads, or orjson.loads for speed on a big file (still not rundash's code)."""
    m = Merged({}, [])
    for raw in lines:
        if not raw.strip():
            continue
        row = loads(raw)
        prod, step, t = row.pop("producer", None), row.pop("step", None), row.pop("time", None)
        if step is None:
            m.timed += [(prod, t, k, v) for k, v in row.items()]
            continue
        values, times = m.stepped.setdefault((prod, step), ({}, {}))
        values.update(row)
        times.update(dict.fromkeys(row, t))
    return m
