"""SWE-Lego-RL runs (`docs/formats/swe-lego-rl.md`): a verl console log plus its Harbor trial dirs.

The run is the log file `<workdir>/logs/<exp>.log` (run id `<exp>`). Metrics, config and the run
card come from the log as for plain verl (`VerlRun`); the trials are found (spec 1.3) from the
`.../harbor_trials/<project>/<exp>/step_N` paths the log names (a path from another machine's
mount is looked up at the same `<project>/<exp>` under the log's own workdir), from the sibling
folder `<workdir>/harbor_trials/*/<exp>[-YYYYMMDD-HHMMSS]`, and by sibling expansion (the other
nodes' `<stem>-YYYYMMDD-HHMMSS` dirs, stamps within 600 s). A log with no linked trial dirs is
plain verl.

`samples()`: one row per trial dir (see `harbor.py`). `step_folder` is the `step_NNNN` folder
number; `step` (and `trainer_step`) the trainer step where known (`harbor_steps`): in synchronous
training the folder number, for a validation dump the step the log maps or pairs it with (spec
2.3); NA for a fully-async run's training folders (a rollouter sample counter, spec 2.1).

A folder is a validation dump (`split='val'`) when the log starts a validation for it
(`test_gen_batch meta info: {… 'validate': True, 'global_steps': X}`) or maps it
(`val_map: step_X -> train_step T`), or, with no word from the log, when it holds more than
3·n trials (n = `actor_rollout_ref.rollout.n`, default 8), mostly one per task. Spec 2.2's count
alone (> max(50, 4·n)) would miss the small sample's 30-trial dumps and call a synchronous run's
step folder (batch × n trials, n per task) a dump.

`validation()`: per validation event × source × statistic; source `trials` (pass@1 over the
fixed cohort, spec 6) and `log` (the `val-*` keys and `rollouter/validate_time` the log printed at
the paired trainer step).
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter

import numpy as np
import pandas as pd

from rundash_core import cache, episode_ids, frames
from rundash_core.io.files import OUTSIDE_ROOTS, file_id, inside_roots
from rundash_core.overview import Overview, utc
from rundash_core.run import Problem
from rundash_core.sources.swe_lego_rl import harbor, harbor_steps, harbor_val
from rundash_core.sources.swe_lego_rl.harbor_episode import trial_episode
from rundash_core.sources.swe_lego_rl.marks import LogMarks, log_marks  # noqa: F401 (LogMarks: part of this module's surface)
from rundash_core.sources.verl.overview import is_log_name, overview_inputs, stem
from rundash_core.sources.verl.run import VerlRun

KIND = "swe-lego-rl"
PROBE_BYTES = 16 << 10  # detection searches this much of the head and of the tail (io.verl_ends.FIRST_BYTES)
DEFAULT_N = 8
LOW_COVERAGE = 0.5
VAL_STAT_PREFIXES = ("val-", "val/")

SAMPLE_COLUMNS = tuple(frames.SAMPLES)


# Finding runs ------------------------------------------------------------------------------------
def is_run_file(path: str) -> bool:
    """A console log (named as verl's) with linked trial dirs: the sibling
    `harbor_trials/*/<exp>` folder (one stat per folder), else `harbor_trials/.../step_N` paths
    in the first or last 16 KiB (`PROBE_BYTES`, the bytes discovery reads anyway). No full parse."""
    if not is_log_name(os.path.basename(path)) or file_id(path) is None:
        return False
    if harbor.sibling_exp_dirs(path, stem(path)):
        return True
    inputs = overview_inputs(path)  # one read of the log's ends, shared with discovery, cached by fingerprint
    return inputs is not None and inputs.names_trials


def find_runs(entries: list[os.DirEntry]) -> list[str]:
    """The Lego-RL logs among a folder's entries."""
    out = []
    for e in entries:
        try:
            if is_log_name(e.name) and e.is_file() and is_run_file(e.path):
                out.append(e.path)
        except OSError:
            continue
    return out


def _unique_ids(trials: pd.DataFrame) -> pd.Series:
    """Sample ids, unique: a trial dir name met again in another exp dir (a copied dump) gets
    `~<hash of its path>`, so each copy opens as its own episode (the first keeps the plain id)."""
    ids = trials["sample_id"]
    again = ids.duplicated()
    if not again.any():
        return ids
    tags = trials["locator"].map(lambda p: hashlib.sha1(p.encode("utf-8", "surrogateescape")).hexdigest()[:8])
    return ids.where(~again, ids + "~" + tags)


# The run -----------------------------------------------------------------------------------------
class SweLegoRLRun(VerlRun):
    kind = KIND
    kind_capabilities = VerlRun.kind_capabilities | {"samples", "episodes", "validation", "failure_modes"}

    def __init__(self, path: str | os.PathLike, run_id: str | None = None):
        super().__init__(path, run_id)
        self.exp = stem(self.path)  # the file name decides, as in Lego-RL (not trainer.experiment_name)
        self._lock = threading.Lock()
        self._link_problems: list[Problem] = []

    def read_overview(self) -> Overview:
        """The verl overview; a log that prints no wall-clock time at its end is dated by its
        trials instead (data, where the verl overview could only estimate from step timings): the
        last `finished_at` of the newest step folder next to its `logs/`."""
        ov = super().read_overview()
        d = self.overview_inputs()
        if d is not None and d.tail.last_stamp is None:
            ended = harbor.newest_finish(harbor.sibling_exp_dirs(self.path, self.exp))
            if ended is not None and (ov.started is None or ended >= ov.started.timestamp()):
                ov.updated = utc(ended)
                if ov.started is not None:
                    ov.duration_s = ended - ov.started.timestamp()
        return ov

    # Trial dirs ----------------------------------------------------------------------------------
    def marks(self) -> LogMarks:
        return log_marks(self.path)

    def exp_dirs(self) -> list[str]:
        """The exp dirs of this run (spec 1.3): named by the log, the sibling folder's, expanded."""
        found, problems = [], []
        for named in self.marks().named:
            if not inside_roots(named):
                problems.append(Problem(named, f"trial dir named in the log {OUTSIDE_ROOTS}"))
            elif os.path.isdir(named):
                found.append(named)
            elif (copy := harbor.local_copy(named, self.path)) is not None:
                found.append(copy)
            elif os.path.lexists(named):  # a file or a broken link where the folder should be
                problems.append(Problem(named, "trial dir named in the log is not a folder"))
            else:
                problems.append(Problem(named, "trial dir named in the log is not on disk "
                                               "(deleted, or another machine's path)"))
        found += harbor.sibling_exp_dirs(self.path, self.exp)
        unique = list({os.path.realpath(d): d for d in reversed(found)}.values())[::-1]
        expanded = harbor.expand_siblings(unique)  # (a sibling or project folder may link anywhere)
        problems += [Problem(d, f"trial dir {OUTSIDE_ROOTS}") for d in expanded if not inside_roots(d)]
        with self._lock:
            self._link_problems = problems
        return [d for d in expanded if inside_roots(d)]

    def expected_n(self) -> int:
        """Rollouts per prompt: `actor_rollout_ref.rollout.n` from the logged config (default 8)."""
        try:
            n = self.read_config().get("actor_rollout_ref", {}).get("rollout", {}).get("n")
        except Exception:  # a config that cannot be recovered is the verl reader's problem
            n = None
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else DEFAULT_N

    def training_flavor(self) -> str | None:
        """'sync', 'fully-async', or None when the log does not say (`harbor_steps`)."""
        try:
            config = self.read_config()
        except Exception:  # a config that cannot be recovered is the verl reader's problem
            config = {}
        return harbor_steps.training_flavor(config, self.marks().rollouter)

    def _groups(self) -> list[tuple]:
        """(step, name, split, trainer_step, trials, tasks, [harbor.Folder]) per folder number."""
        marks, n, by_step, exp_dirs = self.marks(), self.expected_n(), {}, self.exp_dirs()
        flavor = self.training_flavor()
        listing = harbor.list_folders(exp_dirs)
        for f in listing:
            by_step.setdefault(f.step, []).append(f)
        for d in exp_dirs:  # forget what was kept of folders that are gone
            if ("harbor-exp", os.path.realpath(d)) in cache.shared:
                harbor.exp_dir_trials(d).forget_except({f.name for f in listing if f.exp_dir == d})
        out = []
        for step, fs in sorted(by_step.items()):
            tasks = Counter(harbor.task_id_of(t) for f in fs for t in f.trials)
            entries = sum(tasks.values())
            singles = sum(1 for c in tasks.values() if c == 1)
            val = marks.is_validation(step) or (entries > 3 * n and len(tasks) > 1 and 2 * singles >= len(tasks))
            trainer = harbor_steps.trainer_step(step, validation=val, flavor=flavor, logged=marks.train_step(step))
            out.append((step, fs[0].name, "val" if val else "train", trainer, entries, len(tasks), fs))
        return out

    def folders(self) -> pd.DataFrame:
        """One row per rollout folder number over all exp dirs: step, name, split, trainer_step,
        trials (entries summed over exp dirs), tasks (distinct task ids), exp_dirs (holding it)."""
        rows = [(*g[:6], len(g[6])) for g in self._groups()]
        frame = pd.DataFrame(rows, columns=["step", "name", "split", "trainer_step", "trials", "tasks", "exp_dirs"])
        for col in ("step", "trainer_step", "trials", "tasks", "exp_dirs"):
            frame[col] = pd.array(frame[col].tolist(), dtype="Int64")
        for col in ("name", "split"):
            frame[col] = frame[col].astype("str")
        return frame

    # Frames --------------------------------------------------------------------------------------
    def samples(self, split: str | None = None, step: int | None = None) -> pd.DataFrame:
        """One row per trial dir (result.json + verifier/reward.txt; trajectories are not read).

        step and trainer_step: the trainer step where known (`step`: filters by it), else NA;
        step_folder: the `step_NNNN` folder number; reward:
        reward.txt, else result.json's verifier reward; ok: False when the trial raised
        (exception_type/exception from result.json's exception_info, else exception.txt), NA when
        it has no readable result.json; problem: why the trial could not be fully read;
        turns: not in result.json, left NA; locator: the trial dir."""
        if split not in (None, "train", "val"):
            raise ValueError(f"split must be 'train', 'val' or None, not {split!r}")
        return self._samples([g for g in self._groups() if split in (None, g[2]) and step in (None, g[3])])

    @staticmethod
    def _samples(groups: list[tuple]) -> pd.DataFrame:
        trials = harbor.read_folders([f for g in groups for f in g[6]])
        by_step = {g[0]: g for g in groups}
        steps = trials["step"].to_numpy(dtype="int64")
        error = trials["exception_type"].where(trials["exception"].isna() | (trials["exception"] == ""),
                                               trials["exception_type"] + ": " + trials["exception"])
        return frames.typed({
            "sample_id": _unique_ids(trials), "episode_id": trials["locator"].map(os.path.basename),
            "split": [by_step[n][2] for n in steps], "step": [by_step[n][3] for n in steps],
            "trainer_step": [by_step[n][3] for n in steps], "step_folder": trials["step"], "group_id": trials["task_id"],
            "task_id": trials["task_id"], "env": trials["capability"], "reward": trials["reward"],
            "ok": trials["ok"], "error": error, "status": trials["ok"].map({True: "completed", False: "error"}),
            "input_tokens": trials["n_input_tokens"], "output_tokens": trials["n_output_tokens"],
            "turns": trials["turns"], "duration_s": trials["duration_s"], "locator": trials["locator"],
        }, frames.SAMPLES)

    def episode(self, sample_id: str) -> frames.Episode:
        """The trial's result and its agent transcript (ATIF), read from its trial dir; by its
        sample id or its trial name (`episode_ids`)."""
        step = sample_id.split("-", 1)[0]
        folder = int(step) if step.isascii() and step.isdigit() else None  # (a sample id starts with its folder)
        samples = self._samples([g for g in self._groups() if g[0] == folder]) if folder is not None else None
        if samples is None or not (samples["sample_id"] == sample_id).any():
            samples = self.samples()  # (a trial name: any step)
        row = episode_ids.row(samples, sample_id, self.run_id)
        return trial_episode(row["locator"], row, self.run_id)

    def validation(self) -> pd.DataFrame:
        """Per validation event × source × statistic (`frames.VALIDATION`): event (the dump's
        folder name), step (the trainer step the log pairs it with, else NA).

        source `trials` (spec 6): over the fixed cohort (tasks present in at least half of the
        events), the first copy of each task (smallest path): val_score = solved / cohort tasks
        present (pass@1; solved = reward > 0; n = those tasks; core), solved, tasks, cohort_size,
        coverage = tasks / cohort_size, low_coverage (1.0 below 0.5: indicative only), trials (all
        dirs, re-sent copies included). source `<capability>` (the repo: task id without its trailing
        number): pass@1 over its cohort tasks (n; aux). source `log`: every `val-*` key and
        `rollouter/validate_time` the log printed at the paired trainer step (core: `val-core/*`)."""
        events, first = self._val_first()
        rows = []
        if events:
            cohort = set(harbor_val.cohort(events, first))
            tidy = self._log_validation_metrics()
            for folder, name, _split, trainer_step, trials, _tasks, _fs in events:
                mine = first[(first["step"] == folder) & first["task_id"].isin(cohort)]
                solved = int((mine["reward"] > 0).sum())
                coverage = len(mine) / len(cohort) if cohort else np.nan
                stats = {"val_score": solved / len(mine) if len(mine) else np.nan, "solved": solved,
                         "tasks": len(mine), "cohort_size": len(cohort), "coverage": coverage,
                         "low_coverage": float(coverage < LOW_COVERAGE) if cohort else np.nan,
                         "trials": trials}
                base = (folder, name, trainer_step)
                rows += [(*base, "trials", k, float(v), len(mine) if k == "val_score" else None, k == "val_score")
                         for k, v in stats.items()]
                by_capability = mine.groupby("env")["reward"]  # per capability (repo): pass@1, aux
                rows += [(*base, str(cap), "pass@1", float((r > 0).mean()), len(r), False) for cap, r in by_capability]
                if trainer_step is not None:
                    at = tidy[tidy["step"] == trainer_step]
                    rows += [(*base, "log", str(m), float(v), None, str(m).startswith("val-core/"))
                             for m, v in zip(at["metric"], at["value"])]
        rows.sort(key=lambda r: (r[2] is None, r[2] if r[2] is not None else 0, r[0]))  # unpaired last, by folder
        cols = ["_folder", "event", "step", "source", "statistic", "value", "n", "core"]
        return frames.typed(pd.DataFrame(rows, columns=cols), frames.VALIDATION)

    def _val_first(self) -> tuple[list[tuple], pd.DataFrame]:
        """The val events (folder groups) and the first copy (smallest path) of each task in each:
        the Harbor trial rows (env = capability, output_tokens), without a samples() conversion."""
        events = [g for g in self._groups() if g[2] == "val"]
        trials = harbor.read_folders([f for g in events for f in g[6]])
        trials = trials.rename(columns={"capability": "env", "n_output_tokens": "output_tokens"})
        trials["sample_id"] = _unique_ids(trials)  # (the ids samples() gives: failure modes link to them)
        return events, trials.sort_values("locator").drop_duplicates(["step", "task_id"])

    def val_cot(self) -> pd.DataFrame:
        """CoT share per val event over the fixed cohort (spec 7; `sources.harbor_val`)."""
        return harbor_val.val_cot(*self._val_first())

    def failure_modes(self, event: str | None = None) -> pd.DataFrame:
        """Failure mode of each cohort task of a val event, default the last (spec 8)."""
        return harbor_val.failure_modes(*self._val_first(), event)

    def _log_validation_metrics(self) -> pd.DataFrame:
        tidy = self.metrics()
        keep = tidy["metric"].astype("str")
        keep = keep.str.startswith(VAL_STAT_PREFIXES) | (keep == "rollouter/validate_time")
        return tidy[keep & tidy["step"].notna()]

    # Problems ------------------------------------------------------------------------------------
    def problems(self) -> list[Problem]:
        out = list(super().problems())
        marks = self.marks()
        if marks.error and not any(p.path == self.path and p.what == marks.error for p in out):
            out.append(Problem(self.path, marks.error))
        exp_dirs = self.exp_dirs()
        with self._lock:
            out += self._link_problems
        if not exp_dirs:
            out.append(Problem(self.path, "no harbor trial dirs found (named in the log, or next to logs/ in "
                                          "harbor_trials/<project>/<exp>): no samples"))
        have = set()
        for f in (f for g in self._groups() for f in g[6]):
            have.add(f.exp_dir)
            out += [Problem(os.path.join(f.path, name), f"not a trial dir: {why}") if name
                    else Problem(f.path, f"step folder {why}") for name, why in f.odd]
            if not f.trials and not f.odd:
                out.append(Problem(f.path, "step folder holds no trial dirs"))
                continue
            counts = Counter(row[-2] for row in harbor.exp_dir_trials(f.exp_dir).rows(f) if row[-2] is not None)
            out += [Problem(f.path, f"trial dirs: {what}", n) for what, n in counts.items()]
        out += [Problem(d, "exp dir holds no step_* folders yet") for d in exp_dirs if d not in have]
        out += [Problem(os.path.join(d, n), "not a step_<number> folder (at most 18 digits): left out")
                for d in exp_dirs for n in harbor.odd_step_names(d)]
        from rundash_core.io.unreadable import unreadable_problems
        return out + unreadable_problems(exp_dirs, out)
