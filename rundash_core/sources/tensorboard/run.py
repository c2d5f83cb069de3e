"""TensorBoard runs (`docs/formats/tensorboard.md`): a folder holding `events.out.tfevents.*` files.

verl's `tensorboard` logger writes `tensorboard_log/<project>/<experiment>/`, HF Trainer
`<output_dir>/runs/<date>_<host>/`, any `SummaryWriter` its `log_dir` (tensorboard spec 1). Each
event file in the folder is an attempt (one per writer launch), in time order; event files in its
sub-folders are its sub-writers' (`add_scalars`, `add_hparams`) and merge into it (tensorboard
spec 4.3). A folder holding only sub-folders with event files is not a run: each sub-folder is
one (HF's `runs/` of several launches).

What is read (tensorboard spec 4): scalars as the tidy metrics (step, wall time, tag, value;
`simple_value` and scalars-plugin tensors; NaN and inf as logged), the newest attempt winning on
repeated steps; text summaries as config text (`configs()`); hparams as the config dict.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd

from rundash_core import cache
from rundash_core.io.files import walk_files
from rundash_core.io.unreadable import unreadable_problems
from rundash_core.metrics.steps_done import steps_done
from rundash_core.run import Overview, Problem, Run, utc
from rundash_core.sources.tensorboard.event_file import EventFile
from rundash_core.sources.tensorboard.events import INSTALL_HINT, is_event_file_name
from rundash_core.sources.tensorboard.merge import EventSource, RunState
from rundash_core.sources.tracker_keys import config_model

SUB_DEPTH = 3  # sub-writer folders looked into below the run folder (`add_scalars("a/b", ...)` nests)
MAX_STEPS_KEYS = ("trainer.total_training_steps", "total_training_steps", "max_steps")
# verl's validation keys (`val-core/<source>/<var>/mean@N`); tensorboardX and PyTorch write `@` as `_`
VAL_SOURCE = re.compile(r"^val-(?:core|aux)/(.+)/[^/]+/(?:mean|std|best|worst|maj)[@_]\d+(?:/mean|/std)?$|^val/test_score/(.+)$")
EVAL_PREFIXES = ("val-", "val/", "val_", "eval/", "eval-", "test/")  # validation keys: verl logs them at step 0 too


# Finding runs --------------------------------------------------------------------------------------
def is_run_dir(path: str) -> bool:
    """A folder holding an event file itself (tensorboard spec 1)."""
    if os.path.basename(path.rstrip(os.sep)).startswith(".") or not os.path.isdir(path):
        return False
    try:
        names = os.listdir(path)  # (names only: a stat for a tfevents name alone)
    except OSError:
        return False
    return any(is_event_file_name(n) and os.path.isfile(os.path.join(path, n)) for n in names)


def event_sources(run_dir: str) -> list[EventSource]:
    """The run's event files: its own (attempts) and its sub-folders' (sub-writers), by name."""
    out = []
    for path in walk_files(run_dir, skip=lambda name: name.startswith("."), max_depth=SUB_DEPTH):
        if is_event_file_name(os.path.basename(path)):
            rel = os.path.relpath(path, run_dir)
            out.append(EventSource(rel, path, os.path.dirname(rel) == ""))
    return out


def trainer_names(path: str) -> tuple[str | None, str | None]:
    """(project, experiment) the layout says (tensorboard spec 1): verl's
    `tensorboard_log/<project>/<experiment>`; HF's `<output_dir>/runs/<date>_<host>` (the output
    dir as project); else none."""
    parent = os.path.dirname(os.path.abspath(path).rstrip(os.sep))
    grand = os.path.dirname(parent)
    if os.path.basename(grand) == "tensorboard_log":
        return os.path.basename(parent), os.path.basename(path.rstrip(os.sep))
    if os.path.basename(parent) == "runs" and os.path.basename(grand):
        return os.path.basename(grand), None
    return None, None


# The run -------------------------------------------------------------------------------------------
class TensorBoardRun(Run):
    kind = "tensorboard"
    kind_capabilities = frozenset({"metrics", "config", "attempts"})

    def _state(self) -> RunState:
        """Read on (appended bytes only) and merged: the state every Run of this folder shares."""
        state = cache.shared.get_or_create(("tensorboard", self.real_path), RunState)
        with state.lock:
            state.refresh(event_sources(self.path))
        cache.shared.evict()  # (it may have grown)
        return state

    # Metrics -------------------------------------------------------------------------------------
    def metrics(self) -> pd.DataFrame:
        """Tidy scalars: step, wall time, tag, value (float64, NaN and inf as logged), producer."""
        state = self._state()
        with state.lock:
            return state.frame()

    def metrics_version(self) -> tuple:
        state = self._state()
        with state.lock:
            return tuple((rel, state.files[rel].fid) for rel in state.order)

    # Attempts ------------------------------------------------------------------------------------
    def _attempt_files(self, state: RunState) -> list[str]:
        return [rel for rel in state.order if state.sources[rel].attempt]

    def attempts(self) -> list[int]:
        state = self._state()
        with state.lock:
            return list(range(1, len(self._attempt_files(state)) + 1)) or [1]

    def resume_steps(self) -> list[int]:
        """The first step of each later attempt."""
        state = self._state()
        with state.lock:
            firsts = [_first_step(state.files[rel]) for rel in self._attempt_files(state)[1:]]
        return [s for s in firsts if s is not None]

    def _files_of(self, state: RunState, attempt: int | None) -> list[EventFile]:
        """The files of an attempt (its own, and the sub-writers' that began after it began and
        before the next one did), in merge order; all of them for `None`."""
        if attempt is None:
            return [state.files[rel] for rel in state.order]
        tops = self._attempt_files(state)
        if not 1 <= attempt <= len(tops):
            return []
        begin = state.files[tops[attempt - 1]].first_time
        end = state.files[tops[attempt]].first_time if attempt < len(tops) else None
        out = []
        for rel in state.order:
            f, t = state.files[rel], state.files[rel].first_time
            if rel == tops[attempt - 1] or (not state.sources[rel].attempt and t is not None and begin is not None
                                            and t >= begin and (end is None or t < end)):
                out.append(f)
        return out

    # Config --------------------------------------------------------------------------------------
    def read_config(self) -> dict:
        """The hparams (`add_hparams`, HF Trainer's TrainingArguments) of the latest attempt, else
        of every file (later ones winning); {} when none were logged."""
        state = self._state()
        with state.lock:
            return self._config(state)

    def _config(self, state: RunState) -> dict:
        return _hparams(self._files_of(state, len(self._attempt_files(state)) or None)) or _hparams(
            self._files_of(state, None))

    def read_configs(self, attempt: int | None = None) -> dict[str, object]:
        """The text summaries (`add_text`) of an attempt (default: the latest) by tag (a tag logged
        at several steps: one entry per step), and its hparams as `hparams` when logged."""
        state = self._state()
        with state.lock:
            files = self._files_of(state, attempt if attempt is not None else len(self._attempt_files(state)) or None)
            texts = [t for f in files for t in f.texts]
            hparams = _hparams(files)
        counts = pd.Series([tag for tag, _s, _t in texts], dtype=object).value_counts().to_dict() if texts else {}
        out: dict[str, object] = {}
        for tag, step, text in texts:
            out[tag if counts[tag] == 1 else f"{tag} (step {step})"] = text
        if hparams:
            out["hparams"] = hparams
        return out

    # Overview ------------------------------------------------------------------------------------
    def overview(self, now: float | None = None) -> Overview:
        """The card from the data: times from the records' wall times (a fresh copy of an old run
        reads as old, so it is not running), step = steps done (the last step logging a finite
        value, one more when training steps count from 0: verl's step-0 validation does not count), the model and step limit from the hparams; only
        `touched` (the newest file time) is a file time."""
        state = self._state()
        with state.lock:
            n = state.cols.n
            steps, values, codes = state.cols.step[:n], state.cols.value[:n], state.cols.code[:n]
            finite = steps[np.isfinite(values)]
            evals = [c for name, c in state.names.items() if name.startswith(EVAL_PREFIXES)]
            train = steps[~np.isin(codes, evals)] if evals else steps
            files = [state.files[rel] for rel in state.order]
            tops = self._attempt_files(state)
            config = self._config(state)
            firsts = [f.first_time for f in files if f.first_time is not None]
            lasts = [f.last_time for f in files if f.last_time is not None]
            mtimes = [f.fid.mtime for f in state.files.values() if f.fid is not None]
            eval_envs = list(dict.fromkeys(next(g for g in m.groups() if g) for k in state.names
                                           if (m := VAL_SOURCE.match(k))))
        last = int(finite.max()) if len(finite) else None
        done = steps_done(last, int(train.min()) if len(train) else None)
        project, experiment = trainer_names(self.path)
        first = utc(min(firsts)) if firsts else None
        return Overview(
            run_id=self.run_id, name=self.name, kind=self.kind, path=self.path, project=project, experiment=experiment,
            step=done, max_steps=_max_steps(config), created=first, started=first,
            updated=utc(max(lasts)) if lasts else None, model=config_model(config) if config else None,
            attempts=max(len(tops), 1), eval_envs=eval_envs, last_step=int(steps.max()) if n else None,
            touched=utc(max(mtimes)) if mtimes else None).at(now)

    def problems(self) -> list[Problem]:
        """Files that cannot be read or are damaged; a last record cut off, once the run is not
        live (while it is, the writer's next flush completes it: tensorboard spec 2.3)."""
        state = self._state()
        live = self.overview().status == "running"
        out: list[Problem] = []
        with state.lock:
            files = [state.files[rel] for rel in sorted(state.files)]
        if not files:
            out.append(Problem(self.path, "no events.out.tfevents.* file can be read here"))
        for f in files:
            for what, count in f.problems(live=live):
                if what == INSTALL_HINT:
                    if not any(p.what == INSTALL_HINT for p in out):
                        out.append(Problem(self.path, INSTALL_HINT))
                    continue
                out.append(Problem(f.path, what, count))
        return out + unreadable_problems([self.path], out)


def _first_step(f: EventFile) -> int | None:
    return int(f.chunks[0].steps.min()) if f.chunks else None


def _hparams(files: list[EventFile]) -> dict:
    out: dict = {}
    for f in files:
        out.update(f.hparams)
    return out


def _max_steps(config: dict) -> int | None:
    for key in MAX_STEPS_KEYS:
        v = config.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and 0 < v < 2**63:
            return int(v)
    return None
