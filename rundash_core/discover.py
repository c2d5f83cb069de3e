"""Finding every run under the tracked directories, cheaply.

Discovery reads only what the runs list needs: directory entries, mtimes, small config files and
the tail of each metrics file. Full parses happen only for the runs a page shows.
"""
from __future__ import annotations

import os
import time
from collections import Counter

import numpy as np
import pandas as pd

from . import cache
from .io.files import file_id, stat_memo
from .run import Run, RunError, derive_status, path_run_id
from .sources import find_runs, verl, verl_summary
from .sources.verl import VerlRun
from .sources.verl_summary import entry_size

COLUMNS = ["run_id", "name", "kind", "path", "status", "step", "max_steps", "created", "updated",
           "model", "attempts", "flavor", "train_envs", "eval_envs", "error"]


def list_runs(dirs: list[str | os.PathLike]) -> tuple[list[Run], list[str]]:
    """Run objects under `dirs` with unique, stable ids, and the errors for unreadable dirs."""
    found: list[tuple[str, type[Run]]] = []
    errors: list[str] = []
    seen: set = set()
    for d in dirs:
        d = os.path.abspath(os.fspath(d))
        if not os.path.isdir(d):
            errors.append(f"{d}: {'not a directory' if os.path.exists(d) else 'no such directory'}")
            continue
        try:
            for path, cls in find_runs(d):
                real = _identity(path)
                if real not in seen:
                    seen.add(real)
                    found.append((path, cls))
        except RunError as e:
            errors.append(str(e))
    names = Counter(os.path.basename(p) for p, _ in found)
    ids = []
    for path, _cls in found:
        name = os.path.basename(path)
        ids.append(name if names[name] == 1 else f"{os.path.basename(os.path.dirname(path))}:{name}")
    # `<parent>:<name>` can still collide (two `outputs/` parents): add the path hash
    taken = Counter(ids)
    runs = [cls(path, run_id=run_id if taken[run_id] == 1 else f"{run_id}@{path_run_id(path)}")
            for (path, cls), run_id in zip(found, ids)]
    return runs, errors


def _identity(path: str):
    """Which file or directory a path is: (dev, ino) from one (memoized) stat, else its realpath."""
    fp = file_id(path)
    if fp is not None:
        return fp.dev, fp.ino
    try:
        st = os.stat(path)
        return st.st_dev, st.st_ino
    except OSError:
        return os.path.realpath(path)


def discover(dirs: list[str | os.PathLike] | str | os.PathLike, *, now: float | None = None) -> pd.DataFrame:
    """One row per run under `dirs`, newest first (see COLUMNS).

    Cheap by design: a verl log's row comes from one read of its ends, cached by its fingerprint
    (an unchanged log costs one stat); the status is derived at each call from the cached
    `updated`, so a run turns from running to stopped without a re-read. When no row changed,
    the previous frame is returned again."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    now = time.time() if now is None else now
    key = ("discover-frame", tuple(os.path.abspath(os.fspath(d)) for d in dirs))
    folders = _folders_sig(key[1])
    last = cache.shared.peek(key)
    if last is not None and folders is not None and last[3] == folders:
        return _again(last, now)  # no entry changed: the same rows, statuses derived at `now`
    with stat_memo():
        runs, _errors = list_runs(list(dirs))
        rows = [_row(run, now) for run in runs]
        mtimes = [_mtime(run.path) for run in runs]
    frame = _frame(rows, mtimes)
    cache.shared.discard(key)
    if all(r.get("_brief") is not None for r in rows):  # only rows that are cached themselves
        order = sorted(range(len(rows)), key=lambda i: -mtimes[i])  # the frame's (stable) order
        briefs = [rows[i]["_brief"] for i in order]
        cache.shared.get_or_create(key, lambda: (None, frame, briefs, folders), size=_frame_entry_size(frame, briefs, folders))
    return frame.copy()


def _frame_entry_size(frame: pd.DataFrame, briefs: list, folders) -> int:
    """The cache size of a discover-frame entry without a deep walk of its briefs and folder
    signature: the frame's deep memory usage, the briefs by their strings, ~200 B per entry."""
    size = int(frame.memory_usage(index=True, deep=True).sum())
    size += sum(entry_size((b.name, b.model, b.flavor, *b.eval_envs)) for b in briefs)
    return size + 200 * sum(_sig_len(sig) for _mtime, sig in folders or ())


def _sig_len(sig: tuple) -> int:
    return sum(1 if e and isinstance(e[0], str) else _sig_len(e) for e in sig)


