"""verl runs (`../shared/formats/verl.md`): a console log file, optionally with its file-logger JSONL.

verl has no run directory: a run is one captured console log (`<name>.log` / `<name>.out`, run id
`<name>`) in a tracked folder (or below it), skipping sidecars (`*_vllm.log`,
`*_train_gpu_wandb.log`, `*_server.out`) and `launch_*` wrappers. A log with no metric line yet is
still a run. Metrics come from the log (`VerlLogTail`) or, when the `file` logger wrote
`<name>.jsonl` next to it (or the log names it), from that JSONL (full precision, spec 10; a resume
starts that file over, so the steps before its first come from the log); a file-logger JSONL can
also be tracked on its own. The config is the resolved-config print in the
log. A resumed run appended to the same log restarts its steps: each restart opens an attempt.

The run card and the runs-list row are the log's one summary (`verl_summary.log_digest`).
Subclasses (SWE-Lego-RL) reuse all of it; they only add what their extra files say.
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .. import cache
from ..io.files import file_id, read_range
from ..io.verl_file_logger import FileLoggerTail
from ..io.verl_log import VerlLogTail
from ..io.verl_overrides import HEAD_BYTES
from ..io.verl_text import HEAD, ConfigPrint, config_at
from ..metricstore import MetricStore, empty_tidy, shared_store
from ..run import Overview, Problem, Run, utc
from . import verl_dumps
from .verl_summary import LOG_SUFFIXES, Digest, _stamp_seconds, file_logger_last_step, is_file_logger, log_digest, stem
from .verl_summary import val_sources
from .verl_summary import SKIP_SUFFIXES, find_runs, is_log_name, is_run_file, model_name  # noqa: F401 (API)

KIND = "verl"


def _key(what: str, path: str) -> tuple:
    """This module's cache keys: what, and the real path of the file it is about."""
    return (what, os.path.realpath(path))


