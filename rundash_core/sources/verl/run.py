"""verl runs (`docs/formats/verl.md`): a console log file, optionally with its file-logger JSONL.

verl has no run directory: a run is one captured console log (`<name>.log` / `<name>.out`, run id
`<name>`) in a tracked folder (or below it), skipping sidecars (`*_vllm.log`,
`*_train_gpu_wandb.log`, `*_server.out`) and `launch_*` wrappers. A log with no metric line yet is
still a run. Metrics come from the log (`VerlLogTail`) or, when the `file` logger wrote
`<name>.jsonl` next to it (or the log names it), from that JSONL (full precision, spec 10; a resume
starts that file over, so the steps before its first come from the log); a file-logger JSONL can
also be tracked on its own. The config is the resolved-config print in the
log. A resumed run appended to the same log restarts its steps: each restart opens an attempt.

The run card and the runs-list row are the log's one summary (`overview.overview_inputs`).
Subclasses (SWE-Lego-RL) reuse all of it; they only add what their extra files say.
"""
from __future__ import annotations

import os

import pandas as pd

from rundash_core import cache
from rundash_core.io.files import file_id, read_range, shown_path
from rundash_core.metrics.store import MetricStore, empty_tidy, shared_store
from rundash_core.overview import Overview, utc
from rundash_core.run import Problem, Run
from rundash_core.sources.verl import dumps as verl_dumps
from rundash_core.sources.verl.config_text import HEAD, ConfigPrint, config_at
from rundash_core.sources.verl.file_logger import FileLoggerTail
from rundash_core.sources.verl.metric_log import VerlLogTail
from rundash_core.sources.verl.overrides import HEAD_BYTES
from rundash_core.sources.verl.overview import (  # noqa: F401 (API)
    LOG_SUFFIXES,
    SKIP_SUFFIXES,
    OverviewInputs,
    _stamp_seconds,
    file_logger_last_step,
    find_runs,
    is_file_logger,
    is_log_name,
    is_run_file,
    model_name,
    overview_inputs,
    stem,
    val_sources,
)
from rundash_core.sources.verl.whole_pass import LogPass, log_pass

KIND = "verl"


def _key(what: str, path: str) -> tuple:
    """This module's cache keys: what, and the real path of the file it is about."""
    return (what, os.path.realpath(path))


