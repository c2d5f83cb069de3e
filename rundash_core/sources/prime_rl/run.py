"""prime-rl run directories (`docs/formats/prime-rl.md`), every layout newest first.

A run is `<output_dir>/<run.dir>` with numbered attempts (`configs/attempt_N`, `logs/attempt_N`)
and `latest` links; metrics are `monitors/file/metrics.jsonl` (or the legacy `metrics.jsonl`).
"""
from __future__ import annotations

import os
import re

from rundash_core import cache
from rundash_core.io.configs import dig, load_config_file
from rundash_core.io.files import mtime, walk_files
from rundash_core.metrics.steps_done import steps_done
from rundash_core.metrics.store import MetricStore, empty_tidy, shared_store
from rundash_core.overview import Overview, utc
from rundash_core.run import Problem, Run
from rundash_core.sources.prime_rl.ends import metrics_ends
from rundash_core.sources.prime_rl.layout import (
    ATTEMPT,
    attempt_numbers,
    latest_attempt,
    listdir_or_empty,
    stamp,
    unlistable,
)
from rundash_core.views.reports import has_reports, list_reports

METRICS_PATHS = ("monitors/file/metrics.jsonl", "metrics.jsonl")
_NAME = re.compile(r"^(?P<envs>[^-].*?)--(?P<model>.+?)(?:--(?P<harness>[^-]+))?--(?P<id>[0-9a-f]{8})$")
_RESOLVED_ORDER = ("rl.json", "sft.json", "orchestrator.json", "trainer.json", "inference.json", "eval.json")


