"""verl runs (`../shared/formats/verl.md`): a console log file, optionally with its file-logger JSONL.

verl has no run directory: a run is one captured console log (`<name>.log` / `<name>.out`, run id
`<name>`) in a tracked folder or its `logs/` subfolder, skipping sidecars (`*_vllm.log`,
`*_train_gpu_wandb.log`, `*_server.out`) and `launch_*` wrappers. A log with no metric line yet is
still a run. Metrics come from the log (`VerlLogTail`) or, when the `file` logger wrote
`<name>.jsonl` next to it (or the log names it), from that JSONL (full precision, spec 10); a
file-logger JSONL can also be tracked on its own. The config is the resolved-config print in the
log. A resumed run appended to the same log restarts its steps: each restart opens an attempt.

Subclasses (SWE-Lego-RL) reuse all of it; they only add what their extra files say.
"""
from __future__ import annotations

import os
import time

import pandas as pd

from .. import cache
from ..io.files import file_id, mtime, read_range
from ..io.verl_log import FileLoggerTail, VerlLogTail
from ..io.verl_text import ConfigPrint, HeadSummary, TailSummary, config_at, tail_summary
from ..metricstore import MetricStore, shared_store
from ..run import Overview, Problem, Run, derive_status, utc
from .verl_summary import (LOG_SUFFIXES, HeadCache, config_experiment, config_flavor, config_max_steps, config_model,
                           is_file_logger, stem, val_sources)
from .verl_summary import SKIP_SUFFIXES, Digest, find_runs, is_log_name, is_run_file, model_name  # noqa: F401 (API)

KIND = "verl"
_STORED: set[str] = set()  # logs a metric store was made for (discovery then asks the cache)


