"""Relax rollout results (`docs/formats/relax.md`): one JSONL file of samples per step.

A run is `<save>/rollout_result/{train,eval}/{rollout_id}.jsonl`; open `<save>` or its
`rollout_result/` (or a custom `--rollout-result-dir` holding `train/` or `eval/` step files). The
run is named after `<save>`. Relax writes no metrics and no config there, so `config()` is `{}` and
the metrics are derived from the samples, one set per file (step = the file name's rollout_id;
time = the file's mtime: each file is written once, at the end of its step):

    producer "rollout" (train/N.jsonl), names `rollout/...`; producer "eval" (eval/N.jsonl), `eval/...`
    <p>/samples                        rows in the file
    <p>/reward/{mean,std,min,max}      over rows with a numeric reward (std: population, ddof=0)
    <p>/reward/count                   rows with a numeric reward
    <p>/response_length/{mean,max}     over every row with the field (pending rows have 0)
    <p>/total_length/{mean,max}
    <p>/status/<s>                     share of rows per status: completed, truncated, aborted,
                                       failed, pending, unknown (any other value, or none)
    rollout/groups/zero_variance       share of prompt groups (group_index, >=2 scored samples)
                                       whose rewards are all equal: no GRPO signal
    eval/<dataset>/{samples, reward/mean, reward/std, reward/count, response_length/mean}

Rewards: a number counts; an object reward counts as its `score` (gpqa_diamond writes
{score, acc, pred}; the run's `--reward-key` is not recorded anywhere, so `score` it is); null (not
scored: pending or aborted rows) and anything else are left out of the reward stats, counted in
`problems()`, and still counted in the status shares.

Each file is parsed once per version (cache key: realpath + FileId), keeping only per-sample
scalars; the run keeps the per-step metrics, so a refresh parses new or changed files only.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass

import numpy as np
import orjson
import pandas as pd

from rundash_core import cache, episode_ids, frames
from rundash_core.io.files import FileId, describe_unreadable, file_id, read_range, shown_path
from rundash_core.io.jsonl import LineProblems, parse_jsonl_bytes
from rundash_core.metrics.block import TidyLog
from rundash_core.overview import Overview, utc
from rundash_core.run import Problem, Run
from rundash_core.sources.relax.rollout_file import (
    INT64_MAX,
    PRODUCERS,
    UNREADABLE,
    StepFile,
    parse_step_file,
    step_metrics,  # noqa: F401 (API)
)

SAMPLE_COLUMNS = tuple(frames.SAMPLES)

SPLITS = ("train", "eval")
RESULT_DIR = "rollout_result"
STEP_FILE = re.compile(r"^(\d+)\.jsonl$")


# Finding runs --------------------------------------------------------------------------------------
def _has_step_files(folder: str) -> bool:
    try:
        return any(STEP_FILE.match(n) for n in os.listdir(folder))
    except OSError:
        return False


def result_dir_of(path: str) -> str | None:
    """The rollout_result folder of `path` (`<save>`, `rollout_result/` or a custom result dir).
    A folder named `rollout_result` is one even while empty (a run before its first step, or a
    copy without its files): it shows with a problem rather than not at all."""
    if os.path.basename(path.rstrip(os.sep)).startswith(".") or not os.path.isdir(path):
        return None
    named = os.path.join(path, RESULT_DIR)
    for folder, strict in ((named, False), (path, os.path.basename(path.rstrip(os.sep)) != RESULT_DIR)):
        splits = [os.path.join(folder, s) for s in SPLITS if os.path.isdir(os.path.join(folder, s))]
        if splits and (not strict or any(_has_step_files(s) for s in splits)):
            return folder  # a custom-named folder needs a step file: `train/` alone is too common
        if not strict and os.path.isdir(folder):  # named `rollout_result`, no split folder yet
            return folder
    return None


def is_run_dir(path: str) -> bool:
    return result_dir_of(path) is not None


# Reading one step file -----------------------------------------------------------------------------
def read_step_file(path: str, fid: FileId, split: str, step: int) -> StepFile:
    """The parsed file from the shared cache; a file that could not be opened is not kept."""
    key = ("relax", os.path.realpath(path), fid, split, step)
    parsed = cache.shared.get_or_create(key, lambda: parse_step_file(path, fid.size, split, step))
    if any(what.startswith(UNREADABLE) for what, _n, _line in parsed.problems):
        cache.shared.discard(key)
    return parsed


# The run -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Kept:
    """What the run keeps of one file: its identity and per-step metrics, not its samples."""

    path: str
    fid: FileId
    split: str
    step: int
    metrics: dict[str, float]
    problems: list[tuple[str, int, int]]
    failed: bool  # could not be read: try again next time


class RelaxRun(Run):
    kind = "relax"
    kind_capabilities = frozenset({"metrics", "samples", "episodes", "validation"})

    def __init__(self, path: str | os.PathLike, run_id: str | None = None):
        super().__init__(path, run_id)
        self.result_dir = result_dir_of(self.path) or os.path.join(self.path, RESULT_DIR)
        if os.path.basename(self.path) == RESULT_DIR:  # opened at rollout_result/: name it after <save>
            self.name = shown_path(os.path.basename(os.path.dirname(self.path)))
            if run_id in (None, RESULT_DIR):
                self.run_id = self.name
        self._lock = threading.Lock()
        self._kept: dict[str, _Kept] = {}
        self._listing_problems: list[Problem] = []
        self._log: TidyLog | None = None

    # Files ---------------------------------------------------------------------------------------
    def step_files(self) -> tuple[list[tuple[str, int, str]], list[Problem]]:
        """(split, step, path) of every rollout file, steps in numeric order, and the duplicates: a
        step named twice (`7.jsonl` and `07.jsonl`) keeps Relax's own, unpadded name."""
        out, dupes = [], []
        for split in SPLITS:
            folder = os.path.join(self.result_dir, split)
            try:
                names = sorted(os.listdir(folder), key=lambda n: (len(n), n))  # unpadded first
            except OSError:
                continue
            seen: dict[int, str] = {}
            for name in names:
                if (m := STEP_FILE.match(name)) is None:
                    continue
                step, path = int(m.group(1)), os.path.join(folder, name)
                if step > INT64_MAX:  # not a rollout_id Relax wrote; steps are int64 in every frame
                    dupes.append(Problem(path, "step number too large (ignored)"))
                    continue
                if step in seen:
                    dupes.append(Problem(path, f"same step as {os.path.basename(seen[step])} (ignored)"))
                    continue
                seen[step] = path
                out.append((split, step, path))
        return sorted(out, key=lambda t: (SPLITS.index(t[0]), t[1])), dupes

    def _refresh(self) -> list[_Kept]:
        """Re-stat every file; parse only new or changed ones; update the tidy log in place when
        files were only added, rebuild it (from kept per-step metrics, no parsing) otherwise."""
        with self._lock:
            (listing, skipped), kept = self.step_files(), {}
            for split, step, path in listing:
                fid = file_id(path)
                if fid is None:
                    skipped.append(Problem(path, describe_unreadable(path)))
                    continue
                old = self._kept.get(path)
                if old is not None and old.fid == fid and (old.split, old.step) == (split, step) and not old.failed:
                    kept[path] = old
                    continue
                if old is not None:
                    cache.shared.discard(("relax", os.path.realpath(path), old.fid, old.split, old.step))
                f = read_step_file(path, fid, split, step)
                failed = any(what.startswith(UNREADABLE) for what, _n, _line in f.problems)
                kept[path] = _Kept(path, fid, split, step, f.metrics, f.problems, failed)
            self._listing_problems = skipped
            added = [k for p, k in kept.items() if p not in self._kept]
            if self._log is None or len(kept) - len(added) != len(self._kept) or any(
                    self._kept.get(p) is not k for p, k in kept.items() if p in self._kept):
                self._log, added = TidyLog(), list(kept.values())
            for k in added:
                self._append(k)
            self._kept = kept
            return list(kept.values())

    def _append(self, k: _Kept) -> None:
        log, names = self._log, list(k.metrics)
        if names:
            log.append_matrix(np.array([list(k.metrics.values())]), log.codes(names),
                              np.array([k.fid.mtime_ns / 1e9]), np.array([k.step]), PRODUCERS[k.split])

    # Frames --------------------------------------------------------------------------------------
    def metrics(self) -> pd.DataFrame:
        """Tidy per-step metrics derived from the samples (names in the module docstring)."""
        self._refresh()
        with self._lock:
            return self._log.frame()

    def metrics_version(self) -> tuple:
        """The files the metrics were derived from, as they were read."""
        return tuple((k.path, k.fid) for k in self._refresh())

    def validation(self) -> pd.DataFrame:
        """Eval rows by dataset per step (`eval/N.jsonl`): mean score and share solved."""
        from rundash_core.views.validation import samples_validation

        return samples_validation(self.samples(split="eval"))

    def samples(self, split: str | None = None, step: int | None = None) -> pd.DataFrame:
        """One row per sample (`frames.SAMPLES`; `locator` = 'file:offset:length' of its line)."""
        if split is not None and split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS} or None, not {split!r}")
        parts = [(k.path, read_step_file(k.path, k.fid, k.split, k.step).samples) for k in self._refresh()
                 if split in (None, k.split) and step in (None, k.step)]
        parts = [(p, f) for p, f in parts if len(f)]
        if not parts:
            return frames.empty(frames.SAMPLES)
        rows = pd.concat([f.assign(locator=[frames.line_locator(p, o, n) for o, n in zip(f["offset"], f["length"])])
                          for p, f in parts], ignore_index=True)
        known = rows["status"] != "unknown"
        return frames.typed({
            "sample_id": rows["sample_id"], "episode_id": rows["sample_index"], "split": rows["split"], "step": rows["step"],
            "trainer_step": rows["step"].where(rows["split"] == "train"),
            "group_id": rows["group_index"].astype("string"), "env": rows["dataset"], "reward": rows["reward"],
            "status": rows["status"], "truncated": (rows["status"] == "truncated").where(known),
            "ok": (rows["status"] != "failed").where(known),
            "input_tokens": rows["prompt_length"], "output_tokens": rows["response_length"],
            "turns": rows["agent_turns"], "locator": rows["locator"],
        }, frames.SAMPLES)

    def episode(self, sample_id: str) -> frames.Episode:
        """The sample's row (by its sample id, or by its sample index when that names one sample),
        read at its locator (one line, no rescan): prompt as the user message, response as the
        assistant's, the other fields in `raw`."""
        split, step, _index = (sample_id.split("-", 2) + ["", ""])[:3]
        samples = self.samples(split, int(step)) if split in SPLITS and step.isascii() and step.isdigit() else None
        if samples is None or not (samples["sample_id"] == sample_id).any():
            samples = self.samples()  # (a sample index: any step)
        row = samples.iloc[episode_ids.find(samples, sample_id, self.run_id)]
        sample_id = row["sample_id"]
        path, offset, length = frames.parse_line_locator(row["locator"])
        record = _read_row(path, offset, length)
        if record is None:
            raise KeyError(f"{self.run_id}: sample {sample_id!r} cannot be read again (its file changed or went away)")
        reward = row["reward"]
        return frames.Episode(
            sample_id=sample_id, run_id=self.run_id, split=row["split"], step=int(row["step"]),
            env=None if pd.isna(row["env"]) else row["env"], reward=None if pd.isna(reward) else float(reward),
            messages=[frames.Message("user", _text(record.get("prompt"))),
                      frames.Message("assistant", _text(record.get("response")))],
            ids={k: str(record[k]) for k in ("rollout_id", "sample_index", "group_index") if record.get(k) is not None},
            raw={k: v for k, v in record.items() if k not in ("prompt", "response")})

    def read_config(self) -> dict:
        """Relax writes no config next to its rollout results."""
        return {}

    def read_configs(self, attempt: int | None = None) -> dict[str, object]:
        return {}

    # Overview ------------------------------------------------------------------------------------
    def overview(self, now: float | None = None) -> Overview:
        """The run card from file names: step = the highest train rollout_id; eval datasets from
        the latest eval file (when small); the model a row names, from the first train file's
        first line. Relax rows carry no times, so created, updated and the duration are unknown
        (a file time is no data: a copy reads differently from the original); the newest file
        time (`touched`) says whether it is still being written. Those are the regular files': a
        folder named `7.jsonl` (or a broken symlink's target) was not written by the run, its
        fresh time would make a stopped run "running"."""
        listing, _dupes = self.step_files()
        times = [fid.mtime for _s, _n, p in listing if (fid := file_id(p)) is not None]
        step = max((n for s, n, _path in listing if s == "train"), default=None)
        evals = [(n, p) for s, n, p in listing if s == "eval"]
        trains = [p for s, _n, p in listing if s == "train"]
        return Overview(
            run_id=self.run_id, name=self.name, kind=self.kind, path=self.path, step=step,
            touched=utc(max(times) if times else None), last_step=step,
            model=_first_row_model(trains[0]) if trains else None,
            eval_envs=_datasets(*evals[-1]) if evals else [], flavor="rl").at(now)

    def problems(self) -> list[Problem]:
        kept = self._refresh()
        with self._lock:
            out = list(self._listing_problems)
        if not kept and not out:
            out.append(Problem(self.result_dir, "no rollout files yet (train/ and eval/ hold no {rollout_id}.jsonl)"))
        for k in kept:
            out += [Problem(k.path, what, n, line or None) for what, n, line in k.problems]
        from rundash_core.io.unreadable import unreadable_problems
        return out + unreadable_problems([self.result_dir], out)


