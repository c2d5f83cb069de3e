"""The windows of a log read (`logs.Window`: one file's kept lines) dated and merged into one
frame, the same dating whatever else is read with a file (a split pane and the merged pane show a
line at one time).

A line's time is its own stamp; a time of day is dated by the file's mtime, unless the newest
dated line of the run's logs (`newest`, from `run_dates`) is more than a day before that
mtime (a copied run: its mtimes are the copy's), then by that line. A line without a stamp is
placed by the best evidence (`estimate_times`) and flagged `estimated`. The merge is a k-way merge
by time that keeps each file's own order."""
from __future__ import annotations

import heapq
import math

import numpy as np
import pandas as pd

from rundash_core.io.files import file_id, open_file
from rundash_core.logs import blocks as logblocks
from rundash_core.logs import line as logtext

COPIED_S = 86400.0
DATED_BYTES = 64 << 10  # looked back from each log's end for its newest dated line (`run_dates`)


def last_dated(stamps: list, mtime: float) -> float | None:
    """The time of the last of `stamps` that says its date (ISO, or a month-day), or None."""
    s = next((s for s in reversed(stamps) if s is not None and (s.when or s.month_day)), None)
    t = logtext.resolve_times([s], mtime)[0] if s is not None else None
    return t if t is not None and t == t else None


def run_dates(listing: pd.DataFrame, specs: list, at_end: dict, real_path) -> dict:
    """{spec path: the newest dated line (ISO, month-day) of the logs of its attempt (and of those
    of no attempt), or of the run}, files not read now included: what dates a file whose lines say
    only the time of day, the same in every view. `at_end`: {real path: the window just read up to
    that file's end} (its own lines, no read); `real_path(listed path)`: the file behind it."""
    by_attempt: dict = {}
    attempt_of = {}
    for p, a in zip(listing["path"], listing["attempt"]):
        attempt_of[p] = key = None if pd.isna(a) else int(a)
        t = newest_dated(real_path(p), at_end.get(real_path(p)))
        if t is not None and t > by_attempt.get(key, -math.inf):
            by_attempt[key] = t
    out = {}
    for spec in specs:
        a = attempt_of.get(spec.path)
        near = list(by_attempt.values()) if a is None else [by_attempt.get(a, -math.inf), by_attempt.get(None, -math.inf)]
        out[spec.path] = max(near) if near and max(near) > -math.inf else None
    return out


_dated_seen: dict[str, tuple] = {}  # real path → ((dev, ino), size, mtime_ns, newest dated time)


def newest_dated(real: str, window=None) -> float | None:
    """The time of a log's last dated line, looked for in its last DATED_BYTES once per file
    version (a grown file: in what was appended since), or in `window` (a `reading.Window`), just
    read up to its end."""
    seen = _dated_seen.get(real)
    if window is not None and window.version is not None and window.every_line:
        t = last_dated(window.stamps, window.mtime)
        same = seen is not None and seen[0] == window.version[:2] and seen[1] == window.start
        if t is not None or same or window.start == 0:  # else: its dated line may be before the window
            t = t if t is not None or not same else seen[3]
            _dated_seen[real] = (window.version[:2], window.end, window.version[2], t)
            return t
    fid = file_id(real)
    if fid is None:
        return None
    if seen is not None and seen[0] == (fid.dev, fid.ino) and seen[1:3] == (fid.size, fid.mtime_ns):
        return seen[3]
    grown = seen is not None and seen[0] == (fid.dev, fid.ino) and fid.size > seen[1]
    start = max(seen[1] if grown else 0, fid.size - DATED_BYTES)
    try:
        with open_file(real) as fh:
            fh.seek(start)
            data = fh.read(fid.size - start)
    except OSError:
        return None
    raws = logblocks.split_lines(data, start)[1 if start > 0 and not grown else 0:]  # (a line cut at `start`)
    stamp = next((st for _, raw in reversed(raws) if (st := logtext.parse(raw).stamp) is not None
                  and (st.when or st.month_day)), None)
    t = last_dated([stamp], fid.mtime) if stamp is not None else seen[3] if grown else None
    _dated_seen[real] = ((fid.dev, fid.ino), fid.size, fid.mtime_ns, t)
    return t


def copied(mtime: float, newest: float | None) -> bool:
    """Is a file's mtime not its last write (a copy), by the run's newest dated line?"""
    return newest is not None and mtime - newest > COPIED_S


