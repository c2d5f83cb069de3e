"""The ends of a prime-rl `metrics.jsonl`: what the run's summary reads instead of the whole file
(the last step and time from the tail, the first time and training step from the head)."""
from __future__ import annotations

import json
import os

from rundash_core.io.files import open_file, read_range
from rundash_core.io.holes import content_end
from rundash_core.metrics.steps_done import has_finite_value
from rundash_core.numbers import finite_float

RESERVED = ("step", "time", "_timestamp", "producer")


def _is_step(value) -> bool:
    """A step as the metric store takes one (a huge number is no step: the store says so)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62


def _time(row: dict) -> float | None:
    """A row's `time` (or legacy `_timestamp`) when it is a date: one Infinity or 1e300 would
    otherwise blank the run's updated/started times (no Timestamp holds it)."""
    t = finite_float(row.get("time", row.get("_timestamp")))
    return t if t is not None and 0 <= t < MAX_TIME else None


HEAD_BYTES = 64 << 10
MAX_TIME = 1 << 33  # epoch seconds: year 2242, inside pandas' Timestamp range


def _row(line: bytes) -> dict | None:
    if b'"step"' not in line and b'"time"' not in line:
        return None
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return row if isinstance(row, dict) else None


def metrics_tail(path: str | None) -> tuple[int | None, float | None, bool]:
    """(the highest step of a row logging a finite value, the latest `time`) among the rows at the
    end of a metrics file (the last 64 KiB, 1 MiB when that holds no step), and whether the whole
    file was read: when not, and no step was seen (an hour-long step under 5-second inference
    rows), the caller asks the store."""
    for nbytes in (64 << 10, 1 << 20):
        try:
            data, start = _tail(path, nbytes) if path else (b"", 0)
        except OSError:
            return None, None, True
        rows = [r for r in map(_row, data.split(b"\n")[1 if start else 0:]) if r is not None]
        steps = [r["step"] for r in rows if _is_step(r.get("step")) and has_finite_value(r)]
        times = [t for r in rows if (t := _time(r)) is not None]
        if steps or start == 0:
            break
    return (max(steps) if steps else None), (max(times) if times else None), start == 0


def _tail(path: str, nbytes: int) -> tuple[bytes, int]:
    """The last `nbytes` before the file's content ends (a sparse or zeroed tail is not read)."""
    with open_file(path) as fh:
        end = content_end(fh.fileno(), os.fstat(fh.fileno()).st_size)
        start = max(0, end - nbytes)
        return os.pread(fh.fileno(), end - start, start), start


def metrics_head(path: str | None) -> tuple[float | None, int | None, bool]:
    """(time of the first row, the first training step) from the start of a metrics file: an
    evaluation of the initial policy at step 0 (rows of `eval/*` keys only) does not make the
    run's steps count from 0. The third value says whether the head was the whole file: when
    not, and it held no training row (a long first step under 5-second inference rows), the
    caller asks the store."""
    try:
        head = read_range(path, 0, HEAD_BYTES) if path else b""
    except OSError:
        return None, None, True
    started = first_step = None
    for line in head.split(b"\n"):
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(row, dict):
            continue
        if started is None:
            started = _time(row)
        step = row.get("step")
        keys = [k for k in row if k not in RESERVED]
        if _is_step(step) and not all(k.startswith("eval/") for k in keys):
            first_step = step
            break
    return started, first_step, len(head) < HEAD_BYTES


def metrics_ends(path: str | None, store) -> tuple[int | None, float | None, float | None, int | None]:
    """(last step, last time, first time, first training step) from the file's two ends; `store()`
    (the run's MetricStore, which parses the whole file) only when an end that is not the whole
    file holds no step row."""
    last, ended, whole_tail = metrics_tail(path)
    if last is None and not whole_tail:
        last = store().last_step_logging_a_number()
    started, first_step, whole_head = metrics_head(path)
    if first_step is None and not whole_head:
        steps = store().wide("trainer", [])["step"].dropna()
        first_step = int(steps.min()) if len(steps) else None
    return last, ended, started, first_step