SUMMARY_READ_BYTES = 16 << 20  # the card reads an eval file's datasets only up to this size


def _datasets(step: int, path: str) -> list[str]:
    fid = file_id(path)
    if fid is None or fid.size > SUMMARY_READ_BYTES:
        return []
    return read_step_file(path, fid, "eval", step).datasets


def _first_row_model(path: str) -> str | None:
    """The `model` field of a file's first row (one bounded read, cached by the file's identity)."""
    fid = file_id(path)
    if fid is None:
        return None

    def read() -> str:  # "" when there is none: that is kept too
        try:
            first = read_range(path, 0, 1 << 20).split(b"\n", 1)[0]
        except OSError:
            return ""
        model = (_read_row(path, 0, len(first)) or {}).get("model") if first.strip() else None
        return model if isinstance(model, str) else ""
    return cache.shared.current(("relax-model", os.path.realpath(path)), fid, read, size=lambda _v: 512) or None


def _read_row(path: str, offset: int, length: int) -> dict | None:
    """One row read again at its place, as leniently as the file was parsed (Python's json writes
    `NaN`/`Infinity`; bad UTF-8 and NUL bytes are cleaned): None when it is no longer a row there."""
    try:
        parsed = parse_jsonl_bytes(read_range(path, offset, offset + length) + b"\n", LineProblems())
    except OSError:
        return None
    return parsed.rows[0] if parsed.rows and isinstance(parsed.rows[0], dict) else None


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()