class VerlRun(Run):
    kind = KIND
    capabilities = verl_dumps.WithDumps({"metrics", "config", "attempts", "validation", "logs"})  # + samples, episodes with dumps

    def __init__(self, path: str | os.PathLike, run_id: str | None = None):
        super().__init__(path, run_id)
        base = os.path.basename(self.path)
        self.name = stem(self.path)
        if run_id is None or run_id == base or run_id.endswith(":" + base):
            self.run_id = (run_id or base)[: len(run_id or base) - len(base)] + self.name
        self.is_jsonl = self.path.endswith(".jsonl")

    # Files ---------------------------------------------------------------------------------------
    def log_path(self) -> str | None:
        """The console log (None for a file-logger JSONL tracked without its log)."""
        if not self.is_jsonl:
            return self.path
        base = self.path[: -len(".jsonl")]
        return next((base + s for s in LOG_SUFFIXES if os.path.isfile(base + s)), None)

    def digest(self) -> Digest | None:
        """The log's summary (None without a readable log)."""
        log = self.log_path()
        return log_digest(log) if log else None

    def file_logger_path(self) -> str | None:
        """The file-logger JSONL: the run itself, `<name>.jsonl` next to the log, or the path the
        log printed (`Creating file logger at …`, relative to the log's folder)."""
        if self.is_jsonl:
            return self.path
        candidates = [os.path.splitext(self.path)[0] + ".jsonl"]
        digest = self.digest()
        if digest is not None and digest.file_logger:
            candidates.append(os.path.join(os.path.dirname(self.path), os.path.expanduser(digest.file_logger)))
        for c in candidates:
            try:
                if file_id(c) is not None and is_file_logger(c):
                    return c
            except OSError:
                continue
        return None

    def logs(self):
        """The console log, and its `<exp>_vllm.log` sidecar when there is one (`verl_logs`)."""
        from .verl_logs import list_logs

        return list_logs(self.log_path())

    # Metrics -------------------------------------------------------------------------------------
    def log_store(self) -> MetricStore | None:
        """The console log's metric rows (and, on its tail, what the log's pass noticed)."""
        log = self.log_path()
        return self._store(log, VerlLogTail) if log else None

    def store(self) -> MetricStore | None:
        """Where the metrics come from: the file-logger JSONL when it has rows, else the log."""
        jsonl = self.file_logger_path()
        if jsonl is not None:
            store = self._store(jsonl, FileLoggerTail)
            if store.max_step() is not None or self.log_path() is None:
                return store
        return self.log_store()

    @staticmethod
    def _store(path: str, tail_class) -> MetricStore:
        return shared_store(
            _key(f"metrics-{tail_class.__name__}", path),
            lambda: MetricStore(path, tail=tail_class(path), default_producer="trainer", infer_producer=False))

    def earlier_launches(self, store: MetricStore | None) -> MetricStore | None:
        """The console log's store when the file-logger JSONL (`store`) starts at a later step than
        the log: verl opens that file with "wb" (spec 10), so a resumed launch wiped the earlier
        launches' rows, which only the log still holds (and where its steps went back)."""
        log = self.log_path()
        if store is None or log is None or store.path == log or (first := store.min_step()) is None:
            return None
        d = self.digest()  # the usual case, from the log's head: the JSONL starts where the log does
        if d is not None and d.first_step is not None and d.first_step >= first:
            return None
        log_store = self.log_store()
        low = log_store.min_step() if log_store is not None else None
        return log_store if low is not None and low < first else None

    def metrics(self):
        """The store's rows; with a restarted file-logger JSONL, the log's rows of the steps before it."""
        store = self.store()
        if store is None:
            return empty_tidy()
        tidy, log = store.tidy(), self.earlier_launches(store)
        if log is None:
            return tidy
        before = log.tidy()
        out = pd.concat([before[before["step"] < store.min_step()], tidy], ignore_index=True)
        return out.astype({"metric": "category", "producer": "category"})

    def metrics_version(self) -> tuple:
        store = self.store()
        log = self.earlier_launches(store)
        return ((store.path, *store.stamp) if store is not None else ()) + ((log.path, *log.stamp) if log else ())

    def validation(self):
        """The logged val keys (`val-core`/`val-aux`, legacy `val/test_score`, SFT `val/loss`) per
        step, parsed by `rundash_core.validation` (spec 9)."""
        from ..validation import metrics_validation

        return metrics_validation(self.metrics())

    def _restarts(self) -> list[int]:
        """Steps where the metrics went back: in the store, and in the log before a restarted JSONL."""
        store = self.store()
        log = self.earlier_launches(store)
        return [step for st in (log, store) if st is not None for _prod, step in st.restarts]

    def resume_steps(self) -> list[int]:
        """Where steps went back (a resume appended to the log), and the first step of a log that
        starts above 1 (it resumed an earlier launch's checkpoint)."""
        out = set(self._restarts())
        d = self.digest()
        if d is not None and d.first_step is not None and d.first_step > 1:
            out.add(d.first_step)
        return sorted(out)

    def attempts(self) -> list[int]:
        """One attempt per restart segment: a resumed run appended to the same log logs lower steps."""
        return list(range(1, 2 + len(self._restarts())))

    # Config --------------------------------------------------------------------------------------
    def config_prints(self) -> list[ConfigPrint]:
        """Every resolved-config print of the log (one per launch when a resume appended to it),
        where the log's metric pass found them, else the first print in the head; then the
        launch command's overrides in the log's head (kind "overrides"), when it has any."""
        log = self.log_path()
        if log is None:
            return []
        store = self.log_store()
        offsets = list(store.tail.config_offsets) if store is not None else []
        prints = [p for off in offsets or [0] if (p := self._config_at(log, off)) is not None]
        head = self._config_at(log, HEAD)
        return prints + ([head] if head is not None else [])

    @staticmethod
    def _config_at(log: str, offset: int) -> ConfigPrint | None:
        """The config print at `offset` (HEAD: the launch command's overrides). A print read
        whole, or the overrides once the head window is all written, is cached per file; what
        may still change (a print cut off or still being written, a short head) per version."""
        fid = file_id(log)
        if fid is None:
            return None
        key = (*_key("verl-config", log), (fid.dev, fid.ino), offset)
        version = (*key, fid.size, fid.mtime_ns)
        if (have := cache.shared.peek(key)) is not None or (have := cache.shared.peek(version)) is not None:
            return have
        try:
            found = config_at(log, offset)
        except OSError:
            return None
        if found is not None:
            final = found.error is None and (offset != HEAD or fid.size >= HEAD_BYTES)
            cache.shared.get_or_create(key if final else version, lambda: found)
        return found

    def read_config(self) -> dict:
        """The resolved config the log printed (the latest launch's, read whole), else the launch
        command's overrides; {} when there is neither."""
        found = self.config_prints()
        prints = [p for p in found if p.complete]
        if prints:
            return prints[-1].value
        return next((p.value for p in found if p.kind == "overrides" and p.value), {})

    def read_configs(self, attempt: int | None = None) -> dict[str, object]:
        """The attempt's config print (read whole, as far as it parses plus its raw text, or its
        raw text); with the launch command's overrides and shell variables when there is no
        print read whole."""
        found = self.config_prints()
        prints = [p for p in found if p.kind != "overrides"]
        out: dict[str, object] = {}
        chosen = None
        if prints:
            chosen = prints[-1] if attempt is None or attempt > len(prints) else prints[max(attempt, 1) - 1]
            out.update(chosen.files())
        if chosen is None or not chosen.complete:
            for p in found:
                if p.kind == "overrides":
                    out.update(p.files())
        return out

    # Overview ------------------------------------------------------------------------------------
    def updated(self) -> float | None:
        times = [fp.mtime for p in (self.log_path(), self.file_logger_path()) if p and (fp := file_id(p)) is not None]
        return max(times) if times else None

    def overview(self, now: float | None = None) -> Overview:
        """The run card and runs-list row, from the log's one summary (its ends), status as of `now`."""
        return self.summary().at(now)

    def summary(self) -> Overview:
        """The summary without its status: from the log's ends. Times come from the wall-clock
        stamps the log prints (the first in its head, the last in its tail window); the files'
        mtime only says whether it is running."""
        d = self.digest()
        touched = utc(self.updated())
        if d is None:  # no console log: a file-logger JSONL alone says its last step in its tail
            step = file_logger_last_step(self.path) if self.is_jsonl else None
            return Overview(run_id=self.run_id, name=self.name, kind=self.kind, path=self.path, touched=touched,
                            step=step, last_step=step)
        last = d.tail.last_step
        started, ended = d.started, _stamp_seconds(d.tail.last_stamp)
        first = utc(started)
        return Overview(
            run_id=self.run_id, name=d.head.experiment or self.name, kind=self.kind, path=self.path,
            step=_steps_done(d), max_steps=d.max_steps,
            created=first, started=first, updated=utc(ended if ended is not None and started is not None
                                                      and ended >= started else None),
            model=d.model, attempts=d.attempts, eval_envs=list(d.eval_envs), flavor=d.head.flavor,
            finished=d.tail.final_validation, last_step=last, touched=touched)

    def card(self, now: float | None = None) -> Overview:
        """The summary, completed from the metrics: a log without wall-clock stamps at its ends gets
        its duration from the sum of its per-step `timing_s/step` (plus validation time logged
        outside a step); its resumes count every place the steps went back, which the ends alone
        (what the runs list reads) cannot see."""
        ov = self.overview(now)
        store = self.store()
        if store is None:
            return ov
        if ov.step is None and (top := store.last_valued_step()) is not None:  # no metric line in the tail
            ov.step = ov.last_step = top  # window (MiBs of other output after the last one)
            ov = ov.at(now)
        if ov.duration_s is None:
            ov.duration_s = cache.shared.current(_key("verl-duration", store.path), self.metrics_version(),
                                                 lambda: _timed_duration(self.metrics()), size=lambda _v: 64)
        ov.attempts = max(ov.attempts, 1 + len(self.resume_steps()))
        return ov

    # Problems ------------------------------------------------------------------------------------
    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        store = self.store()
        log = self.log_path()
        if store is not None:
            path, tail = store.path, store.tail
            if tail.error:
                out.append(Problem(path, tail.error))
            out += [Problem(path, what, n, line or None) for what, n, line in tail.problems.items()]
            if store.max_step() is None and not tail.error:
                out.append(Problem(path, "no metric lines yet" if path == log else "no metric rows yet"))
            if tail.pending_bytes and log == path and b"step:" in _read_or_empty(path, tail.offset, 1 << 20):
                out.append(Problem(path, "last line is incomplete (a metric line being written, or cut off): "
                                         "read when its newline arrives"))
        for p in self.config_prints():
            if p.error:
                out.append(Problem(log, p.error))
        return out + verl_dumps.dump_problems(*self.dump_dirs())

    # Samples: generation dumps (`verl_dumps`) ----------------------------------------------------
    def dump_dirs(self) -> tuple[list, list[Problem]]:
        """The generation-dump folders the config or the log names, and those it cannot read."""
        log = self.log_path()
        if log is None:
            return [], []
        folder = os.path.dirname(log)
        configs = [p.value for p in self.config_prints() if isinstance(p.value, dict)]
        return verl_dumps.dump_dirs(log, configs, bases=[folder, os.path.dirname(folder)])

    def samples(self, split: str | None = None, step: int | None = None):
        """One row per dumped generation (`verl_dumps`); empty without dumps."""
        return verl_dumps.list_samples(self.dump_dirs()[0], split=split, step=step)

    def episode(self, sample_id: str):
        return verl_dumps.read_episode(self.run_id, self.dump_dirs()[0], sample_id)


