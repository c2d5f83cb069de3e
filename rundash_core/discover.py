"""Finding every run under the tracked directories, cheaply.

Discovery reads only what the runs list needs: directory entries, mtimes, small config files and
the tail of each metrics file. Full parses happen only for the runs a page shows.
"""
from __future__ import annotations

import os
import time
from collections import Counter

import pandas as pd

from .run import Run, RunError, path_run_id
from .sources import find_runs

COLUMNS = ["run_id", "name", "kind", "path", "status", "step", "max_steps", "created", "updated",
           "model", "attempts", "flavor", "train_envs", "eval_envs", "error"]


def list_runs(dirs: list[str | os.PathLike]) -> tuple[list[Run], list[str]]:
    """Run objects under `dirs` with unique, stable ids, and the errors for unreadable dirs."""
    found: list[tuple[str, type[Run]]] = []
    errors: list[str] = []
    seen: set[str] = set()
    for d in dirs:
        d = os.path.abspath(os.fspath(d))
        if not os.path.isdir(d):
            errors.append(f"{d}: {'not a directory' if os.path.exists(d) else 'no such directory'}")
            continue
        try:
            for path, cls in find_runs(d):
                real = os.path.realpath(path)
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


def discover(dirs: list[str | os.PathLike] | str | os.PathLike, *, now: float | None = None) -> pd.DataFrame:
    """One row per run under `dirs`, newest first (see COLUMNS)."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    runs, _errors = list_runs(list(dirs))
    now = time.time() if now is None else now
    rows = []
    for run in runs:
        try:
            ov = run.overview(full=False, now=now)
            row = {k: getattr(ov, k) for k in COLUMNS if hasattr(ov, k)}
            row["error"] = None
        except Exception as e:  # a run that cannot be summarised still lists
            row = {"run_id": run.run_id, "name": run.name, "kind": run.kind, "path": run.path,
                   "status": "unknown", "attempts": 1, "error": f"{type(e).__name__}: {e}"}
        rows.append(row)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("step", "max_steps"):
        frame[col] = frame[col].astype("Int64")
    frame["attempts"] = frame["attempts"].astype("int64")
    for col in ("created", "updated"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    mtimes = [_mtime(p) for p in frame["path"]]
    frame = frame.assign(_m=mtimes).sort_values("_m", ascending=False, kind="stable").drop(columns="_m")
    return frame.reset_index(drop=True)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
