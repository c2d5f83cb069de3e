"""What a verl log says about its run without a full parse: which files are runs (`find_runs`,
`is_run_file`), the head summary kept per log (`HeadCache`), the digest discovery reads from a
log's ends (`log_digest`) and the fields of a runs-list row (`Brief`, from the resolved config).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pandas as pd

from .. import cache
from ..io.files import file_id, read_range
from ..io.verl_ends import fingerprint, read_ends
from ..io.verl_text import HeadSummary, TailSummary, head_summary, tail_summary
from . import harbor

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


def _get(obj, *keys):
    for k in keys:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


@dataclass(frozen=True)
class Digest:
    """What discovery needs from one version of a log, from one read of its ends: whether its
    first or last 256 KiB name Harbor trial dirs (SWE-Lego-RL), the head and tail summaries."""

    names_trials: bool
    head: HeadSummary
    tail: TailSummary


def log_digest(path: str) -> Digest | None:
    """The digest of a log as it is now, cached by (dev, ino, size, mtime_ns): an unchanged log
    costs one stat. None when the path is not a readable regular file."""
    fp = fingerprint(path)
    if fp is None:
        return None
    key = ("verl-digest", path)
    if key in cache.shared:
        have = cache.shared.get_or_create(key, lambda: None)
        if have is not None and have[0] == fp:
            return have[1]
        cache.shared.discard(key)
    try:
        ends = read_ends(path)
    except OSError:
        return None
    probe = 256 << 10
    named = bool(harbor.named_exp_dirs(ends.head[:probe]) or harbor.named_exp_dirs(ends.tail[-probe:]))
    head = head_summary(path, ends.head if len(ends.head) >= 1 << 20 or ends.size <= len(ends.head) else None)
    digest = Digest(named, head, tail_summary(path, (ends.tail, ends.tail_start)))
    return cache.shared.get_or_create(key, lambda: (fp, digest))[1]


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
    started_utc: pd.Timestamp | None = None
    updated_utc: pd.Timestamp | None = None


def config_max_steps(cfg: dict, head: HeadSummary, progress_total: int | None) -> int | None:
    total = _get(cfg, "trainer", "total_training_steps")
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total
    return progress_total or head.progress_total or head.sft_total


def config_model(cfg: dict) -> str | None:
    for keys in (("actor_rollout_ref", "model", "path"), ("model", "partial_pretrain"), ("model", "path"),
                 ("critic", "model", "path")):
        if (name := model_name(_get(cfg, *keys))) is not None:
            return name
    return None


def config_flavor(cfg: dict) -> str:
    return "sft" if cfg and "actor_rollout_ref" not in cfg and ("optim" in cfg or "data" in cfg) else "rl"


def config_experiment(cfg: dict) -> str | None:
    name = _get(cfg, "trainer", "experiment_name")
    return name if isinstance(name, str) else None


def updated_from(log: str, sidecars: list[str], fps: tuple) -> float | None:
    """`VerlRun.updated()` from fingerprints: the log's mtime and the file-logger JSONL's (the
    first sidecar that is one, as `file_logger_path` picks it)."""
    times = [fps[0][4]] if fps[0] else []
    for path, fp in zip(sidecars, fps[1:]):
        try:
            if fp is not None and is_file_logger(path):
                times.append(fp[4])
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
