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
from . import sources
from .io.files import file_id, seed_file_id, stat_memo
from .run import Run, RunError, derive_status, path_run_id
from .sources import find_runs, harbor, prime_rl, relax, swe_lego_rl, verl, verl_summary
from .sources.swe_lego_rl import SweLegoRLRun
from .sources.verl import VerlRun
from .sources.verl_summary import Brief, entry_size, is_file_logger, is_log_name, log_digest, stem

COLUMNS = ["run_id", "name", "kind", "path", "status", "step", "max_steps", "created", "updated",
           "model", "attempts", "flavor", "train_envs", "eval_envs", "error"]


def list_runs(dirs: list[str | os.PathLike]) -> tuple[list[Run], list[str]]:
    """Run objects under `dirs` with unique, stable ids, and the errors for unreadable dirs."""
    found, errors = _found(dirs)
    return [cls(path, run_id=run_id) for (path, cls, _digest), run_id in zip(found, _run_ids(found))], errors


def _found(dirs: list, listings: dict | None = None) -> tuple[list[tuple[str, type[Run], object]], list[str]]:
    """(path, Run class, the log's digest when discovery read it) per run under `dirs`, each file
    or directory once (by identity), and the errors for unreadable dirs. `listings`: the
    entries of folders already listed (`_listing`), not listed again."""
    found: list[tuple[str, type[Run], object]] = []
    errors: list[str] = []
    seen: set = set()
    for d in dirs:
        d = os.path.abspath(os.fspath(d))
        if not os.path.isdir(d):
            errors.append(f"{d}: {'not a directory' if os.path.exists(d) else 'no such directory'}")
            continue
        try:
            for path, cls, digest in _find_runs(d, listings):
                real = _identity(path)
                if real not in seen:
                    seen.add(real)
                    found.append((path, cls, digest))
        except RunError as e:
            errors.append(str(e))
    return found, errors


def _run_ids(found: list) -> list[str]:
    """The ids `list_runs` gives: the file or folder name, `<parent>:<name>` when two share a name,
    and the path hash on top when those collide too."""
    names = Counter(os.path.basename(p) for p, *_ in found)
    ids = []
    for path, *_ in found:
        name = os.path.basename(path)
        ids.append(name if names[name] == 1 else f"{os.path.basename(os.path.dirname(path))}:{name}")
    # `<parent>:<name>` can still collide (two `outputs/` parents): add the path hash
    taken = Counter(ids)
    return [run_id if taken[run_id] == 1 else f"{run_id}@{path_run_id(path)}" for (path, *_), run_id in zip(found, ids)]



def _lean_sources() -> bool:
    """Whether the registry holds just the built-in sources (relax and prime-rl claim child dirs
    only, SWE-Lego-RL and verl the logs): then `_find_runs` classifies the logs itself."""
    builtin = (("relax", relax.RelaxRun), ("prime-rl", prime_rl.PrimeRLRun),
               ("swe-lego-rl", SweLegoRLRun), ("verl", VerlRun))
    have = tuple((s.kind, s.run_class) for s in sources.SOURCES)
    return have == builtin and sources.SOURCES[2].find is swe_lego_rl.find_runs and \
        sources.SOURCES[3].find is verl_summary.find_runs


def _find_runs(folder: str, listings: dict | None) -> list[tuple[str, type[Run], object]]:
    """`sources.find_runs(folder)` with the folder's entries from `listings` when it was listed
    already; with the built-in sources, the logs are classified here in one pass (SWE-Lego-RL when
    the sibling `harbor_trials/` names it or its digest names trial dirs, else verl), keeping each
    log's digest for its row."""
    if not _lean_sources():
        return [(path, cls, None) for path, cls in find_runs(folder)]
    cls = sources.detect(folder)
    if cls is not None:
        return [(folder, cls, None)]
    entries = _sorted_entries(folder, listings)
    found: dict[str, tuple[type[Run], object]] = {}
    for source in sources.SOURCES[:2]:  # relax, prime-rl: child run dirs
        for path in source.find(entries):
            found.setdefault(path, (source.run_class, None))
    _find_logs(entries, listings, found)
    return [(path, cls, digest) for path, (cls, digest) in sorted(found.items())]