def _entries_sig(folder: str) -> tuple:
    out = []
    with os.scandir(folder) as it:
        for e in it:
            st = e.stat()
            out.append((e.name, st.st_size, st.st_mtime_ns))
            if e.name == "logs" and e.is_dir():
                out.append(_entries_sig(e.path))
    out.sort(key=repr)
    return tuple(out)


def _folders_sig(dirs: tuple) -> tuple | None:
    """(folder mtime_ns, its entries' (name, size, mtime_ns), the `logs/` subfolder's) per tracked
    dir; None when one cannot be listed (then discovery runs in full)."""
    try:
        return tuple((os.stat(d).st_mtime_ns, _entries_sig(d)) for d in dirs)
    except OSError:
        return None


def _again(last: tuple, now: float) -> pd.DataFrame:
    _sig, frame, briefs, _folders = last
    status = [derive_status(finished=b.final, updated=b.updated, step=b.step, max_steps=b.max_steps, now=now)
              for b in briefs]
    frame = frame.copy()
    if list(frame["status"]) != status:
        frame["status"] = status
    return frame


def _brief(run: Run):
    """A verl log's row from its digest (`verl_summary.quick_brief`); None when the run has no
    log of its own or a parse of the log is in the cache (then `overview(full=False)` uses it)."""
    if not isinstance(run, VerlRun):
        return None
    log = run.log_path()
    if log is None or (log in verl._STORED and run._cached_log_store() is not None):
        return None
    return verl_summary.quick_brief(log, run.name)


def _row(run: Run, now: float) -> dict:
    """One row; a verl row keeps `created`/`updated` as epoch seconds (`_frame` converts them)."""
    try:
        brief = _brief(run)
        if brief is not None:
            status = derive_status(finished=brief.final, updated=brief.updated, step=brief.step,
                                   max_steps=brief.max_steps, now=now)
            return {"run_id": run.run_id, "name": brief.name, "kind": run.kind, "path": run.path, "status": status,
                    "step": brief.step, "max_steps": brief.max_steps, "created": brief.started,
                    "updated": brief.updated, "model": brief.model, "attempts": 1, "flavor": brief.flavor,
                    "train_envs": [], "eval_envs": list(brief.eval_envs), "error": None, "_brief": brief}
        ov = run.overview(full=False, now=now)
        row = {k: getattr(ov, k) for k in COLUMNS if hasattr(ov, k)}
        row["error"] = None
    except Exception as e:  # a run that cannot be summarised still lists
        row = {"run_id": run.run_id, "name": run.name, "kind": run.kind, "path": run.path,
               "status": "unknown", "attempts": 1, "error": f"{type(e).__name__}: {e}"}
    return row


def _times(values: list) -> pd.Series:
    """A UTC datetime column from Timestamps and epoch seconds: the seconds converted at once (as
    `run.utc` would one by one)."""
    secs = np.array([v if isinstance(v, float) else np.nan for v in values], dtype="float64")
    out = pd.Series(pd.to_datetime(secs, unit="s", utc=True))
    other = [i for i, v in enumerate(values) if v is not None and not isinstance(v, float)]
    if other:
        out = out.astype(object)
        out.iloc[other] = [values[i] for i in other]
        out = pd.to_datetime(out, utc=True)
    return out


def _frame(rows: list[dict], mtimes: list[float]) -> pd.DataFrame:
    """The rows as a frame, newest first: built column by column (a frame from 600 dicts costs
    more than reading the logs)."""
    n = len(rows)
    if not n:
        return _empty_frame()
    data: dict = {}
    for col in COLUMNS:
        values = [r.get(col) for r in rows]
        if col in ("step", "max_steps"):
            data[col] = pd.array(values, dtype="Int64")
        elif col in ("created", "updated"):
            data[col] = _times(values)
        elif col == "attempts":
            data[col] = np.array(values, dtype="int64")
        elif col in ("train_envs", "eval_envs", "error"):
            data[col] = np.empty(n, dtype=object)
            data[col][:] = values
        else:
            data[col] = values
    order = np.argsort(-np.array(mtimes, dtype="float64"), kind="stable")
    return pd.DataFrame(data, columns=COLUMNS).take(order).reset_index(drop=True)


def _empty_frame() -> pd.DataFrame:
    frame = pd.DataFrame([], columns=COLUMNS)
    for col in ("step", "max_steps"):
        frame[col] = frame[col].astype("Int64")
    frame["attempts"] = frame["attempts"].astype("int64")
    for col in ("created", "updated"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    return frame


def _mtime(path: str) -> float:
    fp = file_id(path)  # a log: its stat is already memoized
    if fp is not None:
        return fp.mtime
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
