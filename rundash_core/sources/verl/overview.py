"""What a verl console log's overview is read from: the run card and the runs list both show it.

Which files are runs (`is_run_file`, `find_runs`), and `overview_inputs`: small reads of the log's
ends (16 KiB each, read on only where a field is not there, `ends`), cached by the log's
fingerprint, so an unchanged log costs one stat. They hold the config print's fields, the first
and last step, the final-validation print, the start time and whether the log names Harbor trial
dirs (SWE-Lego-RL).
"""
from __future__ import annotations

import datetime
import os
import re
import sys
import time
from dataclasses import dataclass, replace

from rundash_core import cache
from rundash_core.io.bytetail import SETTLE_S
from rundash_core.io.files import file_id, open_file, read_range
from rundash_core.io.jsonl import LineProblems, parse_jsonl_bytes
from rundash_core.logs.line import GLOG_RECORD
from rundash_core.metrics.steps_done import has_finite_value
from rundash_core.sources.swe_lego_rl import harbor
from rundash_core.sources.verl.ends import (
    FIRST_BYTES,
    HEAD_BYTES,
    LOGGER_BYTES,
    HeadFields,
    LogHeadTail,
    TailFields,
    find_config_bounds,
    head_fields,
    head_search,
    stamp_in,
    tail_fields,
)
from rundash_core.sources.verl.file_logger import logger_row
from rundash_core.sources.verl.grammar import PROGRESS, SFT_STEPS, clean_piece
from rundash_core.sources.verl.overrides import HEAD_BYTES as OVERRIDE_BYTES
from rundash_core.sources.verl.overrides import head_config
from rundash_core.sources.verl.steps import first_step
from rundash_core.sources.verl.steps_before_tail import last_steps_before_tail

LOG_SUFFIXES = (".log", ".out")
SKIP_SUFFIXES = ("_vllm.log", "_train_gpu_wandb.log", "_server.out")
FILE_LOGGER = re.compile(rb"Creating file logger at ([^\r\n]+)")
GLOG_STAMP = re.compile(b"(?m)^" + GLOG_RECORD.encode())  # torchrun's launch lines
_HF_CACHE = re.compile(r"models--([^/]+)--([^/]+)")
_VAL_SOURCE = re.compile(r"^val-(?:core|aux)/(.+)/[^/]+/(?:mean|std)@\d+$|^val-core/(.+)/[^/]+/(?:best|maj)@\d+/mean$"
                         r"|^val/test_score/(.+)$")


