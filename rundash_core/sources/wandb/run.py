"""W&B run folders (`wandb/run-*`, `wandb/offline-run-*`): the run in its `run-<id>.wandb`
transaction log, read directly (wandb spec 1, 2); nothing ever talks to the W&B service.

A folder is one attempt; the folders of one run id in one `wandb/` folder are one run with several
attempts (a resume), ordered by the start time their run record gives (wandb spec 5). Discovery
lists one row per run id, and opening any of its folders opens the whole run. Reading the records
needs the `wandb` package (`pip install 'rundash[wandb]'`); without it the run still lists, with
one problem naming the extra and empty frames (detection reads names only).
"""
from __future__ import annotations

import json
import os
import re
import threading

import pandas as pd

from rundash_core import cache
from rundash_core.io.files import file_id, read_text
from rundash_core.metrics.steps_done import steps_done
from rundash_core.metrics.store import empty_tidy, shared_store
from rundash_core.overview import RUNNING_WINDOW_S, Overview, utc
from rundash_core.run import Problem, Run
from rundash_core.sources import tracker_keys
from rundash_core.sources.wandb import log, records
from rundash_core.sources.wandb.store import WandbStore

FOLDER = re.compile(r"^(?:offline-)?run-(?P<stamp>\d{8}_\d{6})-(?P<id>[A-Za-z0-9_-]+)$")
NEEDS_EXTRA = ("reading W&B runs needs the wandb package: pip install 'rundash[wandb]' "
               "(the run is listed; its metrics, config and summary are not read)")
HEAD_BYTES = 256 << 10  # where an attempt's run record (its start time) is looked for


# Finding runs --------------------------------------------------------------------------------------
def folder_match(folder: str) -> re.Match | None:
    """The folder's name as a W&B run folder's (a link, `latest-run`, by the folder it names)."""
    folder = folder.rstrip(os.sep)
    return FOLDER.match(os.path.basename(os.path.realpath(folder) if os.path.islink(folder) else folder))


def log_file(folder: str) -> str | None:
    """The folder's `run-<id>.wandb`, when the folder is named like a W&B run folder."""
    m = folder_match(folder)
    if m is None:
        return None
    path = os.path.join(folder, f"run-{m.group('id')}.wandb")
    return path if os.path.isfile(path) else None


def is_run_dir(path: str) -> bool:
    return os.path.isdir(path) and log_file(path) is not None


def find_runs(entries: list[os.DirEntry]) -> list[str]:
    """One folder per run id among a folder's entries (its newest attempt: the folder names start
    with their start time); links (`latest-run`) are not listed again."""
    newest: dict[str, str] = {}
    for e in sorted(entries, key=lambda e: e.name):
        m = FOLDER.match(e.name)
        try:
            if m is None or e.is_symlink() or not e.is_dir() or log_file(e.path) is None:
                continue
        except OSError:
            continue
        newest[m.group("id")] = e.path
    return list(newest.values())


W_AND_B_FILES = frozenset({"latest-run", "debug.log", "debug-internal.log"})  # beside the run folders


def not_runs(entries: list[os.DirEntry]) -> set[str]:
    """In a folder holding W&B run folders, the entries that are not runs to list or folders to
    walk: W&B's own files (`latest-run`, its debug logs) and each run's older attempt folders (the
    run is listed under its newest); empty for any other folder."""
    named = [e for e in entries if FOLDER.match(e.name)]
    if not named:
        return set()
    listed = {os.path.basename(p) for p in find_runs(named)}
    return {e.name for e in named if e.name not in listed} | {e.name for e in entries if e.name in W_AND_B_FILES}


def attempt_folders(folder: str) -> list[str]:
    """The run's folders beside `folder` (same run id, same parent), by the name's start time."""
    m = folder_match(folder)
    folder = os.path.realpath(folder) if os.path.islink(folder.rstrip(os.sep)) else folder
    parent = os.path.dirname(folder.rstrip(os.sep))
    try:
        names = os.listdir(parent)
    except OSError:
        return [folder]
    found = []
    for name in names:
        other = FOLDER.match(name)
        path = os.path.join(parent, name)
        if other and other.group("id") == m.group("id") and not os.path.islink(path) and log_file(path):
            found.append((other.group("stamp"), name, path))
    return [p for _s, _n, p in sorted(found)] or [folder]


def start_time(path: str, pb) -> float | None:
    """The start time of an attempt's run record (its first 256 KiB), cached per file."""
    fid = file_id(path)
    if fid is None or pb is None:
        return None

    def read() -> float:
        try:
            framed = records.frame(records.read_from(path, 0, min(fid.size, HEAD_BYTES)), 0)
        except OSError:
            return -1.0
        for _off, payload in framed.records:
            number, lo, hi = records.record_field(payload)
            if number == records.RUN:
                try:
                    run = pb.RunRecord.FromString(payload[lo:hi])
                except Exception:  # noqa: BLE001 - a damaged run record: no start time
                    return -1.0
                return run.start_time.seconds + run.start_time.nanos / 1e9 if run.HasField("start_time") else -1.0
        return -1.0
    got = cache.shared.get_or_create(("wandb-start", os.path.realpath(path), fid.dev, fid.ino,
                                      min(fid.size, HEAD_BYTES)), read, size=64)
    return None if got < 0 else got