_STEP_TIMES = ("timing_s/step", "timing/step")
_VALIDATION_TIMES = ("timing_s/testing", "timing/testing")


def _read_or_empty(path: str, offset: int, nbytes: int) -> bytes:
    """Bytes at `offset`, or b"" when the log went away (rotated, deleted) since it was read."""
    try:
        return read_range(path, offset, offset + nbytes)
    except OSError:
        return b""


def _timed_duration(tidy) -> float | None:
    """Seconds the log's steps took: `timing_s/step` summed over steps (the last write of a step
    counts), plus `timing_s/testing` of steps without a step time (the initial validation); None
    when the log times no steps. A non-finite time (`inf`, `nan` logged) is left out: one would
    make the whole sum meaningless."""
    metric = tidy["metric"].astype(str)
    rows = tidy[metric.isin(_STEP_TIMES + _VALIDATION_TIMES) & tidy["step"].notna() & np.isfinite(tidy["value"])]
    if not rows["metric"].astype(str).isin(_STEP_TIMES).any():
        return None
    rows = rows.assign(kind=rows["metric"].astype(str).isin(_STEP_TIMES)).drop_duplicates(["step", "kind"], keep="last")
    timed = set(rows.loc[rows["kind"], "step"])
    extra = rows[~rows["kind"] & ~rows["step"].isin(timed)]
    return float(rows.loc[rows["kind"], "value"].sum() + extra["value"].sum())


def _steps_done(d: Digest) -> int | None:
    """Updates done: the last step, or one more than the last training step for a 0-based log (an
    SFT log's closing `val/loss` line does not count)."""
    if not d.zero_based or d.tail.last_train_step is None:
        return d.tail.last_step
    return d.tail.last_train_step + 1


__all__ = ["VerlRun", "val_sources", "model_name"]
