"""What a verl log says about its run without a full parse: which files are runs (`find_runs`,
`is_run_file`), the head summary kept per log (`HeadCache`), the digest discovery reads from a
log's ends (`log_digest`) and the fields of a runs-list row (`Brief`, `quick_brief`).
"""
from __future__ import annotations

import datetime
import os
import re
import sys
import time
from dataclasses import dataclass


from .. import cache
from ..io.files import file_id, read_range
from ..io.verl_ends import (FIRST_BYTES, HEAD_BYTES, LOGGER_BYTES, LogEnds, QuickHead, QuickTail, find_config_bounds,
                            head_search, open_ends, quick_head, quick_tail, stamp_in)
from ..io.verl_quick import quick_parts
from ..io.verl_grammar import PROGRESS, SFT_STEPS, clean_piece
from ..io.verl_text import _FILE_LOGGER, HeadSummary, head_summary
from . import harbor
from ..io.configs import dig

LOG_SUFFIXES = (".log", ".out")
SKIP_SUFFIXES = ("_vllm.log", "_train_gpu_wandb.log", "_server.out")
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


def is_run_file(path: str) -> bool:
    """A console log by its name, or a file-logger JSONL by its first line (read-only sniff)."""
    if not os.path.isfile(path):
        return False
    return is_log_name(os.path.basename(path)) or is_file_logger(path)


def find_runs(entries: list[os.DirEntry]) -> list[str]:
    """The logs among a folder's entries and in its `logs/` subfolder (one level each); a
    file-logger JSONL lists on its own only when no log of the same name sits next to it."""
    out: list[str] = []
    for e in entries:
        try:
            if e.name == "logs" and e.is_dir():
                out += find_runs(sorted(os.scandir(e.path), key=lambda x: x.name))
            elif e.is_file() and is_log_name(e.name):
                out.append(e.path)
            elif e.is_file() and is_file_logger(e.path):
                base = e.path[: -len(".jsonl")]
                if not any(os.path.isfile(base + s) for s in LOG_SUFFIXES):
                    out.append(e.path)
        except OSError:
            continue
    return out


class HeadCache:
    """The head summary of one log, recomputed only when the head bytes can have changed."""

    nbytes = 64 << 10

    def __init__(self):
        self.key, self.value = None, None

    def get(self, path: str) -> HeadSummary:
        fid = file_id(path)
        key = None if fid is None else (fid.dev, fid.ino, min(fid.size, 8 << 20))
        if key is None or key != self.key:
            try:
                self.key, self.value = key, head_summary(path) if fid is not None else HeadSummary()
            except OSError:  # unreadable right now: the tail says why (problems)
                self.key, self.value = None, HeadSummary()
        return self.value


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
class Digest:
    """What discovery needs from one version of a log, from small reads of its ends (16 KiB each,
    read on only where a field is not there): whether they name Harbor trial dirs (SWE-Lego-RL),
    the config fields the runs list shows (targeted byte searches of the head) and the tail's
    last step and markers. `model`, `max_steps` and `eval_envs` are derived once, when read."""

    names_trials: bool
    head: QuickHead
    tail: QuickTail
    started: float | None = None
    file_logger: str | None = None
    head_progress: int | None = None  # read only when the config and the tail give no total
    sft_total: int | None = None  # read only when neither they nor the head's progress bar do
    model: str | None = None
    max_steps: int | None = None
    eval_envs: tuple = ()


_ENTRY_BYTES = 800  # a cached (fingerprint, Digest | Brief): the tuples, dataclasses, ints and floats


def entry_size(strings) -> int:
    """The cache size of a (fingerprint, Digest) or (fingerprint, Brief) entry, without a deep walk:
    a fixed part plus the strings it holds (`tests/test_cache.py` checks it against `_deep_size`)."""
    return _ENTRY_BYTES + sum(sys.getsizeof(s) + 8 for s in strings if s is not None)