class VerlRun(Run):
    kind = KIND

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

    def file_logger_path(self) -> str | None:
        """The file-logger JSONL: the run itself, `<name>.jsonl` next to the log, or the path the
        log printed (`Creating file logger at …`, relative to the log's folder)."""
        if self.is_jsonl:
            return self.path
        candidates = [os.path.splitext(self.path)[0] + ".jsonl"]
        printed = self.head().file_logger
        if printed:
            candidates.append(os.path.join(os.path.dirname(self.path), os.path.expanduser(printed)))
        for c in candidates:
            try:
                if os.path.isfile(c) and is_file_logger(c):
                    return c
            except OSError:
                continue
        return None

    def head(self) -> HeadSummary:
        log = self.log_path()
        if log is None:
            return HeadSummary()
        return cache.shared.get_or_create(("verl-head", os.path.realpath(log)), HeadCache).get(log)

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
        _STORED.add(path)
        return shared_store(
            (f"metrics-{tail_class.__name__}", os.path.realpath(path)),
            lambda: MetricStore(path, tail=tail_class(path), default_producer="trainer", infer_producer=False))

    def metrics_wide(self, metrics: list[str] | None = None, producer: str | None = None) -> pd.DataFrame:
        store = self.store()
        if store is None or producer not in (None, "trainer"):
            return pd.DataFrame({"step": pd.array([], dtype="Int64"), "time": []})
        frame = store.wide("trainer", metrics=metrics)
        return frame.drop(columns="time_first", errors="ignore")

    def attempts(self) -> list[int]:
        """One attempt per restart segment: a resumed run appended to the same log logs lower steps."""
        store = self.store()
        return list(range(1, 2 + (len(store.restarts) if store is not None else 0)))

    def latest_attempt(self) -> int | None:
        return self.attempts()[-1]

    # Config --------------------------------------------------------------------------------------
    def config_prints(self) -> list[ConfigPrint]:
        """Every resolved-config print of the log (one per launch when a resume appended to it);
        from the log's metric pass when it ran, else the head's first print."""
        log = self.log_path()
        if log is None:
            return []
        store = self._cached_log_store()
        offsets = store.tail.config_offsets if store is not None else []
        prints = [p for off in offsets if (p := self._config_at(log, off)) is not None]
        if not prints and (first := self.head().config) is not None:
            prints = [first]
        return prints

    @staticmethod
    def _config_at(log: str, offset: int) -> ConfigPrint | None:
        """The config print at `offset`; a readable one is cached (a print still being written,
        or gone with a replaced file, is read again next time)."""
        fid = file_id(log)
        key = ("verl-config", os.path.realpath(log), fid and (fid.dev, fid.ino), offset)
        if (have := cache.shared.peek(key)) is not None:
            return have
        try:
            found = config_at(log, offset)
        except OSError:
            return None
        if found is not None and found.error is None:
            cache.shared.get_or_create(key, lambda: found)
        return found

    def _cached_log_store(self) -> MetricStore | None:
        log = self.log_path()
        key = (f"metrics-{VerlLogTail.__name__}", os.path.realpath(log)) if log else None
        return self.log_store() if key in cache.shared else None

    def config(self) -> dict:
        """The resolved config the log printed (the latest launch's); {} when there is none."""
        prints = [p for p in self.config_prints() if p.value is not None]
        return prints[-1].value if prints else {}

    def configs(self, attempt: int | None = None) -> dict[str, object]:
        prints = [p for p in self.config_prints() if p.value is not None]
        if not prints:
            return {}
        chosen = prints[-1] if attempt is None or attempt > len(prints) else prints[max(attempt, 1) - 1]
        return {"config (from log)": chosen.value}

    def experiment_name(self) -> str | None:
        return config_experiment(self.config())

    def flavor(self) -> str:
        return config_flavor(self.config())

    def max_steps(self, progress_total: int | None = None) -> int | None:
        """trainer.total_training_steps, else the tqdm total, else the SFT trainer's step count."""
        return config_max_steps(self.config(), self.head(), progress_total)

    def model(self) -> str | None:
        return config_model(self.config())

    # Overview ------------------------------------------------------------------------------------
    def updated(self) -> float | None:
        times = [t for p in (self.log_path(), self.file_logger_path()) if p and (t := mtime(p)) is not None]
        return max(times) if times else None

    def overview(self, *, full: bool = True, now: float | None = None) -> Overview:
        """The run card. `full=False` (discovery) reads only the head and the last 64 KiB of the
        log, plus (size, mtime); a parse already in the cache is used either way."""
        store = self.store() if full else self._cached_log_store()
        log = self.log_path()
        try:
            summary = tail_summary(log) if log else TailSummary()
        except OSError:  # unreadable right now: problems() says why
            summary = TailSummary()
        if store is not None:
            tail = store.tail
            step = tail.last_step if isinstance(tail, VerlLogTail) else store.max_step()
            first = tail.first_step if isinstance(tail, VerlLogTail) else store.min_step()
            keys = [k for b in store.stepped.values() for k in b.keys]
            final = getattr(tail, "final_validation", False) or summary.final_validation
        else:
            step, first, keys, final = summary.last_step, None, summary.keys, summary.final_validation
        max_steps = self.max_steps(summary.progress_total)
        updated = self.updated()
        now = time.time() if now is None else now
        # 0-based logs (era S1, SFT) have done step+1 updates at step `step`; S2 logs step from 1
        zero_based = first == 0 and store is not None and any(not k.startswith(("val", "test_score")) for k in
                                                               getattr(store.tail, "first_keys", ()))
        done = step + 1 if step is not None and zero_based else step
        status = derive_status(finished=final, updated=updated, step=done, max_steps=max_steps, now=now)
        started = self.head().started
        end = now if status == "running" else updated
        return Overview(
            run_id=self.run_id, name=self.experiment_name() or self.name, kind=self.kind, path=self.path,
            status=status, step=step, max_steps=max_steps, created=utc(started), started=utc(started),
            updated=utc(updated), duration_s=(end - started) if end is not None and started is not None and end >= started
            else None, model=self.model(), attempts=len(self.attempts()) if store is not None else 1,
            train_envs=[], eval_envs=val_sources(keys), flavor=self.flavor())

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
            if tail.pending_bytes and log == path and b"step:" in read_range(path, tail.offset, tail.offset + (1 << 20)):
                out.append(Problem(path, "last line is incomplete (a metric line being written, or cut off): "
                                         "read when its newline arrives"))
        for p in self.config_prints():
            if p.error:
                out.append(Problem(log, p.error))
        return out
