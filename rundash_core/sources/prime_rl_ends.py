"""The ends of a prime-rl `metrics.jsonl`: what the run's summary reads instead of the whole file
(the last step and time from the tail, the first time and training step from the head)."""
from __future__ import annotations

import json

from ..io.files import read_range, read_tail

RESERVED = ("step", "time", "_timestamp", "producer")


def _is_step(value) -> bool:
    """A step as the metric store takes one (a huge number is no step: the store says so)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62


def _row(line: bytes) -> dict | None:
    if b'"step"' not in line and b'"time"' not in line:
        return None
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return row if isinstance(row, dict) else None


def metrics_tail(path: str | None) -> tuple[int | None, float | None]:
    """(the highest step, the latest `time`) among the rows at the end of a metrics file (the last
    64 KiB, 1 MiB when that holds no step)."""
    for nbytes in (64 << 10, 1 << 20):
        try:
            data, start = read_tail(path, nbytes) if path else (b"", 0)
        except OSError:
            return None, None
        rows = [r for r in map(_row, data.split(b"\n")[1 if start else 0:]) if r is not None]
        steps = [r["step"] for r in rows if _is_step(r.get("step"))]
        if steps or start == 0:
            times = [t for r in rows if isinstance(t := r.get("time", r.get("_timestamp")), (int, float))
                     and not isinstance(t, bool) and t == t]
            return (max(steps) if steps else None), (max(times) if times else None)
    return None, None


def metrics_head(path: str | None) -> tuple[float | None, int | None]:
    """(time of the first row, the first training step) from the start of a metrics file: an
    evaluation of the initial policy at step 0 (rows of `eval/*` keys only) does not make the
    run's steps count from 0."""
    try:
        head = read_range(path, 0, 64 << 10) if path else b""
    except OSError:
        return None, None
    started = first_step = None
    for line in head.split(b"\n")[:200]:
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(row, dict):
            continue
        t = row.get("time", row.get("_timestamp"))
        if started is None and isinstance(t, (int, float)):
            started = float(t)
        step = row.get("step")
        keys = [k for k in row if k not in RESERVED]
        if _is_step(step) and not all(k.startswith("eval/") for k in keys):
            first_step = step
            break
    return started, first_step
