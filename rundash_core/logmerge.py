"""The windows of a log read (`logs.Window`: one file's kept lines) dated and merged into one
frame: times from each line's stamp and its file's mtime (a copied run dated by its other logs),
then a k-way merge by time that keeps each file's own order."""
from __future__ import annotations

import heapq

import numpy as np
import pandas as pd

from . import logtext

COPIED_S = 86400.0


def assign_times(windows: list) -> None:
    """Each kept line's time. A file whose lines say only the time of day is dated by its mtime,
    unless the dated lines of the other files read end more than a day before that mtime (a
    copied run: its mtimes are the copy's): then by those lines."""
    dated = [t for w in windows if (t := w.last_dated()) is not None and t == t]
    newest = max(dated, default=None)
    for w in windows:
        anchor = w.mtime
        if newest is not None and w.mtime - newest > COPIED_S:
            anchor = newest + 3600.0
        times = logtext.resolve_times(w.stamps, anchor)
        w.times = [times[i] for i in w.kept]


def merge(windows: list, want: int) -> tuple[pd.DataFrame, dict]:
    """The windows interleaved by time, each file's own order kept (a k-way merge), the last
    `want` lines; `older`: where each file's next older page ends."""
    if len(windows) == 1:  # one file: its own order, nothing to merge
        n = len(windows[0].lines)
        picks = [(0, j) for j in range(max(0, n - want) if want > 0 else n, n)]
    else:
        streams = [[(_key(t), wi, j) for j, t in enumerate(w.times)] for wi, w in enumerate(windows)]
        picks = [(wi, j) for _, wi, j in heapq.merge(*streams)][-want:] if want > 0 else []
    first_kept: dict[int, int] = {}
    for wi, j in picks:
        first_kept.setdefault(wi, j)
    older = {}
    for wi, w in enumerate(windows):
        j = first_kept.get(wi)
        older[w.spec.path] = w.start if j == 0 or (j is None and not w.lines) else (
            w.lines[j][0] if j is not None else w.end)
    frame = pd.DataFrame({  # built in the schema's dtypes (`frames.LOG_LINES`) directly: no per-cell pass
        "time": pd.to_datetime(np.asarray([windows[wi].times[j] for wi, j in picks], dtype="float64") * 1e9,
                               utc=True).astype("datetime64[ns, UTC]"),
        "component": pd.Series([windows[wi].spec.component for wi, _ in picks], dtype="str"),
        "level": pd.Series([windows[wi].levels[j] for wi, j in picks], dtype="str"),
        "text": pd.Series([windows[wi].lines[j][1].text for wi, j in picks], dtype="str"),
        "path": pd.Series([windows[wi].spec.path for wi, _ in picks], dtype="str"),
        "offset": pd.array([windows[wi].lines[j][0] for wi, j in picks], dtype="Int64")})
    return frame, older


def _key(t: float) -> float:
    return float("-inf") if t != t else t