def _sorted_entries(folder: str, listings: dict | None) -> list[os.DirEntry]:
    entries = None if listings is None else listings.get(folder)
    try:
        if entries is None:
            entries = list(os.scandir(folder))
    except OSError as e:
        raise RunError(f"{folder}: cannot list directory ({e.strerror or e})") from e
    return sorted(entries, key=lambda e: e.name)


def _find_logs(entries: list[os.DirEntry], listings: dict | None, found: dict) -> None:
    """What `swe_lego_rl.find_runs` then `verl_summary.find_runs` add to `found` (the first
    claim wins): the logs among `entries` and in a `logs/` subfolder (one level each), and the
    file-logger JSONLs without a log of the same name next to them."""
    trials = None  # the sibling `harbor_trials/` of this folder (one check per folder)
    for e in entries:
        try:
            if e.name == "logs" and e.is_dir():
                try:
                    sub = _sorted_entries(e.path, listings)
                except RunError:
                    continue
                _find_logs(sub, listings, found)
            elif is_log_name(e.name) and e.is_file():
                if e.path in found:
                    continue
                if trials is None:
                    trials = harbor.workdir_trials(e.path) or ""
                found[e.path] = _classify(e.path, trials)
            elif e.is_file() and is_file_logger(e.path):
                base = e.path[: -len(".jsonl")]
                if not any(os.path.isfile(base + s) for s in verl_summary.LOG_SUFFIXES):
                    found.setdefault(e.path, (VerlRun, None))
        except OSError:
            continue