# The run -------------------------------------------------------------------------------------------
class WandbRun(Run):
    kind = "wandb"
    kind_capabilities = frozenset({"metrics", "config", "attempts"})

    def __init__(self, path: str | os.PathLike, run_id: str | None = None):
        super().__init__(path, run_id)
        m = folder_match(self.path)
        self.wandb_id = m.group("id") if m else self.name
        if run_id is None:
            self.run_id = self.wandb_id
        self._lock = threading.Lock()

    # Files ---------------------------------------------------------------------------------------
    def attempt_files(self) -> list[str]:
        """Each attempt's `.wandb` file, oldest first: by the run record's start time when it can
        be read (folder names are local times, a clock can differ), else by the folder name."""
        pb = log.wandb_proto()
        files = [f for f in map(log_file, attempt_folders(self.path)) if f]
        order = {f: i for i, f in enumerate(files)}
        return sorted(files, key=lambda f: (start_time(f, pb) or float("inf"), order[f]))

    def store(self) -> WandbStore | None:
        pb = log.wandb_proto()
        if pb is None:
            return None
        key = ("wandb", os.path.realpath(os.path.dirname(self.path.rstrip(os.sep))), self.wandb_id)
        return shared_store(key, lambda: WandbStore(
            key[1], tail=log.AttemptsTail(key[1], self.attempt_files, pb), default_producer=log.PRODUCER,
            infer_producer=False))

    def _attempts(self) -> list[log.Attempt]:
        store = self.store()
        if store is None:
            return []
        with store.lock:
            return list(store.tail.attempts)

    # Frames --------------------------------------------------------------------------------------
    def metrics(self) -> pd.DataFrame:
        """Tidy history: every numeric key (nested keys as W&B shows them, `a.b`), stepped by
        `_step` or the step metric the run defined, `time` = `_timestamp` (wandb spec 3, 4)."""
        store = self.store()
        return store.tidy() if store is not None else empty_tidy()

    def metrics_version(self) -> tuple:
        store = self.store()
        return (store.path, *store.stamp) if store is not None else ()

    def attempts(self) -> list[int]:
        return list(range(1, 1 + max(1, len(self.attempt_files()))))

    def resume_steps(self) -> list[int]:
        """The first step each later attempt logged."""
        return [a.first_step for a in self._attempts()[1:] if a.first_step is not None]

    def read_config(self) -> dict:
        """The newest attempt's config: run and config records, W&B's `{"value": ...}` wrapping
        undone, its `_wandb` internals left out (wandb spec 3.4)."""
        attempts = self._attempts()
        return clean_config(attempts[-1].config) if attempts else {}

    def read_configs(self, attempt: int | None = None) -> dict[str, object]:
        attempts = self._attempts()
        if not attempts:
            return {}
        n = len(attempts) if attempt is None else attempt
        if not 1 <= n <= len(attempts):
            return {}
        a = attempts[n - 1]
        return {f"{os.path.basename(os.path.dirname(a.path))}/config": clean_config(a.config)}

    def summary(self) -> dict:
        """The run's summary: `files/wandb-summary.json` of the newest attempt when it was written,
        else its summary records replayed (one pass over the file: this is not read on refresh)."""
        files = self.attempt_files()
        pb = log.wandb_proto()
        if not files or pb is None:
            return {}
        written = os.path.join(os.path.dirname(files[-1]), "files", "wandb-summary.json")
        if os.path.isfile(written):
            try:
                out = json.loads(read_text(written))
                return {k: v for k, v in out.items() if k != "_wandb"} if isinstance(out, dict) else {}
            except (OSError, ValueError):
                pass
        return replay_summary(files[-1], pb)

    # Overview ------------------------------------------------------------------------------------
    def overview(self, now: float | None = None) -> Overview:
        files = self.attempt_files()
        inputs = tuple((f, file_id(f)) for f in files)
        key = ("wandb-summary", self.real_path, self.run_id)
        return cache.shared.current(key, inputs, lambda: self._read_overview(files)).at(now)

    def _read_overview(self, files: list[str]) -> Overview:
        """Name, project and start from the run record, `updated` from the last `_timestamp`,
        `touched` from the files; a run that wrote its exit record is not running."""
        times = [fid.mtime for f in files if (fid := file_id(f)) is not None]
        touched = max(times) if times else None
        store, attempts = self.store(), self._attempts()
        if store is None:  # without wandb nothing inside is read: a file time alone says nothing (a fresh copy)
            return Overview(run_id=self.run_id, name=self.wandb_id, kind=self.kind, path=self.path,
                            attempts=max(1, len(files)))
        if not attempts:
            return Overview(run_id=self.run_id, name=self.wandb_id, kind=self.kind, path=self.path,
                            touched=utc(touched), attempts=max(1, len(files)))
        first, last = attempts[0], attempts[-1]
        run = next((a.run for a in reversed(attempts) if a.run), {})
        with store.lock:
            top, low = store.last_step_logging_a_number(), store.min_step()
            started = first.run.get("start_time") or store.first_time
            ended = store.last_time
            axis, tail = store.tail.main_axis(), store.tail
            on_axis = [k for k, a in tail.axes.items() if a == axis] if tail.definitions else None
        if on_axis is not None:  # steps on several axes: the run's steps are those of its main one (spec 4.1)
            tidy = store.tidy()
            steps = tidy["step"][tidy["metric"].isin(on_axis).to_numpy()].dropna()
            top, low = (int(steps.max()), int(steps.min())) if len(steps) else (None, None)
        config = clean_config(last.config)
        written = max((a.written for a in attempts if a.written is not None), default=None)
        if touched is not None and written is not None and touched - written > RUNNING_WINDOW_S:
            touched = written  # a file time well after the newest time written inside: a copy's (spec 5.3)
        if last.exit_code not in (None, 0):
            touched = None  # it ended: not running, whatever its file time
        return Overview(
            run_id=self.run_id, name=run.get("name") or run.get("run_id") or self.wandb_id, kind=self.kind,
            path=self.path, project=run.get("project") or None,
            step=steps_done(top, low), last_step=top,
            max_steps=_max_steps(config), created=utc(started), started=utc(started), updated=utc(ended),
            model=tracker_keys.config_model(config), attempts=len(attempts),
            resumed_from=[a.first_step - 1 for a in attempts[1:] if a.first_step],
            finished=last.exit_code == 0, touched=utc(touched), flavor="rl")

    def problems(self) -> list[Problem]:
        files = self.attempt_files()
        if log.wandb_proto() is None:
            return [Problem(files[-1] if files else self.path, NEEDS_EXTRA)]
        attempts = self._attempts()
        out: list[Problem] = []
        live = self.overview().status == "running"
        for i, a in enumerate(attempts):
            if a.not_wandb:
                out.append(Problem(a.path, a.not_wandb))
                continue
            bad: dict[str, list[int]] = {}
            for off, what in a.corrupt:
                bad.setdefault(what, []).append(off)
            out += [Problem(a.path, f"{what} (first at byte {offs[0]:,})", len(offs)) for what, offs in bad.items()]
            if a.undecodable:
                out.append(Problem(a.path, "records the protobuf decoder refused (skipped)", a.undecodable))
            if a.torn_bytes and (i < len(attempts) - 1 or not live):
                out.append(Problem(a.path, f"torn last record: the {a.torn_bytes:,} bytes after byte {a.end:,} are "
                                           "not a complete record (the file was cut mid-write); everything before "
                                           "them is read"))
        if attempts and attempts[-1].exit_code not in (None, 0):
            out.append(Problem(attempts[-1].path, f"the run exited with code {attempts[-1].exit_code}: it ended "
                                                  "badly (crashed or was killed), not finished"))
        return out


