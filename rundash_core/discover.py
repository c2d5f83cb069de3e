"""Finding every run under the tracked directories, cheaply.

Discovery walks each tracked directory down to a depth (`RUNDASH_DEPTH`, default 4), never inside
a run, skipping hidden folders, virtualenvs, `node_modules`, `__pycache__`, checkpoint folders and
Harbor trial trees; the sources of the registry say which entries are runs. Each row is the run's
own summary (`Run.overview()`, what the run card shows too), which reads file ends and stats and is
cached by the files' fingerprints. When no listed entry changed and every run is a file (a log),
the previous frame is returned with its statuses derived again at `now`.

A folder is listed up to `MAX_ENTRIES` entries (in the order the file system gives them): a folder
with more is cut there, so one request never lists (or stats) a folder of 100k entries whole, and
the cut is a note `scan()` returns with the errors (`rd.discover` does not raise for it); so is a
folder below a tracked dir that cannot be listed. Each folder is listed once per tracked dir (links
to a parent make no cycle), and a run reached through links is listed once, where it really is.
A file name that is not UTF-8 lists escaped (`\\udcff`), with an error saying so.
"""
from __future__ import annotations

import hashlib
import os
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rundash_core import cache, sources
from rundash_core.io.files import OUTSIDE_ROOTS, file_id, inside_roots, seed_file_id, shown_path, stat_memo
from rundash_core.overview import Overview, summary_fields
from rundash_core.run import Run, RunError
from rundash_core.sources.verl.overview import stem
from rundash_core.sources.wandb import run as wandb_run

COLUMNS = ["run_id", "name", "kind", "path", "status", "step", "max_steps", "created", "updated",
           "model", "attempts", "flavor", "train_envs", "eval_envs", "project", "experiment", "duration_s",
           "resumed_from", "error"]  # (the summary's fields: `run.SUMMARY_FIELDS`)
DEFAULT_DEPTH = 4
SKIP_NAMES = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env", "harbor_trials",
                        "checkpoints", "checkpoint", "ckpt", "ckpts"})
SKIP_PATTERN = re.compile(r"^(?:global_step_?\d+|checkpoint-\d+|step_\d+|iter_\d+|attempt_\d+|latest)$")  # checkpoints, run internals
MAX_ENTRIES = 20_000  # entries listed per folder; a folder with more is cut (and said so)


def default_depth() -> int:
    try:
        return max(0, int(os.environ.get("RUNDASH_DEPTH", DEFAULT_DEPTH)))
    except ValueError:
        return DEFAULT_DEPTH


