"""verl runs (`../shared/formats/verl.md`): a console log file, optionally with its file-logger JSONL.

verl has no run directory: a run is one captured console log (`<name>.log` / `<name>.out`, run id
`<name>`) in a tracked folder (or below it), skipping sidecars (`*_vllm.log`,
`*_train_gpu_wandb.log`, `*_server.out`) and `launch_*` wrappers. A log with no metric line yet is
still a run. Metrics come from the log (`VerlLogTail`) or, when the `file` logger wrote
`<name>.jsonl` next to it (or the log names it), from that JSONL (full precision, spec 10); a
file-logger JSONL can also be tracked on its own. The config is the resolved-config print in the
log. A resumed run appended to the same log restarts its steps: each restart opens an attempt.

The run card and the runs-list row are the log's one summary (`verl_summary.log_digest`).
Subclasses (SWE-Lego-RL) reuse all of it; they only add what their extra files say.
"""
from __future__ import annotations

import os

from .. import cache
from ..io.files import file_id, read_range
from ..io.verl_log import FileLoggerTail, VerlLogTail
from ..io.verl_text import ConfigPrint, config_at
from ..metricstore import MetricStore, empty_tidy, shared_store
from ..run import Overview, Problem, Run, utc
from .verl_summary import LOG_SUFFIXES, Digest, is_file_logger, log_digest, stem, val_sources
from .verl_summary import SKIP_SUFFIXES, find_runs, is_log_name, is_run_file, model_name  # noqa: F401 (API)

KIND = "verl"


def _key(what: str, path: str) -> tuple:
    """This module's cache keys: what, and the real path of the file it is about."""
    return (what, os.path.realpath(path))


class VerlRun(Run):
    kind = KIND
    capabilities = frozenset({"metrics", "config", "attempts"})

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

    def metrics(self):
        store = self.store()
        return store.tidy() if store is not None else empty_tidy()

    def metrics_version(self) -> tuple:
        store = self.store()
        return (store.path, *store.stamp) if store is not None else ()

    def attempts(self) -> list[int]:
        """One attempt per restart segment: a resumed run appended to the same log logs lower steps."""
        store = self.store()
        return list(range(1, 2 + (len(store.restarts) if store is not None else 0)))

    # Config --------------------------------------------------------------------------------------
    def config_prints(self) -> list[ConfigPrint]:
        """Every resolved-config print of the log (one per launch when a resume appended to it),
        where the log's metric pass found them; else the first print in the head."""
        log = self.log_path()
        if log is None:
            return []
        store = self.log_store()
        offsets = list(store.tail.config_offsets) if store is not None else []
        prints = [p for off in offsets or [0] if (p := self._config_at(log, off)) is not None]
        return prints

    @staticmethod
    def _config_at(log: str, offset: int) -> ConfigPrint | None:
        """The config print at `offset`; a readable one is cached (a print still being written,
        or gone with a replaced file, is read again next time)."""
        fid = file_id(log)
        key = (*_key("verl-config", log), fid and (fid.dev, fid.ino), offset)
        if (have := cache.shared.peek(key)) is not None:
            return have
        try:
            found = config_at(log, offset)
        except OSError:
            return None
        if found is not None and found.error is None:
            cache.shared.get_or_create(key, lambda: found)
        return found

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

    # Overview ------------------------------------------------------------------------------------
    def updated(self) -> float | None:
        times = [fp.mtime for p in (self.log_path(), self.file_logger_path()) if p and (fp := file_id(p)) is not None]
        return max(times) if times else None

    def overview(self, now: float | None = None) -> Overview:
        """The run card and runs-list row, from the log's one summary (its ends) and file times."""
        d = self.digest()
        if d is None:
            return Overview(run_id=self.run_id, name=self.name, kind=self.kind, path=self.path,
                            updated=utc(self.updated())).at(now)
        step = d.tail.last_step
        return Overview(
            run_id=self.run_id, name=d.head.experiment or self.name, kind=self.kind, path=self.path, step=step,
            max_steps=d.max_steps, created=utc(d.started), started=utc(d.started), updated=utc(self.updated()),
            model=d.model, attempts=d.attempts, eval_envs=list(d.eval_envs), flavor=d.head.flavor,
            finished=d.tail.final_validation,
            steps_done=step + 1 if step is not None and d.zero_based else step).at(now)

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


__all__ = ["VerlRun", "val_sources", "model_name"]