class PrimeRLRun(Run):
    kind = "prime-rl"
    kind_capabilities = frozenset({"metrics", "config", "attempts", "samples", "episodes", "tokens", "validation",
                                   "logs"})  # + reports when it has some (`reports()`, `problems()`)

    # Files ---------------------------------------------------------------------------------------
    def _in_run(self, *parts: str) -> str:
        """A path inside the run folder."""
        return os.path.join(self.path, *parts)

    def metrics_path(self) -> str | None:
        for rel in METRICS_PATHS:
            p = self._in_run(rel)
            if os.path.lexists(p):
                return p
        return None

    def attempts(self) -> list[int]:
        nums = sorted(set(attempt_numbers(self._in_run("configs"))) | set(attempt_numbers(self._in_run("logs"))))
        return nums or [1]

    def latest_attempt(self) -> int | None:
        """`latest` of configs/ (else logs/); a run with neither (an eval dir) is its one attempt."""
        return latest_attempt(self._in_run("configs")) or latest_attempt(self._in_run("logs")) or self.attempts()[-1]

    def _config_root(self, attempt: int | None) -> str:
        """The folder holding command.txt / *.toml / resolved/ for an attempt, newest layout first."""
        if attempt is None:  # the latest: `_latest_attempt` found its folder
            latest = latest_attempt(self._in_run("configs"))
            if latest is not None:
                return self._in_run("configs", f"attempt_{latest}")
            attempt = latest_attempt(self._in_run("logs"))
        if attempt is not None and os.path.isdir(self._in_run("configs", f"attempt_{attempt}")):
            return self._in_run("configs", f"attempt_{attempt}")
        return self._in_run("configs")

    def _resolved_dir(self, attempt: int | None = None) -> str:
        root = self._config_root(attempt)
        resolved = os.path.join(root, "resolved")
        return resolved if os.path.isdir(resolved) else root

    def config_files(self, attempt: int | None = None) -> list[str]:
        """Paths of the attempt's config files: resolved JSONs first, then TOML and command.txt."""
        resolved = self._resolved_dir(attempt)
        found = [p for p in walk_files(resolved, skip=lambda d: d.startswith(".") or bool(ATTEMPT.match(d))
                                       or d == "latest") if p.endswith(".json")]
        rank = {n: i for i, n in enumerate(_RESOLVED_ORDER)}
        found.sort(key=lambda p: (os.path.dirname(p) != resolved, rank.get(os.path.basename(p), 99), p))
        root = self._config_root(attempt)
        extras = sorted(os.path.join(root, f) for f in listdir_or_empty(root) if f.endswith(".toml"))
        if os.path.exists(os.path.join(root, "command.txt")):
            extras.append(os.path.join(root, "command.txt"))
        return found + extras

    def read_configs(self, attempt: int | None = None) -> dict[str, object]:
        root = self._config_root(attempt)
        return {os.path.relpath(p, root): load_config_file(p).value for p in self.config_files(attempt)}

    def _resolved(self, attempt: int | None = None) -> dict[str, dict]:
        """Top-level resolved JSON objects by stem (`orchestrator`, `trainer`, `rl`, `sft`, ...)."""
        resolved = self._resolved_dir(attempt)
        out = {}
        for f in listdir_or_empty(resolved):
            if f.endswith(".json"):
                value = load_config_file(os.path.join(resolved, f)).value
                if isinstance(value, dict):
                    out[f[:-5]] = value
        return out

    def read_config(self) -> dict:
        """rl.json when present (the whole RLConfig), else {component: resolved config}."""
        resolved = self._resolved()
        if "rl" in resolved:
            return resolved["rl"]
        if "sft" in resolved and len(resolved) == 1:
            return resolved["sft"]
        return resolved

    # Metrics -------------------------------------------------------------------------------------
    def flavor(self) -> str:
        resolved = listdir_or_empty(self._resolved_dir())
        if "sft.json" in resolved:
            return "sft"
        if {"orchestrator.json", "trainer.json", "rl.json"} & set(resolved):
            return "rl"
        if "eval.json" in resolved or (os.path.exists(self._in_run("traces.jsonl"))
                                       and not os.path.isdir(self._in_run("configs"))):
            return "eval"
        return "rl"

    def store(self) -> MetricStore | None:
        path = self.metrics_path()
        if path is None:
            return None
        flavor = self.flavor()
        default = "trainer" if flavor != "eval" else "eval"
        return shared_store(("metrics", os.path.realpath(path)),
                            lambda: MetricStore(path, default_producer=default, infer_producer=flavor == "rl"))

    def metrics(self):
        store = self.store()
        return store.tidy() if store is not None else empty_tidy()

    def resume_steps(self) -> list[int]:
        """Where the trainer's steps went back (an attempt resumed from an earlier checkpoint)."""
        store = self.store()
        if store is None:
            return []
        with store.lock:
            return sorted({step for prod, step in store.restarts if prod == "trainer"} or
                          {step for _prod, step in store.restarts})

    def metrics_version(self) -> tuple:
        store = self.store()
        return (store.path, *store.stamp) if store is not None else ()

    def validation(self):
        """The eval metrics `eval/<env>/…` (avg@k, pass@k, pass^k, mean reward) per step
        (`rundash_core.views.validation`)."""
        from rundash_core.views.validation import metrics_validation, parse_eval_key

        return metrics_validation(self.metrics(), parse=parse_eval_key)

    def eval_plan(self):
        """Eval episodes expected per env and step: `monitors/file/plan.json` (spec 2.1)."""
        from rundash_core.views.eval_pane import read_plan

        return read_plan(self._in_run("monitors", "file", "plan.json"))[0]

    # Overview ------------------------------------------------------------------------------------
    def _max_steps(self) -> int | None:
        resolved = self._resolved()
        for stem, path in (("orchestrator", ("max_steps",)), ("sft", ("max_steps",)), ("rl", ("max_steps",)),
                           ("rl", ("orchestrator", "max_steps")), ("trainer", ("max_steps",))):
            value = dig(resolved.get(stem), *path)
            if isinstance(value, int):
                return value
        return None

    def _model(self) -> str | None:
        resolved = self._resolved()
        for stem in ("orchestrator", "rl", "sft", "trainer", "eval"):
            value = dig(resolved.get(stem), "model", "name")
            if isinstance(value, str):
                return value
        m = _NAME.match(self.name)
        return m.group("model") if m else None

    def _envs(self) -> tuple[list[str], list[str]]:
        resolved = self._resolved()
        orch = resolved.get("orchestrator") or dig(resolved.get("rl"), "orchestrator") or resolved.get("eval") or {}
        train = _source_names(dig(orch, "train", "source")) or _source_names(dig(orch, "env"))
        evals = _source_names(dig(orch, "eval", "source")) or _source_names(dig(orch, "eval", "env"))
        if not train and self.flavor() == "sft":
            data = dig(resolved.get("sft"), "data", "name") or dig(resolved.get("sft"), "data", "dataset_name")
            train = [data] if isinstance(data, str) else []
        if not train:
            m = _NAME.match(self.name)
            if m and m.group("envs") != "no-env":
                train = m.group("envs").split("+")
        return train, evals

    def _inputs(self) -> tuple:
        """What the summary depends on, from about fifteen filesystem calls: the metrics file, the
        configs/ and logs/ folders (a new attempt changes their mtime), the latest attempt's
        resolved configs and logs, the trace stream's newest chunk, traces.jsonl."""
        logs = self._logs_dir()
        stream = self._in_run("monitors", "file", "traces", "stream")
        chunks = listdir_or_empty(stream)
        metrics = stamp(self._in_run(METRICS_PATHS[0])) or stamp(self._in_run(METRICS_PATHS[1]))
        root = self._config_root(None)
        return (metrics, stamp(self._in_run("configs")), root, stamp(os.path.join(root, "resolved")),
                stamp(self._in_run("logs")),
                logs, tuple((f, stamp(os.path.join(logs, f))) for f in listdir_or_empty(logs) if f.endswith(".log")),
                tuple(chunks), stamp(os.path.join(stream, chunks[-1])) if chunks else None,
                stamp(self._in_run("traces.jsonl")))

    def overview(self, now: float | None = None) -> Overview:
        """The run card and runs-list row: the metrics file's ends, the resolved configs and file
        times, cached until one of `_inputs()` changes; the status as of `now`."""
        inputs = self._inputs()
        key = ("prime-rl-summary", self.real_path, self.run_id)
        return cache.shared.current(key, inputs, lambda: self._read_overview(inputs)).at(now)

    def _read_overview(self, inputs: tuple) -> Overview:
        """Times from the metrics' own `time` (first row, last rows), not from file times (a run
        without metric times yet falls back to its files'); the newest file time (`touched`) says
        whether the run is still being written."""
        last, ended, started, first_step = metrics_ends(self.metrics_path(), self.store)
        times = [t[1] for t in (inputs[0], *(s for _f, s in inputs[6]), inputs[8], inputs[9]) if t is not None]
        touched = max(times) if times else None
        if started is None:
            started = mtime(self._resolved_dir()) if os.path.isdir(self._in_run("configs")) else None
        train, evals = self._envs()
        return Overview(
            run_id=self.run_id, name=self.name, kind=self.kind, path=self.path,
            step=steps_done(last, first_step),
            max_steps=self._max_steps(), created=utc(started), started=utc(started),
            updated=utc(ended if ended is not None else touched), model=self._model(), attempts=len(self.attempts()),
            train_envs=train, eval_envs=evals, flavor=self.flavor(), finished=self._finished(), last_step=last,
            touched=utc(touched))

    def logs(self):
        """Every log file of every attempt (`prime_rl_logs`)."""
        from rundash_core.sources.prime_rl.logs import list_logs

        return list_logs(self.path)

    def reports(self):
        listing = list_reports(self.path)
        self._found("reports", {"reports"} if len(listing) else ())
        return listing

    def _logs_dir(self) -> str:
        n = latest_attempt(self._in_run("logs"))
        return self._in_run("logs", f"attempt_{n}") if n is not None else self._in_run("logs")

    def _finished(self) -> bool:
        if self.flavor() != "eval":
            return False
        stream = self._in_run("monitors", "file", "traces", "stream")
        names = listdir_or_empty(stream)
        return os.path.isdir(stream) and not any(n.endswith(".jsonl") for n in names)

    # Problems ------------------------------------------------------------------------------------
    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        path = self.metrics_path()
        if path is None:
            out.append(Problem(self._in_run(METRICS_PATHS[0]), "no metrics file yet (missing)"))
        else:
            store = self.store()
            if store.tail.error:
                out.append(Problem(path, store.tail.error))
            elif store.tail.fid is not None and store.tail.offset == 0 and store.tail.pending_bytes == 0:
                out.append(Problem(path, "empty file: no metric rows yet"))
            out += [Problem(path, what, n, line) for what, n, line in store.tail.problems.items()]
        for p in self.config_files():
            err = load_config_file(p).error
            if err:
                out.append(Problem(p, err))
        link = self._in_run("configs", "latest")
        if os.path.islink(link) and not os.path.exists(link):
            out.append(Problem(link, f"broken symlink (using attempt_{self.latest_attempt()})"))
        for folder in dict.fromkeys((self._in_run("configs"), self._config_root(None), self._resolved_dir(),
                                     self._in_run("logs"))):
            if (why := unlistable(folder)) is not None:
                out.append(Problem(folder, f"cannot be listed ({why}): its files are not shown"))
        from rundash_core.io.unreadable import unreadable_problems
        from rundash_core.sources.prime_rl.checks import chunk_problems, config_problems, log_problems
        from rundash_core.sources.prime_rl.lines import bad_line_problems
        from rundash_core.sources.prime_rl.live import live_problems
        from rundash_core.sources.prime_rl.traces import deep_record_problems
        from rundash_core.views.eval_pane import read_plan  # (plan.json: the eval pane's blocks)

        out += bad_line_problems(self.path) + deep_record_problems(self.path)  # trace records read so far
        out += config_problems(self._resolved_dir(), self.config_files()) + log_problems(self.logs())
        out += chunk_problems(self.path) + live_problems(self.path)
        out += unreadable_problems([self._in_run("logs"), self._in_run("reports"), self._in_run("monitors")], out)
        self._found("reports", {"reports"} if has_reports(self.path) else ())  # (the app and TUI refresh read this)
        return out + read_plan(self._in_run("monitors", "file", "plan.json"))[1]

    # Samples (traces: `prime_rl_traces`) ---------------------------------------------------------
    def samples(self, split: str | None = None, step: int | None = None):
        """One row per episode: from `monitors/file/traces/stream.index.jsonl` (the index files
        only), else the older `rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl`
        (see `prime_rl_traces`)."""
        from rundash_core.sources.prime_rl import traces as prime_rl_traces

        if split not in (None, "train", "eval"):
            raise ValueError(f"split must be 'train', 'eval' or None, not {split!r}")
        out = prime_rl_traces.samples(self.path)
        if split is not None:
            out = out[out["split"] == split]
        if step is not None:
            out = out[out["step"] == step]
        return out.reset_index(drop=True)

    def episode(self, sample_id: str):
        """One episode record, read at its locator (one seek; a sealed chunk through its seek
        table), annotations folded in; a `live-…` id: the partial trace of an in-flight episode."""
        from rundash_core.sources.prime_rl import live as prime_rl_live
        from rundash_core.sources.prime_rl import traces as prime_rl_traces

        if sample_id.startswith(prime_rl_live.LIVE_PREFIX):
            return prime_rl_live.live_episode(self.path, self.run_id, sample_id)
        return prime_rl_traces.read_episode(self.path, self.run_id, None, sample_id)  # (row by id: no listing copy)

    def live_samples(self):
        """In-flight episodes from `monitors/file/traces/live/` (`prime_rl_live`, spec 5.7)."""
        from rundash_core.sources.prime_rl import live as prime_rl_live

        return prime_rl_live.live_samples(self.path)


def _source_names(sources) -> list[str]:
    if not isinstance(sources, list):
        return []
    names = []
    for s in sources:
        if isinstance(s, dict):
            name = s.get("name") or dig(s, "env", "id") or s.get("id")
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