def assign_times(windows: list, newest: dict | None = None) -> None:
    """Each kept line's time and whether it is estimated. `newest`: {path: the newest dated time
    of the run's logs around it}; without it, the dated lines of the windows read together."""
    if newest is None:
        dated = [t for w in windows if (t := last_dated(w.stamps, w.mtime)) is not None]
        newest = dict.fromkeys((w.spec.path for w in windows), max(dated, default=None))
    for w in windows:
        near = newest.get(w.spec.path)
        is_copy = copied(w.mtime, near)
        own = logtext.resolve_times(w.stamps, near + 3600.0 if is_copy else w.mtime)
        end = (near if is_copy else w.mtime) if w.at_end else None  # (a copy ended with the run's dated lines)
        times, estimated = estimate_times(own, w.steps, w.tied, end=end)
        kept = np.asarray(w.kept, dtype=np.intp)
        w.times, w.estimated = times[kept].tolist(), estimated[kept].tolist()


def estimate_times(own: list[float], steps: dict, tied: list, *, end: float | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Times of a file's lines read in order (`own`: each line's stamp, NaN when it has none) and
    which are estimated. The clock: each stamp not earlier than the stamps before it (a relayed
    older stamp is shown, not followed); a `step:N … timing_s/step:X` line (`steps`: {line: X}) X seconds
    after the clock before it (never past the next stamp), and before the first stamp X seconds
    apart going back; `end`: the last line's time (a file read to its end: its mtime, or for a
    copy the run's newest dated line). A line
    without a stamp is interpolated between the clock points around it (the first / last point's
    time outside them); a continuation line (`tied`: their indices; a traceback) takes its record's time."""
    n = len(own)
    times = np.asarray(own, dtype="float64").reshape(n)
    unknown = np.isnan(times)
    if not unknown.any():
        return times, np.zeros(n, dtype=bool)
    tied_at = np.zeros(n, dtype=bool)
    tied_at[np.asarray(tied, dtype=np.intp)] = True
    tied_at &= unknown
    clocked = np.zeros(n, dtype=bool)
    clocked[np.asarray(list(steps), dtype=np.intp)] = True
    clocked = np.flatnonzero((clocked | ~unknown) & ~tied_at).tolist()
    points: list[list] = []  # [line, time] of the clock, in line order, times not decreasing
    high = -math.inf
    for i in clocked:
        t = own[i]
        if t == t:
            if t >= high:
                high = t
                k = len(points) - 1
                while k >= 0 and points[k][1] > t:  # step estimates past this stamp: held to it
                    points[k][1] = t
                    k -= 1
                points.append([i, t])
        elif points:
            points.append([i, points[-1][1] + steps[i]])
    free = np.flatnonzero(~tied_at)
    if end is not None and len(free) and (not points or end >= points[-1][1] and points[-1][0] < free[-1]):
        points.append([int(free[-1]), end])
    if points:  # step lines before the first clock point, going back
        clock, back = points[0][1], []
        for i in reversed([i for i in clocked if i < points[0][0]]):
            back.append([i, clock])
            clock -= steps[i]
        points[:0] = back[::-1]
        at = free[unknown[free]]
        xp, fp = zip(*points)
        times[at] = np.interp(at, xp, fp)
    source = np.maximum.accumulate(np.where(tied_at, 0, np.arange(n)))  # a continuation: its record's line
    estimated = unknown & ~np.isnan(times)
    return times[source], estimated[source]


def merge(windows: list, want: int) -> tuple[pd.DataFrame, dict]:
    """The windows interleaved by time, each file's own order kept (a k-way merge on each file's
    clock: a relayed older stamp stays where its file put it), the last `want` lines; `older`:
    where each file's next older page ends."""
    if len(windows) == 1:  # one file: its own order, nothing to merge
        n = len(windows[0].lines)
        picks = [(0, j) for j in range(max(0, n - want) if want > 0 else n, n)]
    else:
        streams = [[(k, wi, j) for j, k in enumerate(_order_keys(w.times))] for wi, w in enumerate(windows)]
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
        "offset": pd.array([windows[wi].lines[j][0] for wi, j in picks], dtype="Int64"),
        "estimated": pd.arrays.BooleanArray(np.asarray([windows[wi].estimated[j] for wi, j in picks], dtype=bool),
                                            np.zeros(len(picks), dtype=bool))})
    return frame, older


def _order_keys(times: list[float]) -> list[float]:
    """A file's merge keys: its times, never going back (-inf before the first known one)."""
    keys = np.asarray(times, dtype="float64")
    return np.fmax.accumulate(np.where(np.isnan(keys), -np.inf, keys)).tolist() if len(keys) else []