def _classify(path: str, trials: str) -> tuple[type[Run], object]:
    """(class, digest) of a log: `swe_lego_rl.is_run_file` with the folder's `harbor_trials/`
    looked up once (`trials`: "" when there is none)."""
    try:
        if file_id(path) is None:
            return VerlRun, None
        if trials and harbor.sibling_exp_dirs(path, stem(path)):
            return SweLegoRLRun, None
        digest = log_digest(path)
    except OSError:  # as `swe_lego_rl.find_runs` skips it: verl lists it
        return VerlRun, None
    return (SweLegoRLRun if digest is not None and digest.names_trials else VerlRun), digest


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
    the previous frame is returned again.

    One listing per folder: the entries listed (and stat'ed) for the folder signature are the
    ones the runs are found among, and their stats are the logs' fingerprints; a verl log's row
    is built from its digest without a Run object."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    now = time.time() if now is None else now
    key = ("discover-frame", tuple(os.path.abspath(os.fspath(d)) for d in dirs))
    listings: dict[str, list] = {}
    folders = _folders_sig(key[1], listings)
    last = cache.shared.peek(key)
    if last is not None and folders is not None and last[3] == folders:
        return _again(last, now)  # no entry changed: the same rows, statuses derived at `now`
    with stat_memo():
        if folders is not None:  # the listing's stats are what `file_id` would return now
            for entries in listings.values():
                for e in entries:
                    seed_file_id(e.path, e.stat())
        else:
            listings = {}
        found, _errors = _found(list(dirs), listings)
        rows, mtimes = [], []
        for (path, cls, digest), run_id in zip(found, _run_ids(found)):
            row, mtime = _lean_row(path, cls, digest, run_id, now, listings)
            rows.append(row)
            mtimes.append(mtime)
    order = sorted(range(len(rows)), key=lambda i: -mtimes[i])  # newest first (stable)
    rows = [rows[i] for i in order]
    frame = _frame_rows(rows)
    cache.shared.discard(key)
    briefs = [r[-1] for r in rows]
    if all(b is not None for b in briefs):  # only rows that are cached themselves
        cache.shared.get_or_create(key, lambda: (None, frame, briefs, folders), size=_frame_entry_size(frame, briefs, folders))
    return frame.copy()


def _lean_row(path: str, cls: type[Run], digest, run_id: str, now: float, listings: dict) -> tuple[tuple, float]:
    """(row values in COLUMNS order plus its Brief or None, mtime). A verl log read by discovery
    (its digest) is a row straight from the digest, as `quick_brief` makes it; any other run
    goes through its Run object (`_row`)."""
    brief = None
    if digest is not None and cls in (VerlRun, SweLegoRLRun) and path not in verl._STORED:
        log = path  # a console log: its own log
        fp = file_id(log)
        try:
            brief = _digest_brief(log, stem(log), digest, fp, listings)
        except Exception:  # noqa: BLE001 - the Run object's path below says what went wrong
            brief = None
    if brief is not None:
        base = os.path.basename(path)
        if run_id == base or run_id.endswith(":" + base):  # as VerlRun names it
            run_id = run_id[: len(run_id) - len(base)] + stem(path)
        return _brief_values(run_id, cls.kind, path, brief, now) + (brief,), fp.mtime if fp is not None else _mtime(path)
    run = cls(path, run_id=run_id)
    row = _row(run, now)
    return tuple(row.get(c) for c in COLUMNS) + (row.get("_brief"),), _mtime(run.path)


def _status(brief: Brief, now: float) -> str:
    return derive_status(finished=brief.final, updated=brief.updated, step=brief.step, max_steps=brief.max_steps,
                         now=now)


def _brief_values(run_id: str, kind: str, path: str, brief: Brief, now: float) -> tuple:
    """A verl log's row (values in COLUMNS order) from its Brief, the status derived at `now`;
    `created`/`updated` stay epoch seconds (`_frame_rows` converts them at once)."""
    return (run_id, brief.name, kind, path, _status(brief, now), brief.step, brief.max_steps, brief.started, brief.updated,
            brief.model, 1, brief.flavor, [], list(brief.eval_envs), None)


def _digest_brief(log: str, name: str, digest, fp, listings: dict) -> Brief:
    """`verl_summary.quick_brief` from the digest in hand: the `<stem>.jsonl` next to the log is
    looked up in the folder's listing (no stat of a file that is not there)."""
    jsonl = os.path.splitext(log)[0] + ".jsonl"
    folder, jname = os.path.split(jsonl)
    names = _names(folder, listings)
    jfp = None if names is not None and jname not in names else file_id(jsonl)
    return verl_summary.digest_brief(log, name, digest, fp, jfp)


def _names(folder: str, listings: dict) -> set | None:
    """The names in a folder's listing (None: not listed), made once per discovery pass."""
    key = ("names", folder)
    have = listings.get(key)
    if have is None and (entries := listings.get(folder)) is not None:
        have = listings[key] = {e.name for e in entries}
    return have


def _frame_entry_size(frame: pd.DataFrame, briefs: list, folders) -> int:
    """The cache size of a discover-frame entry without a deep walk of its briefs and folder
    signature: the frame's deep memory usage, the briefs by their strings, ~200 B per entry."""
    size = int(frame.memory_usage(index=True, deep=True).sum())
    size += sum(entry_size((b.name, b.model, b.flavor, *b.eval_envs)) for b in briefs)
    return size + 200 * sum(_sig_len(sig) for _mtime, sig in folders or ())


def _sig_len(sig: tuple) -> int:
    return sum(1 if e and isinstance(e[0], str) else _sig_len(e) for e in sig)


def _entries_sig(folder: str, listings: dict | None = None) -> tuple:
    with os.scandir(folder) as it:
        entries = list(it)
    if listings is not None:
        listings[folder] = entries
    out = []
    for e in entries:
        st = e.stat()
        out.append((e.name, st.st_size, st.st_mtime_ns))
        if e.name == "logs" and e.is_dir():
            out.append(_entries_sig(e.path, listings))
    out.sort(key=repr)
    return tuple(out)


def _folders_sig(dirs: tuple, listings: dict | None = None) -> tuple | None:
    """(folder mtime_ns, its entries' (name, size, mtime_ns), the `logs/` subfolder's) per tracked
    dir; None when one cannot be listed (then discovery runs in full). `listings` gets each
    folder's entries (their stats made), for discovery to find the runs among."""
    try:
        return tuple((os.stat(d).st_mtime_ns, _entries_sig(d, listings)) for d in dirs)
    except OSError:
        return None


def _again(last: tuple, now: float) -> pd.DataFrame:
    _sig, frame, briefs, _folders = last
    status = [_status(b, now) for b in briefs]
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
            return {**dict(zip(COLUMNS, _brief_values(run.run_id, run.kind, run.path, brief, now))), "_brief": brief}
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


def _frame_rows(rows: list[tuple]) -> pd.DataFrame:
    """Rows (values in COLUMNS order, in the frame's order) as a frame, built column by column
    (a frame from 600 dicts costs more than reading the logs)."""
    n = len(rows)
    if not n:
        return _empty_frame()
    data: dict = {}
    for i, (col, values) in enumerate(zip(COLUMNS, zip(*rows))):
        values = list(values)
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
    return pd.DataFrame(data, columns=COLUMNS)


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
