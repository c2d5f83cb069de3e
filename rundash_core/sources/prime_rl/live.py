"""prime-rl in-flight episodes (`docs/formats/prime-rl.md` section 5.7), read-only.

`monitors/file/traces/live/<trace_id>.jsonl` holds the deltas of a trace still being generated: the
first line has `open` (the trace's skeleton) and `dispatch` ({id, kind, env, group, task,
policy_version, step, started}); later lines carry `set` (fields replaced), `nodes` / `calls` /
`errors` (appended), `pending` (the messages not yet written as nodes: replaced by each new
`pending`, cleared by `nodes`), `discard` (node indices, or a count of trailing nodes, dropped) and
`links`. `live/pending/<dispatch_id>.json` is the dispatch of an episode with no trace yet.

Both are short-lived (deleted when the episode lands in the stream, wiped at a new attempt), so a
file that vanished between listing and reading is simply not shown, and a torn last line (the
writer flushes every ~0.5 s) waits for the next read. An in-flight trace whose id is already in
`stream.index.jsonl` has landed: the stream's row replaces it (dedupe by trace id).
"""
from __future__ import annotations

import os
import re
import time

import orjson
import pandas as pd

from rundash_core import cache, frames
from rundash_core.io.files import file_id, open_file
from rundash_core.io.jsonl import dict_or_empty, list_or_empty
from rundash_core.numbers import finite_float
from rundash_core.run import Problem
from rundash_core.sources.prime_rl.episode import _int, message, to_episode
from rundash_core.sources.prime_rl.lines import BAD_LINES, objects
from rundash_core.sources.prime_rl.lines import SKIPPED as SKIPPED_LINES
from rundash_core.sources.prime_rl.traces import _rows, traces_dir

LIVE_PREFIX = "live-"
PENDING_PREFIX = "live-p-"
STAGES = ("pending", "boot", "setup", "running", "finalize", "scoring", "done", "error")
_PHASES = (("scoring", "scoring"), ("finalize", "finalize"), ("agent", "running"), ("setup", "setup"), ("boot", "boot"))
_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def live_dir(run_path: str) -> str:
    return os.path.join(traces_dir(run_path), "live")


# real path -> why an in-flight file was (partly) skipped, as last read; `live_problems` says so
SKIPPED: dict[str, str] = {}


def _lines(path: str) -> list[dict]:
    """The complete JSON-object lines of an in-flight file, followed like every prime-rl JSON-lines
    file (`lines.objects`: a file that grew is read from where the last read ended, a torn last
    line waits for its newline, a replaced one is read again whole); [] when it vanished. Lines
    that are not objects and NUL runs are skipped and remembered for `live_problems` (not for
    `bad_line_problems`: a live file goes when its episode lands)."""
    real = os.path.realpath(path)
    out = objects(path, "prime-rl-live", _whole_object)
    bad, skipped = BAD_LINES.pop(real, None), SKIPPED_LINES.pop(real, ())
    why = [f"{bad[0]} complete line{'s' * (bad[0] > 1)} not a JSON object (skipped)"] if bad else []
    _remember(real, "; ".join(why + [what for what, _line in skipped]) or None)
    return out


def _whole_object(_offset: int, _length: int, obj: dict) -> dict:
    return obj


def _remember(real: str, why: str | None) -> None:
    if why:
        SKIPPED[real] = why
    else:
        SKIPPED.pop(real, None)


def live_problems(run_path: str) -> list[Problem]:
    """In-flight files read so far that held lines (or a pending dispatch) that are not JSON
    objects; a file since deleted (its episode landed) is no longer named."""
    root = os.path.realpath(run_path) + os.sep
    return [Problem(path, why) for path, why in list(SKIPPED.items())
            if path.startswith(root) and os.path.lexists(path)]


def fold_deltas(lines: list[dict]) -> tuple[dict, dict, list[dict]]:
    """(partial trace, dispatch, pending messages) from a live file's delta lines, in order."""
    trace: dict = {}
    dispatch: dict = {}
    pending: list[dict] = []
    for d in lines:
        if isinstance(d.get("dispatch"), dict):
            dispatch = d["dispatch"]
        if isinstance(d.get("open"), dict):
            trace.update(d["open"])
        if isinstance(d.get("trace"), str):
            trace.setdefault("id", d["trace"])
        if isinstance(d.get("set"), dict):
            trace.update(d["set"])
        discard = d.get("discard")
        nodes = trace.setdefault("nodes", [])
        if isinstance(discard, list):
            drop = {i for i in discard if _int(i) is not None}
            trace["nodes"] = [n for i, n in enumerate(nodes) if i not in drop]
        elif _int(discard) is not None and discard > 0:
            del nodes[-discard:]
        for key in ("nodes", "calls", "errors", "links"):
            if isinstance(d.get(key), list):
                trace.setdefault(key, []).extend(x for x in d[key] if isinstance(x, dict))
        if isinstance(d.get("nodes"), list):
            pending = []
        if isinstance(d.get("pending"), list):
            pending = [m for m in d["pending"] if isinstance(m, dict)]
    return trace, dispatch, pending


def stage(trace: dict | None) -> str:
    """Where an in-flight trace is (spec 5.7): pending (no trace yet), boot, setup, running,
    finalize, scoring, done, or error; from its `timing` (a phase with a start > 0 has begun)."""
    if not trace:
        return "pending"
    if list_or_empty(trace.get("errors")) or trace.get("ok") is False and trace.get("is_completed"):
        return "error"
    if trace.get("is_completed") is True:
        return "done"
    timing = dict_or_empty(trace.get("timing"))
    for phase, name in _PHASES:
        span = dict_or_empty(timing.get(phase))
        if (finite_float(span.get("start")) or 0) > 0:
            return "done" if phase == "scoring" and (finite_float(span.get("end")) or 0) > 0 else name
    return "boot"


