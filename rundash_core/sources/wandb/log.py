"""Following a W&B run's transaction logs (one `.wandb` file per attempt) into a `MetricStore`.

`AttemptsTail` reads each attempt's file from where its last read ended (a file that only grew is
read by its appended bytes: `bytetail.only_grew`), frames the bytes (`records.frame`), decodes the
few records that describe the run (run, config, metric definitions, exit) and turns the history
records into rows (`history.decode_rows`); `summary`, `stats`, `telemetry` and console output are
never decoded on the way. Attempts are read oldest first, so on a step logged twice the newest
attempt's value wins (the store's "last in file order wins"; wandb spec 5).

Steps (wandb spec 4): a key is stepped by `_step`, unless the run defined a step metric for it
(`define_metric(key_or_glob, step_metric=...)`), then by that metric's value in the row (or, as
W&B's `step_sync` does, the last value it had); a step metric is stepped by itself. A definition
arriving after rows were read re-reads the run (the W&B UI applies it to the whole history).
"""
from __future__ import annotations

import fnmatch
import importlib.util
import json
import operator
import os
import sys
import types
from dataclasses import dataclass, field

import numpy as np

from rundash_core.io.bytetail import CHECKPOINT_BYTES, advance_checkpoint, only_grew
from rundash_core.io.files import FileId, file_id
from rundash_core.io.jsonl import LineProblems
from rundash_core.sources.wandb import history, records

PRODUCER = "trainer"
DEFAULT_AXIS = "_step"


_UNSET = object()
_proto = _UNSET


def wandb_proto():
    """wandb's `wandb_internal_pb2` (its `Record` messages), or None when the `wandb` package (the
    `rundash[wandb]` extra) is missing or unusable. Importing it starts no service and opens no
    connection. When wandb is not imported yet, only its protobuf modules are loaded (14 ms): its
    `__init__` (the SDK: ~0.4 s and ~200 modules) is not run, and they are taken out of
    `sys.modules` again, so a later `import wandb` imports the package whole, as usual."""
    global _proto
    if _proto is _UNSET:
        _proto = _load_proto()
    return _proto


def _load_proto():
    try:
        if "wandb" in sys.modules:  # imported already (or blocked: None)
            if sys.modules["wandb"] is None:
                return None
            from wandb.proto import wandb_internal_pb2
            return wandb_internal_pb2
        spec = importlib.util.find_spec("wandb")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = list(spec.submodule_search_locations)[0]
        for name, path in (("wandb", root), ("wandb.proto", os.path.join(root, "proto"))):
            module = types.ModuleType(name)
            module.__path__ = [path]
            sys.modules[name] = module
        try:
            return importlib.import_module("wandb.proto.wandb_internal_pb2")
        finally:  # a later `import wandb` imports it all as usual (protobuf takes the same files again)
            for name in [m for m in sys.modules if m == "wandb" or m.startswith("wandb.")]:
                sys.modules.pop(name, None)
    except Exception:  # noqa: BLE001 - ImportError, or a protobuf version wandb refuses
        return None


@dataclass
class Attempt:
    """What one attempt's file said so far, and where reading it goes on."""

    path: str
    fid: FileId | None = None
    end: int = 0  # the next read starts here (a record boundary)
    checkpoint: bytes = b""
    run: dict = field(default_factory=dict)  # run_id, name, project, entity, start_time, ...
    config: dict = field(default_factory=dict)
    exit_code: int | None = None
    exit_runtime: float | None = None
    first_step: int | None = None
    last_step: int | None = None
    first_time: float | None = None
    last_time: float | None = None
    written: float | None = None  # the newest time written inside the file (history, stats, output)
    rows: int = 0
    corrupt: list[tuple[int, str]] = field(default_factory=list)
    not_wandb: str | None = None
    undecodable: int = 0  # records the protobuf decoder refused

    @property
    def torn_bytes(self) -> int:
        """Bytes after the last complete record (a record still being written, or cut)."""
        return max(0, (self.fid.size if self.fid else 0) - self.end) if self.not_wandb is None else 0