# Walking ------------------------------------------------------------------------------------------
@dataclass
class Walk:
    """What one walk of the tracked directories found."""

    runs: list[tuple[str, type[Run]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # tracked directories that cannot be read
    notes: list[str] = field(default_factory=list)  # folders listed in part (over MAX_ENTRIES entries) or not at all
    unlisted: bool = False  # a folder below a tracked dir could not be listed (said in `notes`)
    signature: list = field(default_factory=list)  # every listed folder's entries (name, size, mtime)


def _skipped(entry: os.DirEntry) -> bool:
    return entry.name.startswith(".") or entry.name in SKIP_NAMES or SKIP_PATTERN.match(entry.name) is not None


def _listing(folder: str) -> tuple[list[os.DirEntry], tuple, bool]:
    """A folder's entries (by name; links that resolve outside the allowed roots left out), their
    signature, each entry stat'ed once, and whether the listing was cut: at most MAX_ENTRIES
    entries are read (in the file system's order). A cut listing's signature ends with the cut,
    the number read and the folder's own mtime (which changes when an entry is added, removed or
    renamed, also past the cut)."""
    entries, cut, n = [], False, 0
    with os.scandir(folder) as it:
        for e in it:
            if n == MAX_ENTRIES:
                cut = True
                break
            n += 1
            if not e.is_symlink() or inside_roots(e.path):
                entries.append(e)
    entries.sort(key=lambda e: e.name)
    sig = []
    for e in entries:
        try:
            st = e.stat()
            seed_file_id(e.path, st)
            sig.append((e.name, st.st_size, st.st_mtime_ns))
        except OSError:
            seed_file_id(e.path, None)
            sig.append((e.name, -1, -1))
    if cut:
        sig.append(("\0cut", n, os.stat(folder).st_mtime_ns))  # "\0": no file name
    return entries, tuple(sig), cut


def walk(dirs: list[str], depth: int) -> Walk:
    """The runs under `dirs` (a tracked path may itself be a run, a folder or a log file), each
    file or directory once (by identity), folders listed down to `depth` below each dir. Each
    folder is listed once too (by identity): links to a parent would otherwise make the walk
    grow as (links per level) ** depth."""
    out, seen = Walk(), {}

    def add(path: str, cls: type[Run]) -> None:
        fp = file_id(path)  # a log: the listing's stat
        try:
            st = fp or os.stat(path)
            ident = (fp.dev, fp.ino) if fp else (st.st_dev, st.st_ino)
        except OSError:
            ident = os.path.realpath(path)
        if ident not in seen:
            seen[ident] = len(out.runs)
            out.runs.append((path, cls))
        elif os.path.islink(out.runs[seen[ident]][0]) and not os.path.islink(path):
            out.runs[seen[ident]] = (path, cls)  # a run met through a link first: listed where it is

    for d in dirs:
        if not inside_roots(d):
            out.errors.append(f"{d}: {OUTSIDE_ROOTS}")
            continue
        if not os.path.exists(d):
            out.errors.append(f"{d}: {'broken symlink' if os.path.islink(d) else 'no such directory'}")
            continue
        cls = sources.detect(d)
        if cls is not None:
            add(d, cls)
            continue
        if not os.path.isdir(d):
            out.errors.append(f"{d}: not a directory, and not a run file of a supported kind")
            continue
        queue, listed = deque([(d, 0)]), set()
        while queue:
            folder, level = queue.popleft()
            try:
                if folder == d:
                    _first_listing(os.stat(d), listed)
                entries, sig, cut = _listing(folder)
            except OSError as e:
                if folder == d:
                    out.errors.append(f"{d}: cannot list directory ({e.strerror or e})")
                else:
                    out.unlisted = True
                    out.notes.append(f"{folder}: cannot be listed ({e.strerror or e}): runs inside it are not shown")
                continue
            out.signature.append((folder, sig))
            if cut:
                out.notes.append(f"{folder}: more than {MAX_ENTRIES:,} entries, only {MAX_ENTRIES:,} of them "
                                 "listed (runs among the others are not shown)")
            if any(e.name == "pyvenv.cfg" for e in entries):
                continue  # a virtualenv
            if noise := wandb_run.not_runs(entries):  # a wandb/ folder: W&B's own files, older attempts
                entries = [e for e in entries if e.name not in noise]
            found = sources.runs_among(entries)
            for path, run_class in sorted(found.items()):
                add(path, run_class)
            if level < depth:
                for e in entries:
                    try:
                        if (e.path not in found and not _skipped(e) and e.is_dir()
                                and _first_listing(e.stat(), listed)):
                            queue.append((e.path, level + 1))
                    except OSError:
                        continue
    return out


def _first_listing(st: os.stat_result, listed: set) -> bool:
    """True the first time a folder (by device and inode) is met in a walk."""
    ident = (st.st_dev, st.st_ino)
    if ident in listed:
        return False
    listed.add(ident)
    return True


def _name(path: str) -> str:
    """A run's name: its folder's, or its log's without the suffix."""
    base = os.path.basename(path)
    return base if os.path.isdir(path) else stem(path)


def run_ids(paths: list[str]) -> list[str]:
    """The run's name, `<parent>:<name>` when two share a name, and the path hash on top when those
    collide too (stable across restarts)."""
    names = [_name(p) for p in paths]
    counts = Counter(names)
    ids = [n if counts[n] == 1 else f"{os.path.basename(os.path.dirname(p))}:{n}" for p, n in zip(paths, names)]
    taken = Counter(ids)
    return [i if taken[i] == 1 else f"{i}@{_path_hash(p)}" for p, i in zip(paths, ids)]


def _path_hash(path: str) -> str:
    """`run.path_run_id`, also for a file name that is not UTF-8 (os.fsencode gives its bytes back;
    `str.encode` raises on them)."""
    return hashlib.sha1(os.fsencode(os.path.realpath(path))).hexdigest()[:10]


def list_runs(dirs: list[str | os.PathLike], *, depth: int | None = None) -> tuple[list[Run], list[str]]:
    """Run objects under `dirs` with unique, stable ids, and the errors for unreadable dirs."""
    dirs, empty = _non_empty(dirs)
    w = walk([os.path.abspath(os.fspath(d)) for d in dirs], default_depth() if depth is None else depth)
    paths = [p for p, _cls in w.runs]
    return [cls(p, run_id=i) for (p, cls), i in zip(w.runs, run_ids(paths))], empty + w.errors


def _non_empty(dirs: list) -> tuple[list, list[str]]:
    """(the paths that are not empty, an error for each empty one): `os.path.abspath("")` is the
    working directory, which nobody asked to track."""
    return ([d for d in dirs if os.fspath(d).strip()],
            [f"{os.fspath(d)!r}: an empty path, not a directory" for d in dirs if not os.fspath(d).strip()])


# The runs frame -----------------------------------------------------------------------------------
def scan(dirs, *, depth: int | None = None, now: float | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(one row per run under `dirs`, newest first; the tracked dirs that cannot be read, then the
    folders listed only in part or not at all)."""
    frame, errors, notes = _scan(dirs, depth=depth, now=now)
    return frame, errors + notes


def _scan(dirs, *, depth: int | None = None, now: float | None = None) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(the runs frame; the tracked dirs that cannot be read; the folders listed only in part)."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    dirs, empty = _non_empty(dirs)
    if empty:
        frame, errors, notes = _scan(dirs, depth=depth, now=now)
        return frame, empty + errors, notes
    dirs = [os.path.abspath(os.path.expanduser(os.fspath(d))) for d in dirs]
    depth = default_depth() if depth is None else depth
    now = time.time() if now is None else now
    key = ("discover-frame", tuple(dirs), depth)
    last = cache.shared.peek(key)
    if last is not None and _unchanged(last[0]):
        return _again(last, now), [], list(last[3])
    with stat_memo():
        w = walk(dirs, depth)
        ids = run_ids([p for p, _cls in w.runs])
        rows = [_row(cls, path, run_id, now) for (path, cls), run_id in zip(w.runs, ids)]
    rows.sort(key=lambda r: -max((t.timestamp() for t in (r[0].updated, r[0].touched) if t is not None), default=0.0))
    frame = _frame([r[1] for r in rows])
    cache.shared.discard(key)
    # Kept when every run is a file of the listed folders (a folder run's own files are not listed)
    # and every tracked dir could be read: then a warm call re-lists those folders and nothing else.
    if not w.errors and not w.unlisted and all(os.path.isfile(r[0].path) for r in rows):
        signature, overviews, notes = tuple(w.signature), [r[0] for r in rows], tuple(w.notes)
        cache.shared.get_or_create(key, lambda: (signature, frame, overviews, notes),
                                   size=_entry_size(frame, signature) + 1000 * len(overviews))
    return frame.copy(), list(w.errors), list(w.notes)


def _unchanged(signature: tuple) -> bool:
    """Every folder of the last walk lists the same entries with the same sizes and mtimes."""
    try:
        return all(_listing(folder)[1] == sig for folder, sig in signature)
    except OSError:
        return False


def discover(dirs, *, depth: int | None = None, now: float | None = None) -> pd.DataFrame:
    """One row per run under `dirs` (see COLUMNS), newest first; RunError names the tracked
    directories that do not exist or cannot be listed."""
    frame, errors, _notes = _scan(dirs, depth=depth, now=now)  # a folder listed in part is no error
    if errors:
        raise RunError("; ".join(errors))
    return frame


def _row(cls: type[Run], path: str, run_id: str, now: float) -> tuple[Overview, tuple]:
    """(the run's summary, its row in COLUMNS order); a run that cannot be summarised still lists."""
    run = cls(path, run_id=run_id)
    try:
        ov, error = run.overview(now), None
        for field in ("step", "max_steps", "attempts"):  # a frame column of Int64: a huge number is no step
            if (v := getattr(ov, field)) is not None and not -(1 << 62) < v < 1 << 62:
                setattr(ov, field, None if field != "attempts" else 1)
                error = f"{field} out of range ({str(v)[:30]})"
    except Exception as e:  # noqa: BLE001 - one bad run costs its row, not the list
        ov, error = Overview(run_id=run.run_id, name=run.name, kind=run.kind, path=run.path), f"{type(e).__name__}: {e}"
    fields = summary_fields(ov)
    row = (*(fields[c] for c in COLUMNS[:-1]), error)
    if not _utf8(path):
        row = row[:-1] + (error or NOT_UTF8_NAME,)
    return ov, tuple(_printable(v) for v in row)


NOT_UTF8_NAME = "its path is not valid UTF-8: shown with \\x escapes (it opens; renaming it makes links to it plain)"


def _utf8(text: str) -> bool:
    """Whether a string can be stored in a frame (pandas' str columns are UTF-8): a file name
    with bytes that are not UTF-8 comes back from the listing with surrogate escapes."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _printable(value):
    """A row value with the bytes of a non-UTF-8 file name written as `\\xff` (`shown_path`)."""
    if isinstance(value, str) and not _utf8(value):
        return shown_path(value)
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def _again(last: tuple, now: float) -> pd.DataFrame:
    _sig, frame, overviews, _notes = last
    status = [ov.status_at(now) for ov in overviews]
    frame = frame.copy()
    if list(frame["status"]) != status:
        frame["status"] = status
    return frame


def _entry_size(frame: pd.DataFrame, signature: tuple) -> int:
    return int(frame.memory_usage(index=True, deep=True).sum()) + 200 * sum(len(s) for _f, s in signature)


def _frame(rows: list[tuple]) -> pd.DataFrame:
    """Rows (values in COLUMNS order) as a frame, built column by column."""
    n = len(rows)
    columns = list(zip(*rows)) if n else [()] * len(COLUMNS)
    data: dict = {}
    for col, values in zip(COLUMNS, columns):
        values = list(values)
        if col in ("step", "max_steps"):
            data[col] = pd.array(values, dtype="Int64")
        elif col in ("created", "updated"):  # through int64 ns: a column of Timestamps converts slowly
            ns = np.array([v.value if v is not None else np.iinfo("int64").min for v in values], dtype="int64")
            data[col] = pd.Series(ns.view("datetime64[ns]")).dt.tz_localize("UTC")
        elif col == "attempts":
            data[col] = np.array(values, dtype="int64")
        elif col == "duration_s":
            data[col] = np.array([np.nan if v is None else v for v in values], dtype="float64")
        elif col in ("train_envs", "eval_envs", "resumed_from", "error"):
            data[col] = np.empty(n, dtype=object)
            data[col][:] = values
        else:
            data[col] = pd.array(values, dtype=object)
    return pd.DataFrame(data, columns=COLUMNS)