def landed_trace_ids(run_path: str) -> frozenset[str]:
    """Trace ids already in the stream index (cached per version of the index)."""
    path = os.path.join(traces_dir(run_path), "stream.index.jsonl")
    fid = file_id(path)
    if fid is None:
        return frozenset()
    return cache.shared.current(("prime-rl-landed", os.path.realpath(path)), fid, lambda: frozenset(
        t for row in _rows(path) for t in list_or_empty(row.get("trace_ids")) if isinstance(t, str)))


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _row(sample_id: str, dispatch: dict, trace: dict | None, locator: str, now: float) -> dict:
    trace = trace or {}
    started = finite_float(dispatch.get("started")) or finite_float(dict_or_empty(trace.get("timing")).get("start"))
    nodes = [n for n in list_or_empty(trace.get("nodes")) if isinstance(n, dict)]
    errors = list_or_empty(trace.get("errors"))
    kind = dispatch.get("kind")
    return {
        "sample_id": sample_id, "split": kind if kind in ("train", "eval") else None,
        "step": _int(dispatch.get("step")), "group_id": dispatch.get("group"),
        "task_id": dispatch.get("task") if isinstance(dispatch.get("task"), str) else None,
        "env": dispatch.get("env"), "ok": False if errors else None,
        "error": f"{len(errors)} error{'s' * (len(errors) > 1)}" if errors else None,
        "status": f"in flight: {stage(trace if trace else None)}",
        "input_tokens": _int(trace.get("num_input_tokens")) or None,
        "output_tokens": _int(trace.get("num_output_tokens")) or None,
        "turns": sum(1 for n in nodes if dict_or_empty(n.get("message")).get("role") == "assistant"),
        "duration_s": max(now - started, 0.0) if started else None, "locator": locator}


def live_samples(run_path: str, now: float | None = None) -> pd.DataFrame:
    """One `frames.SAMPLES` row per in-flight episode (module docstring), newest dispatch first;
    traces that already landed in the stream are left out."""
    now = time.time() if now is None else now
    folder = live_dir(run_path)
    names = _listdir(folder)
    if not names:
        return frames.empty(frames.SAMPLES)
    landed = landed_trace_ids(run_path)
    rows, dispatched = [], set()
    for name in names:
        tid = name[:-len(".jsonl")] if name.endswith(".jsonl") else None
        if tid is None or not _SAFE.match(tid) or tid in landed:
            continue
        path = os.path.join(folder, name)
        trace, dispatch, _pending = fold_deltas(_lines(path))
        if not trace and not dispatch:
            continue
        if isinstance(dispatch.get("id"), str):
            dispatched.add(dispatch["id"])
        rows.append(_row(LIVE_PREFIX + tid, dispatch, trace or {"id": tid}, path, now))
    pending_dir = os.path.join(folder, "pending")
    for name in _listdir(pending_dir):
        did = name[:-len(".json")] if name.endswith(".json") else None
        if did is None or not _SAFE.match(did) or did in dispatched:
            continue
        path = os.path.join(pending_dir, name)
        lines = _lines_of_json(path)
        if lines is not None:
            rows.append(_row(PENDING_PREFIX + did, lines, None, path, now))
    out = frames.typed(rows, frames.SAMPLES)
    return out.sort_values("duration_s", na_position="last", kind="stable").reset_index(drop=True)


def _lines_of_json(path: str) -> dict | None:
    """A pending file's dispatch dict (one JSON object, with or without a trailing newline)."""
    fid = file_id(path)
    if fid is None:
        return None

    def parse():
        try:
            with open_file(path) as fh:
                obj = orjson.loads(fh.read(1 << 20))
        except OSError:
            return None
        except orjson.JSONDecodeError:
            return False
        return obj if isinstance(obj, dict) else False
    real = os.path.realpath(path)
    obj = cache.shared.current(("prime-rl-pending", real), fid, parse)
    _remember(real, "not a JSON object (dispatch not shown)" if obj is False else None)
    return obj or None


def live_episode(run_path: str, run_id: str, sample_id: str, now: float | None = None) -> frames.Episode:
    """The partial trace of an in-flight episode as `frames.Episode` (its pending messages last);
    KeyError once it landed (or vanished)."""
    hit = live_samples(run_path, now)
    hit = hit[hit["sample_id"] == sample_id]
    if hit.empty:
        raise KeyError(f"{run_id}: no in-flight sample {sample_id!r} (it may have landed in the stream)")
    row = {k: (None if v is pd.NA or (isinstance(v, float) and v != v) else v) for k, v in hit.iloc[0].to_dict().items()}
    if sample_id.startswith(PENDING_PREFIX):
        dispatch, trace, pending = _lines_of_json(row["locator"]) or {}, None, []
    else:
        trace, dispatch, pending = fold_deltas(_lines(row["locator"]))
    record = {"id": dispatch.get("id"), "env": {"name": dispatch.get("env")}, "group": {"id": dispatch.get("group")},
              "task": {"key": dispatch.get("task")} if isinstance(dispatch.get("task"), str) else {},
              "traces": [trace] if trace else []}
    ep = to_episode(record, {**row, "step": _int(row.get("step")), "reward": None}, run_id, {})
    ep.messages += [message({"message": m}) for m in pending]
    ep.timing = {k: v for k, v in ep.timing.items() if v > 0}  # (phases not ended yet have end 0)
    ep.raw["in_flight"] = {"stage": row["status"].removeprefix("in flight: "), "dispatch": dispatch,
                           "pending_messages": len(pending)}
    return ep