@dataclass
class Batch:
    """History rows for the store, grouped: `parts` holds (positions, metric keys, the rows as
    decoded); `steps` / `times` are indexed by position (a step of -1: keyed by time). Positions
    follow file order, so the last write of a cell wins."""

    parts: list = field(default_factory=list)
    steps: list = field(default_factory=list)  # arrays, concatenated by `done`
    times: list = field(default_factory=list)
    size: int = 0

    @property
    def rows(self) -> list:
        return self.parts

    def done(self) -> Batch:
        self.steps = np.concatenate(self.steps) if self.steps else np.empty(0, dtype=np.int64)
        self.times = np.concatenate(self.times) if self.times else np.empty(0)
        return self

    def line_of(self, i: int) -> int:
        return 0


@dataclass
class Polled:
    reset: bool
    parsed: Batch

    @property
    def rows(self) -> list:
        return self.parsed.parts


class AttemptsTail:
    """The attempts of one run (their files, oldest first, given by `files()`), followed together."""

    def __init__(self, key: str, files, pb):
        self.path = key
        self.files = files  # () -> [path of each attempt's .wandb file, oldest first]
        self.pb = pb
        self.problems = LineProblems()
        self._forget()

    def _forget(self) -> None:
        self.attempts: list[Attempt] = []
        self.definitions: list[tuple[str, str, str]] = []  # (name or glob, "name" | "glob", step metric)
        self.axes: dict[str, str] = {}  # key -> its step axis, for the keys met so far
        self.step_sync: dict[str, float] = {}  # step metric -> its last value (W&B's step_sync)
        self.problems = LineProblems()

    def poll(self) -> Polled | None:
        paths = self.files()
        fids = [file_id(p) for p in paths]
        reset = not self._continues(paths, fids)
        if reset:
            self._forget()
            self.attempts = [Attempt(p) for p in paths]
        elif len(paths) > len(self.attempts):
            self.attempts += [Attempt(p) for p in paths[len(self.attempts):]]
        if not reset and all(a.fid == f for a, f in zip(self.attempts, fids)):
            return None
        payloads: list[tuple[int, list[bytes]]] = []
        defined = len(self.definitions)
        for n, (attempt, fid) in enumerate(zip(self.attempts, fids)):
            if fid is None or attempt.fid == fid:
                attempt.fid = fid or attempt.fid
                continue
            payloads.append((n, self._read(attempt, fid)))
        if len(self.definitions) != defined and any(a.rows for a in self.attempts):
            self._forget()  # steps of rows already read change: read the run again, definitions known
            return self._again()
        batch = Batch()
        for n, got in payloads:
            self._rows(self.attempts[n], got, batch)
        return Polled(reset, batch.done())

    def _again(self) -> Polled:
        self.attempts = [Attempt(p) for p in self.files()]
        got = [(n, self._read(a, file_id(a.path))) for n, a in enumerate(self.attempts)]
        batch = Batch()
        for n, payloads in got:
            self._rows(self.attempts[n], payloads, batch)
        return Polled(True, batch.done())

    def _continues(self, paths: list[str], fids: list) -> bool:
        """The attempts read so far are still there, in order, and only the newest may have grown
        (an older one that changed, or a new attempt that starts before one read: read all again)."""
        if paths[: len(self.attempts)] != [a.path for a in self.attempts]:
            return False
        for i, (a, fid) in enumerate(zip(self.attempts, fids)):
            if a.fid is None or fid == a.fid:
                continue
            if fid is None or i < len(self.attempts) - 1 and a.rows:
                return False
            if not only_grew(a.path, fid, since=a.fid, end=a.end, checkpoint=a.checkpoint):
                return False
        return True

    # Reading one file --------------------------------------------------------------------------
    def _read(self, a: Attempt, fid: FileId | None) -> list[bytes]:
        """The history payloads appended to `a`'s file; the other records it needs are taken in."""
        if fid is None:
            return []
        try:
            data = records.read_from(a.path, a.end, fid.size)
        except OSError:
            return []
        framed = records.frame(data, a.end)
        a.fid, a.not_wandb = fid, framed.not_wandb
        a.corrupt += framed.corrupt
        done = framed.end - a.end
        a.checkpoint = advance_checkpoint(a.checkpoint, bytes(data[max(0, done - CHECKPOINT_BYTES): done]))
        a.end = framed.end
        out, stamped = [], None
        for _off, payload in framed.records:
            first = payload[0] if payload else 0
            if first == records.SUMMARY_TAG:
                continue  # most records: summaries (read by `summary()` only)
            number, lo, hi = records.record_field(payload)
            if number == records.HISTORY:
                out.append(payload[lo:hi])
            elif number in (records.RUN, records.CONFIG, records.METRIC, records.EXIT):
                self._side_record(a, number, bytes(payload[lo:hi]))
            elif number in (records.STATS, records.OUTPUT_RAW):
                stamped = (number, bytes(payload[lo:hi]))
            elif number == 0:
                a.undecodable += 1
        if stamped is not None:  # only the last one: when the file was last written, as it says
            self._note_written(a, *stamped)
        return out

    def _note_written(self, a: Attempt, number: int, payload: bytes) -> None:
        try:
            message = (self.pb.StatsRecord if number == records.STATS else self.pb.OutputRawRecord).FromString(payload)
        except Exception:  # noqa: BLE001 - a damaged record says nothing
            return
        if message.HasField("timestamp"):
            t = message.timestamp.seconds + message.timestamp.nanos / 1e9
            a.written = t if a.written is None else max(a.written, t)

    def _side_record(self, a: Attempt, number: int, payload: bytes) -> None:
        pb = self.pb
        try:
            if number == records.RUN:
                run = pb.RunRecord.FromString(payload)
                a.run = {"run_id": run.run_id, "name": run.display_name, "project": run.project,
                         "entity": run.entity, "group": run.run_group, "job_type": run.job_type,
                         "start_time": run.start_time.seconds + run.start_time.nanos / 1e9
                         if run.HasField("start_time") else None,
                         "starting_step": run.starting_step, "resumed": run.resumed}
                apply_config(a.config, run.config)
            elif number == records.CONFIG:
                apply_config(a.config, pb.ConfigRecord.FromString(payload))
            elif number == records.EXIT:
                ex = pb.RunExitRecord.FromString(payload)
                a.exit_code, a.exit_runtime = ex.exit_code, float(ex.runtime)
            else:
                m = pb.MetricRecord.FromString(payload)
                what = ("name", m.name) if m.name else ("glob", m.glob_name)
                if what[1] and (m.step_metric or what[0] == "name"):
                    entry = (what[1], what[0], m.step_metric)
                    if entry not in self.definitions:
                        self.definitions.append(entry)
                        self.axes.clear()
        except Exception:  # noqa: BLE001 - DecodeError: a damaged record is counted, not raised
            a.undecodable += 1

    # History rows -------------------------------------------------------------------------------
    def axis(self, key: str) -> str:
        """The key whose value steps `key` (spec 4.1)."""
        got = self.axes.get(key)
        if got is None:
            got = self.axes[key] = self._axis(key)
        return got

    def main_axis(self) -> str:
        """The step axis most metric keys are stepped by (the run's step, for its summary)."""
        counts: dict[str, int] = {}
        for key, axis in self.axes.items():
            counts[axis] = counts.get(axis, 0) + (not key.startswith("_"))
        return max(counts, key=counts.get) if counts else DEFAULT_AXIS

    def _axis(self, key: str) -> str:
        steppers = {s for _n, _k, s in self.definitions if s}
        if key in steppers:
            return key
        named = [s for n, kind, s in self.definitions if kind == "name" and n == key and s]
        if named:
            return named[-1]
        globbed = [s for n, kind, s in self.definitions if kind == "glob" and s and fnmatch.fnmatchcase(key, n)]
        return globbed[-1] if globbed else DEFAULT_AXIS

    def _rows(self, a: Attempt, payloads: list[bytes], batch: Batch) -> None:
        """Add this attempt's history rows to `batch`: per key set and step axis, the rows (dicts as
        decoded: the store takes their values with one `itemgetter`), their steps and times."""
        decoded = history.decode_rows(payloads, self.pb)
        if not decoded:
            return
        self._note_attempt(a, decoded)
        groups: dict[frozenset, list[int]] = {}
        for i, d in enumerate(decoded):
            groups.setdefault(frozenset(d), []).append(i)
        plans = {shape: self._plan(shape, [decoded[i] for i in idx[:64]] if len(idx) > 64 else
                                   [decoded[i] for i in idx]) for shape, idx in groups.items()}
        axes = list(dict.fromkeys(axis for plan in plans.values() for axis, _keys in plan)) or [DEFAULT_AXIS]
        n, width, base = len(decoded), len(axes), batch.size
        times = np.fromiter((t if type(t := d.get("_timestamp")) in (int, float) else np.nan for d in decoded),
                            dtype=np.float64, count=n)
        steps = np.full((n, width), -1, dtype=np.int64)
        for j, axis in enumerate(axes):
            steps[:, j] = self._steps(decoded, axis)
        for shape, idx in groups.items():
            idx_arr = np.asarray(idx, dtype=np.int64)
            members = [decoded[i] for i in idx]
            for axis, keys in plans[shape]:
                if keys:
                    batch.parts.append((base + idx_arr * width + axes.index(axis), keys, members))
        batch.steps.append(steps.reshape(-1))
        batch.times.append(np.repeat(times, width))
        batch.size += n * width

    def _plan(self, shape: frozenset, sample: list[dict]) -> list[tuple[str, tuple]]:
        """How rows of one key set become store rows: [(step axis, its metric keys)]; keys whose
        values (in the first rows) are not numbers are left out (spec 3.3)."""
        by_axis: dict[str, list[str]] = {}
        for k in shape:
            if not k.startswith("_") and _all_numbers(sample, k):
                by_axis.setdefault(self.axis(k), []).append(k)
        return [(axis, tuple(keys)) for axis, keys in by_axis.items()]

    def _steps(self, decoded: list[dict], axis: str) -> np.ndarray:
        """Each row's step on `axis`, in file order; a row without the step metric takes its last
        value (W&B's step_sync); -1 where there is none (the row is keyed by its time)."""
        out = np.empty(len(decoded), dtype=np.int64)
        last = self.step_sync.get(axis)
        for i, d in enumerate(decoded):
            value = d.get(axis)
            if type(value) in (int, float):
                last = value
            elif axis != DEFAULT_AXIS:
                value = last
            out[i] = _as_step(value)
        if axis != DEFAULT_AXIS and last is not None:
            self.step_sync[axis] = last
        return out

    def _note_attempt(self, a: Attempt, decoded: list[dict]) -> None:
        steps = [s for d in decoded if type(s := d.get("_step")) is int]
        times = [t for d in decoded if type(t := d.get("_timestamp")) in (int, float)]
        a.rows += len(decoded)
        if steps:
            a.first_step = steps[0] if a.first_step is None else a.first_step
            a.last_step = steps[-1]
        if times:
            a.first_time = float(times[0]) if a.first_time is None else a.first_time
            a.last_time = float(max(times)) if a.last_time is None else max(a.last_time, float(max(times)))
            a.written = a.last_time if a.written is None else max(a.written, a.last_time)


def _all_numbers(members: list[dict], key: str) -> bool:
    """Every value of `key` in these rows is a number (int or float; bools, strings, lists,
    null and media are not metrics: spec 3.3)."""
    return set(map(type, map(operator.itemgetter(key), members))) <= {int, float}


def _as_step(value) -> int:
    if type(value) is float and value.is_integer():
        value = int(value)
    return value if type(value) is int and 0 <= value < 1 << 62 else -1


def apply_config(config: dict, record) -> None:
    """A ConfigRecord's updates and removes, in order (nested keys as nested dicts)."""
    for item in record.update:
        parts = list(item.nested_key) or [item.key]
        try:
            value = json.loads(item.value_json)
        except ValueError:
            value = item.value_json
        node = config
        for part in parts[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part), dict) or part not in node else {}
        node[parts[-1]] = value
    for item in record.remove:
        parts = list(item.nested_key) or [item.key]
        node = config
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node.get(part), dict) else {}
        node.pop(parts[-1], None)