def digest_size(d: "Digest") -> int:
    return entry_size((d.head.experiment, *d.head.models, d.file_logger, *d.tail.keys, d.model, *d.eval_envs))


def log_digest(path: str) -> Digest | None:
    """The digest of a log as it is now, cached by (dev, ino, size, mtime_ns): an unchanged log
    costs one stat. None when the path is not a readable regular file."""
    fp = file_id(path)
    if fp is None:
        return None
    return cache.shared.current(("verl-digest", path), fp, lambda: read_digest(path, fp.size), size=digest_size)


def read_digest(path: str, size: int | None = None) -> Digest | None:
    """One open; with the log's `size` (from the stat in hand), the fast path (`verl_quick`) first,
    else (not sure, or no size) the reads `LogEnds` needs (two of 16 KiB for most logs)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if size is not None and (digest := quick_digest(fd, size)) is not None:
            return digest
        return _digest(LogEnds(fd, os.fstat(fd).st_size))
    except OSError:
        return None
    finally:
        os.close(fd)


def quick_digest(fd: int, size: int) -> Digest | None:
    """The digest `_digest` gives, by the fast path; None when it is not sure."""
    parts = quick_parts(fd, size)
    if parts is None:
        return None
    named, qh, qt, stamp, progress, sft = parts
    total = qh.total_steps if qh.total_steps is not None and qh.total_steps > 0 else None
    return Digest(named, qh, qt, _stamp_seconds(stamp), None, progress, sft, _model(qh),
                  total or qt.progress_total or progress or sft, tuple(val_sources(qt.keys)))


def _stamp_seconds(stamp: bytes | None) -> float | None:
    """`YYYY-MM-DD HH:MM:SS` (local time) → epoch seconds, as strptime + mktime would (no
    strptime: it costs more than the rest of a log's digest)."""
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


def _digest(ends: LogEnds) -> Digest:
    data, pos, trainer, end = find_config_bounds(ends)  # the bytes seen: data[:ends.head_len]
    seen = ends.head_len
    qh = quick_head(data, pos, end, trainer, seen) if pos >= 0 else QuickHead()
    qt = quick_tail(ends, progress=not (qh.total_steps is not None and qh.total_steps > 0))
    first, last = ends._head, ends.tail(FIRST_BYTES)  # the first read holds the first FIRST_BYTES
    named = harbor.names_exp_dirs(first, 0, min(ends.size, FIRST_BYTES)) or harbor.names_exp_dirs(
        last, max(len(last) - FIRST_BYTES, 0), len(last))
    stamp = stamp_in(ends, 0, seen)  # the first wall-clock stamp of what was seen, else of the head window
    if stamp is None and seen < min(HEAD_BYTES, ends.size):
        ends.see(HEAD_BYTES)
        stamp = stamp_in(ends, max(seen - 32, 0), ends.head_len)
    logger = None
    if qh.file_logger:  # the config's trainer.logger holds 'file', or there is no config to say
        m = head_search(ends, _FILE_LOGGER, b"Creating file logger at ", LOGGER_BYTES)
        if m is not None:
            logger = clean_piece(m.group(1).decode("utf-8", "replace"))[1].strip() or None
    progress = sft = None
    if not (qh.total_steps is not None and qh.total_steps > 0 or qt.progress_total):  # else not needed
        # the PPO trainer's tqdm total, else the SFT trainer's step count (each prints only its own)
        window = max(HEAD_BYTES, qh.end)
        if pos < 0 or qh.flavor == "rl":
            progress = head_search(ends, PROGRESS, b"Training Progress:", window)
        if pos < 0 or qh.flavor == "sft":
            sft = None if progress else head_search(ends, SFT_STEPS, b"Number of steps/epoch", window)
    progress, sft = int(progress.group(1)) if progress else None, int(sft.group(1)) if sft else None
    total = qh.total_steps if qh.total_steps is not None and qh.total_steps > 0 else None
    return Digest(named, qh, qt, _stamp_seconds(stamp), logger, progress, sft, _model(qh),
                  total or qt.progress_total or progress or sft, tuple(val_sources(qt.keys)))


def _model(head: QuickHead) -> str | None:
    return next((name for p in head.models if (name := model_name(p)) is not None), None)


def digest_max_steps(d: Digest) -> int | None:
    return d.max_steps


def digest_model(d: Digest) -> str | None:
    return d.model


def quick_brief(log: str, name: str) -> "Brief | None":
    """The runs-list row of a log from its digest and the fingerprints of the file-logger JSONLs
    it may have (discovery converts `started`/`updated` to timestamps for all rows at once).
    None when the log is not readable."""
    digest = log_digest(log)
    if digest is None:
        return None
    jsonl = os.path.splitext(log)[0] + ".jsonl"
    return digest_brief(log, name, digest, file_id(log), file_id(jsonl))


def digest_brief(log: str, name: str, digest: Digest, fp, jsonl_fp) -> "Brief":
    """The row of a log from its digest, its fingerprint `fp` and that of the `<stem>.jsonl` next
    to it (`jsonl_fp`, None when there is none: discovery knows it from the folder's listing);
    the file-logger path the log printed is looked up here."""
    sidecars = [os.path.splitext(log)[0] + ".jsonl"]
    deps = [fp, jsonl_fp]
    if digest.file_logger:
        sidecars.append(os.path.join(os.path.dirname(log), os.path.expanduser(digest.file_logger)))
        deps.append(file_id(sidecars[-1]))
    tail = digest.tail
    return Brief(digest.head.experiment or name, tail.last_step, digest.max_steps, tail.final_validation,
                 digest.started, updated_from(log, sidecars, tuple(deps)), digest.model, digest.head.flavor,
                 digest.eval_envs)


@dataclass(frozen=True)
class Brief:
    """A run's row in the runs list, without its status (that depends on the time of the call)."""

    name: str
    step: int | None
    max_steps: int | None
    final: bool
    started: float | None
    updated: float | None
    model: str | None
    flavor: str
    eval_envs: tuple[str, ...]


def config_max_steps(cfg: dict, head: HeadSummary, progress_total: int | None) -> int | None:
    total = dig(cfg, "trainer", "total_training_steps")
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total
    return progress_total or head.progress_total or head.sft_total


def config_model(cfg: dict) -> str | None:
    for keys in (("actor_rollout_ref", "model", "path"), ("model", "partial_pretrain"), ("model", "path"),
                 ("critic", "model", "path")):
        if (name := model_name(dig(cfg, *keys))) is not None:
            return name
    return None


def config_flavor(cfg: dict) -> str:
    return "sft" if cfg and "actor_rollout_ref" not in cfg and ("optim" in cfg or "data" in cfg) else "rl"


def config_experiment(cfg: dict) -> str | None:
    name = dig(cfg, "trainer", "experiment_name")
    return name if isinstance(name, str) else None


def updated_from(log: str, sidecars: list[str], fps: tuple) -> float | None:
    """`VerlRun.updated()` from fingerprints: the log's mtime and the file-logger JSONL's (the
    first sidecar that is one, as `file_logger_path` picks it)."""
    times = [fps[0].mtime] if fps[0] else []
    for path, fp in zip(sidecars, fps[1:]):
        try:
            if fp is not None and is_file_logger(path):
                times.append(fp.mtime)
                break
        except OSError:
            continue
    return max(times) if times else None


def val_sources(keys) -> list[str]:
    """Validation data sources from the metric keys (`val-core/<ds>/…`, `val/test_score/<ds>`)."""
    out: dict[str, None] = {}
    for k in keys:
        m = _VAL_SOURCE.match(k)
        if m:
            out.setdefault(next(g for g in m.groups() if g), None)
    return [s for s in out if s not in ("num_turns",)]