def stem(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (*LOG_SUFFIXES, ".jsonl"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def is_log_name(name: str) -> bool:
    return (name.endswith(LOG_SUFFIXES) and not name.endswith(SKIP_SUFFIXES) and not name.startswith(("launch_", ".")))


def is_file_logger(path: str) -> bool:
    """A `.jsonl` whose first line is `{"step": N, "data": {…}}` (spec 10)."""
    if not path.endswith(".jsonl") or os.path.basename(path).startswith("."):
        return False
    head = read_range(path, 0, 4096).split(b"\n", 1)[0]
    return head.startswith(b'{"step":') and b'"data":' in head


_LOGGER_STEP = re.compile(rb'\{"step": ?\d+,')
LOGGER_TAIL_BYTES = 64 << 10


def file_logger_last_step(path: str) -> int | None:
    """The step of the last whole row logging a finite value (`metrics.steps_done`) of a file-logger JSONL
    tracked without its console log (it has no overview inputs): one read of its last 64 KiB, cached by
    its fingerprint. None when none is there or the file cannot be read."""
    fp = file_id(path)
    if fp is None:
        return None

    def read() -> int:  # -1: no row in the window (kept, so an unchanged file is not read again)
        start = max(fp.size - LOGGER_TAIL_BYTES, 0)
        try:
            data = read_range(path, start, fp.size)
        except OSError:
            return -1
        lines = data[data.find(b"\n") + 1 if start else 0: data.rfind(b"\n") + 1].split(b"\n")
        for line in reversed(lines):  # the last line that is a whole file-logger row
            if _LOGGER_STEP.match(line):
                rows = parse_jsonl_bytes(line, LineProblems()).rows
                found = logger_row(rows[0]) if rows else None
                if found is not None and has_finite_value(found[1]):
                    return found[0]
        return -1
    step = cache.shared.current(("verl-logger-step", fp.dev, fp.ino), fp, read, size=lambda _v: 64)
    return step if step is not None and step >= 0 else None


def is_run_file(path: str) -> bool:
    """A console log by its name, or a file-logger JSONL by its first line (read-only sniff)."""
    if file_id(path) is None:
        return False
    return is_log_name(os.path.basename(path)) or is_file_logger(path)


def find_runs(entries: list[os.DirEntry]) -> list[str]:
    """The logs among a folder's entries; a file-logger JSONL lists on its own only when no log of
    the same name sits next to it."""
    names = {e.name for e in entries}
    out: list[str] = []
    for e in entries:
        try:
            if is_log_name(e.name) and e.is_file():
                out.append(e.path)
            elif e.name.endswith(".jsonl") and e.is_file() and is_file_logger(e.path):
                if not any(e.name[: -len(".jsonl")] + s in names for s in LOG_SUFFIXES):
                    out.append(e.path)
        except OSError:
            continue
    return out


def model_name(path) -> str | None:
    """`org/name` from a Hugging Face id or cache snapshot path, else the last path component."""
    if not isinstance(path, str) or not path:
        return None
    m = _HF_CACHE.search(path)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    if path.startswith(("/", "~", ".")):
        return os.path.basename(path.rstrip("/")) or path
    return path


@dataclass(frozen=True)
class OverviewInputs:
    """What a log's ends say about its run (one version of the log)."""

    names_trials: bool
    head: HeadFields
    tail: TailFields
    started: float | None = None
    file_logger: str | None = None
    first_step: int | None = None  # the first metric step, when it is within the head read
    max_steps: int | None = None
    model: str | None = None
    eval_envs: tuple = ()

    @property
    def zero_based(self) -> bool:
        """Era S1 and SFT logs count steps from 0: at step N, N+1 updates are done."""
        return self.first_step == 0


_ENTRY_BYTES = 800  # a cached (fingerprint, OverviewInputs): the tuples, dataclasses, ints and floats


def entry_size(strings) -> int:
    """The cache size of a (fingerprint, OverviewInputs) entry without a deep walk: a fixed part plus the
    strings it holds (`tests/unit/test_cache.py` checks it against `_deep_size`)."""
    return _ENTRY_BYTES + sum(sys.getsizeof(s) + 8 for s in strings if s is not None)


def overview_inputs_size(d: OverviewInputs) -> int:
    return entry_size((d.head.experiment, d.head.project, *d.head.models, d.file_logger, *d.tail.keys, d.model, *d.eval_envs))


def overview_inputs(path: str) -> OverviewInputs | None:
    """The overview inputs of a log as it is now, kept per file (dev, ino: whatever path reaches it) and
    re-read when its size or mtime changed: an unchanged log costs one stat. None when the path is
    not a readable regular file."""
    fp = file_id(path)
    if fp is None:
        return None
    settled = time.time() - fp.mtime >= SETTLE_S  # a last line without its newline then counts
    return cache.shared.current(("verl-overview-inputs", fp.dev, fp.ino), (fp, settled), lambda: read_overview_inputs(path, settled),
                                size=overview_inputs_size)


def read_overview_inputs(path: str, settled: bool = False) -> OverviewInputs | None:
    try:
        with open_file(path) as fh:
            fd = fh.fileno()
            return _read_inputs(LogHeadTail(fd, os.fstat(fd).st_size, settled))
    except OSError:
        return None


def _stamp_seconds(stamp: bytes | None) -> float | None:
    """`YYYY-MM-DD HH:MM:SS` (local time) → epoch seconds, by slicing (not strptime:
    docs/architecture.md#fast-paths)."""
    if stamp is None:
        return None
    y, mo, d, h, mi, s = (int(stamp[a:b]) for a, b in ((0, 4), (5, 7), (8, 10), (11, 13), (14, 16), (17, 19)))
    try:
        datetime.date(y, mo, d)
        if h > 23 or mi > 59 or s > 61:
            return None
        return time.mktime((y, mo, d, h, mi, s, 0, 0, -1))
    except (ValueError, OverflowError):
        return None


def _started(stamp: bytes | None, head: bytes) -> float | None:
    """When the log began: its first `YYYY-MM-DD HH:MM:SS`, or an earlier glog line of the launch
    (torchrun's `W1217 07:20:03.820820 … run.py:779]`, which says no year: the stamp's, or the
    year before when its month-day is later). An SFT log's first full stamp can come after its
    training (a checkpoint's DeepSpeed lines): without the glog line its duration read 9 s."""
    started = _stamp_seconds(stamp)
    m = GLOG_STAMP.search(head) if started is not None else None
    if m is None:
        return started
    year, month_day = int(stamp[:4]), (int(stamp[5:7]), int(stamp[8:10]))
    mo, d, h, mi, sec = (int(g) for g in m.groups()[1:])
    glog = _stamp_seconds(b"%04d-%02d-%02d %02d:%02d:%02d" % (year - ((mo, d) > month_day), mo, d, h, mi, sec))
    return glog if glog is not None and glog < started else started


def _read_inputs(ends: LogHeadTail) -> OverviewInputs:
    data, pos, trainer, end = find_config_bounds(ends)
    seen = len(data)
    head = head_fields(data, pos, end, trainer, seen) if pos >= 0 else HeadFields()
    if pos < 0 or head.end == 0:  # no config print read to its end: the launch command's overrides
        head = _with_overrides(head, ends, pos)
    has_total = head.total_steps is not None and head.total_steps > 0
    tail = tail_fields(ends, progress=not has_total)
    first, last = ends.read_head(FIRST_BYTES), ends.tail(FIRST_BYTES)
    named = harbor.names_exp_dirs(first, 0, min(ends.size, FIRST_BYTES)) or harbor.names_exp_dirs(
        last, max(len(last) - FIRST_BYTES, 0), len(last))
    stamp = stamp_in(ends, 0, seen)  # the first wall-clock stamp of what was seen, else of the head window
    if stamp is None and seen < min(HEAD_BYTES, ends.size):
        stamp = stamp_in(ends, max(seen - 32, 0), HEAD_BYTES)
    logger = None
    if head.file_logger:  # the config's trainer.logger holds 'file', or there is no config to say
        m = head_search(ends, FILE_LOGGER, b"Creating file logger at ", LOGGER_BYTES)
        if m is not None:
            logger = clean_piece(m.group(1).decode("utf-8", "replace"))[1].strip() or None
    total = head.total_steps if has_total else tail.progress_total
    if total is None:  # the PPO trainer's tqdm total, else the SFT trainer's step count
        window = max(HEAD_BYTES, head.end)
        if pos < 0 or head.flavor == "rl":
            m = head_search(ends, PROGRESS, b"Training Progress:", window)
            total = int(m.group(1)) if m else None
        if total is None and (pos < 0 or head.flavor == "sft"):
            m = head_search(ends, SFT_STEPS, b"Number of steps/epoch", window)
            total = int(m.group(1)) if m else None
    first_metric = first_step(ends.head, max(head.end, pos, 0))
    if tail.last_step is None and ends.tail_start > 0 and (pos >= 0 or first_metric is not None):
        step, train = last_steps_before_tail(ends)  # a training log ending in MiBs of other output
        tail = replace(tail, last_step=step, last_train_step=train)
    return OverviewInputs(named, head, tail, _started(stamp, ends.head), logger, first_metric, total,
                  next((name for p in head.models if (name := model_name(p)) is not None), None),
                  tuple(val_sources(tail.keys)))


def _with_overrides(head: HeadFields, ends: LogHeadTail, pos: int) -> HeadFields:
    """`head` with what the config print did not say (there is none, or it is cut off) taken from
    the launch command in the log's head (`overrides`: Hydra overrides such as
    `trainer.experiment_name=…`, `actor_rollout_ref.model.path=$MODEL_PATH`, and shell variables).
    Searched in the head bytes the config search already read: before the print, within
    HEAD_BYTES; nothing more is read."""
    hi = min(len(ends.head), OVERRIDE_BYTES, pos if pos >= 0 else ends.size)
    overrides = head_config(ends.head[:hi], 0, complete=hi >= ends.size or hi == pos)
    if not overrides:
        return head
    exp, total = overrides.get("trainer.experiment_name"), overrides.get("trainer.total_training_steps")
    logger, project = overrides.get("trainer.logger"), overrides.get("trainer.project_name")
    return replace(
        head, experiment=head.experiment or (str(exp) if exp not in (None, "") else None),
        project=head.project or (str(project) if project not in (None, "") else None),
        total_steps=head.total_steps if head.total_steps else (total if type(total) is int and total > 0 else None),
        models=head.models if any(head.models) else tuple(overrides.models()),
        flavor=head.flavor if pos >= 0 else ("sft" if overrides.sft else "rl"),
        file_logger=head.file_logger if pos >= 0 else (logger is None or "file" in str(logger)))


def val_sources(keys) -> list[str]:
    """Validation data sources from the metric keys (`val-core/<ds>/…`, `val/test_score/<ds>`)."""
    out: dict[str, None] = {}
    for k in keys:
        m = _VAL_SOURCE.match(k)
        if m:
            out.setdefault(next(g for g in m.groups() if g), None)
    return [s for s in out if s not in ("num_turns",)]