def clean_config(config: dict) -> dict:
    """W&B's config as the user passed it: `_wandb` left out, `{"value": v, "desc": ...}` → v."""
    return {k: _unwrap(v) for k, v in config.items() if k != "_wandb"}


def _unwrap(value):
    if isinstance(value, dict):
        if "value" in value and set(value) <= {"value", "desc"}:
            return _unwrap(value["value"])
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _max_steps(config: dict) -> int | None:
    for value in ((config.get("trainer") or {}).get("total_training_steps") if isinstance(config.get("trainer"), dict) else None, config.get("max_steps")):
        if type(value) is int and value > 0:
            return value
    return None


def replay_summary(path: str, pb) -> dict:
    """The summary records of one file applied in order (nested keys as W&B shows them, `a.b`)."""
    fid = file_id(path)
    if fid is None:
        return {}
    try:
        framed = records.frame(records.read_from(path, 0, fid.size), 0)
    except OSError:
        return {}
    out: dict = {}
    for _off, payload in framed.records:
        number, lo, hi = records.record_field(payload)
        if number != records.SUMMARY:
            continue
        try:
            record = pb.SummaryRecord.FromString(payload[lo:hi])
        except Exception:  # noqa: BLE001 - a damaged record is skipped
            continue
        for item in record.update:
            name = ".".join(item.nested_key) or item.key
            try:
                out[name] = json.loads(item.value_json)
            except ValueError:
                out[name] = item.value_json
        for item in record.remove:
            out.pop(".".join(item.nested_key) or item.key, None)
    return {k: v for k, v in out.items() if not k.startswith("_wandb")}