class VerlRun(Run):
    kind = KIND
    kind_capabilities = frozenset({"metrics", "config", "attempts", "validation", "logs"})  # + dumps.OFFERS with dumps

    def __init__(self, path: str | os.PathLike, run_id: str | None = None):
        super().__init__(path, run_id)
        base = shown_path(os.path.basename(self.path))
        self.name = shown_path(stem(self.path))
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

    def overview_inputs(self) -> OverviewInputs | None:
        """The log's summary (None without a readable log)."""
        log = self.log_path()
        return overview_inputs(log) if log else None

    def file_logger_path(self) -> str | None:
        """The file-logger JSONL: the run itself, `<name>.jsonl` next to the log, or the path the
        log printed (`Creating file logger at …`, relative to the log's folder)."""
        if self.is_jsonl:
            return self.path
        candidates = [os.path.splitext(self.path)[0] + ".jsonl"]
        inputs = self.overview_inputs()
        if inputs is not None and inputs.file_logger:
            candidates.append(os.path.join(os.path.dirname(self.path), os.path.expanduser(inputs.file_logger)))
        for c in candidates:
            try:
                if file_id(c) is not None and is_file_logger(c):
                    return c
            except OSError:
                continue
        return None

    def logs(self):
        """The console log, and its `<exp>_vllm.log` sidecar when there is one (`verl_logs`)."""
        from rundash_core.sources.verl.logs import list_logs

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
        d = self.overview_inputs()  # the usual case, from the log's head: the JSONL starts where the log does
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
        step, parsed by `rundash_core.views.validation` (spec 9)."""
        from rundash_core.views.validation import metrics_validation

        return metrics_validation(self.metrics())

    def log_pass(self, *, timed: bool = False) -> LogPass | None:
        """The pass over the whole console log (`io.verl_pass`): resume prints, restarts, and
        (`timed`) the step times."""
        log = self.log_path()
        return log_pass(log, timed=timed) if log else None

    def _restarts(self) -> list[int]:
        """Steps where the metrics went back: in the console log (its pass), else in a file-logger
        JSONL tracked alone."""
        lp = self.log_pass()
        if lp is not None:
            return list(lp.restarts)
        store = self.store()
        return [step for _prod, step in store.restarts] if store is not None else []

    def resume_steps(self) -> list[int]:
        """Where the run resumed: the step N of each `Resuming from …/global_step_N` print, where
        steps went back (a launch appended to the log) and the first step of a log that starts
        above 1 (it resumed an earlier launch's checkpoint); a restart at N or N+1 is that print's."""
        return _resume_points(self.overview_inputs(), self.log_pass(), self._restarts())[0]

    def attempts(self) -> list[int]:
        """One attempt per resume (`resume_steps`), plus the first launch."""
        return list(range(1, 2 + len(self.resume_steps())))

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
        """The one summary (run card, runs-list row, status, TUI, Compare, AI), status as of `now`."""
        return self.read_overview().at(now)

    def read_overview(self) -> Overview:
        """The overview as read, without its status: from the log's ends and its pass (`io.verl_pass`,
        appended bytes only). Times come from the wall-clock stamps the log prints (the first in
        its head, the last in its tail window); a log whose end has no stamp gets its duration
        from its step timings, and `updated` = start + that duration: an estimate (it leaves out
        the time between steps no timer covers, and a crash's downtime). The files' mtime only
        says whether it is running."""
        d = self.overview_inputs()
        touched = utc(self.updated())
        if d is None:  # no console log: a file-logger JSONL alone says its last step in its tail
            step = file_logger_last_step(self.path) if self.is_jsonl else None
            if not os.access(self.path, os.R_OK):  # unreadable (named on Problems): its mtime says nothing
                touched = None
            resumes = self.resume_steps()
            return Overview(run_id=self.run_id, name=self.name, kind=self.kind, path=self.path, touched=touched,
                            step=step, last_step=step, attempts=1 + len(resumes))
        last = d.tail.last_step
        started, ended = d.started, _stamp_seconds(d.tail.last_stamp)
        stamped = ended is not None and started is not None and ended >= started
        lp = self.log_pass(timed=not stamped)
        duration, estimated = (ended - started if stamped else None), False
        if not stamped and lp is not None and (duration := lp.duration_s) is not None and started is not None:
            ended, estimated = started + duration, True  # estimated from the step timings
        elif not stamped:
            ended = None
        resumes, resumed_from = _resume_points(d, lp, self._restarts())
        first = utc(started)
        return Overview(
            run_id=self.run_id, name=self.name, kind=self.kind, path=self.path,
            project=d.head.project, experiment=d.head.experiment,
            step=_steps_done(d), max_steps=d.max_steps, created=first, started=first, updated=utc(ended),
            updated_estimated=estimated,
            duration_s=duration, model=d.model, attempts=1 + len(resumes), resumed_from=resumed_from,
            eval_envs=list(d.eval_envs), flavor=d.head.flavor, finished=d.tail.final_validation, last_step=last,
            touched=touched)

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
        """The generation-dump folders the config or the log names, and those it cannot read (what
        `capabilities` learns samples and episodes from)."""
        log = self.log_path()
        if log is None:
            return [], []
        folder = os.path.dirname(log)
        configs = [p.value for p in self.config_prints() if isinstance(p.value, dict)]
        dirs, problems = verl_dumps.dump_dirs(log, configs, bases=[folder, os.path.dirname(folder)])
        self._found("dumps", verl_dumps.OFFERS if dirs else ())
        return dirs, problems

    def samples(self, split: str | None = None, step: int | None = None):
        """One row per dumped generation (`verl_dumps`); empty without dumps."""
        return verl_dumps.list_samples(self.dump_dirs()[0], split=split, step=step)

    def episode(self, sample_id: str):
        return verl_dumps.read_episode(self.run_id, self.dump_dirs()[0], sample_id)


def _read_or_empty(path: str, offset: int, nbytes: int) -> bytes:
    """Bytes at `offset`, or b"" when the log went away (rotated, deleted) since it was read."""
    try:
        return read_range(path, offset, offset + nbytes)
    except OSError:
        return b""


def _resume_points(d: OverviewInputs | None, lp: LogPass | None, restarts: list[int]) -> tuple[list[int], list[int]]:
    """(the chart markers of the run's resumes, the checkpoint steps the log says it resumed
    from): a resume print's N; a place the steps went back to (or a first step above 1) that no
    print explains, marked where its steps begin (from which checkpoint is not said: its first
    line may be the checkpoint step's validation or the step after it)."""
    printed = sorted(set(lp.resumed_from)) if lp is not None else []
    seen = set(restarts)
    if d is not None and d.first_step is not None and d.first_step > 1:
        seen.add(d.first_step)
    explained = {n for p in printed for n in (p, p + 1)}
    inferred = sorted(s for s in seen if s not in explained)
    marks = sorted(set(printed) | set(inferred))
    return marks, printed


def _steps_done(d: OverviewInputs) -> int | None:
    """Updates done: the last step, or one more than the last training step for a 0-based log (an
    SFT log's closing `val/loss` line does not count)."""
    if not d.zero_based or d.tail.last_train_step is None:
        return d.tail.last_step
    return d.tail.last_train_step + 1


__all__ = ["VerlRun", "val_sources", "model_name"]
