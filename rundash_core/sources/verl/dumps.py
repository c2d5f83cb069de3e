"""verl generation dumps (`docs/formats/verl.md` section 11): one row per dumped sample.

With `trainer.rollout_data_dir` / `trainer.validation_data_dir` set, verl writes
`<dir>/<step>.jsonl` per step (one `{input, output, gts, score, step, <extras>}` object per sample)
and prints `Dumped generations to <dir>/<step>.jsonl`. The dump folders are taken from both: the
config prints and launch overrides of the log (which say the split: rollout dumps are `train`,
validation dumps `val`), and the log's `Dumped generations to` lines (read incrementally). A
relative folder is looked for next to the log, then in the folder above (a `<workdir>/logs/<exp>.log`
run). A folder shared by both settings, or known only from the log, is split file by file: a
validation dump always adds `reward` to every row, a rollout dump does not (spec 11).

`sample_id` = `t<step>-<k>` / `v<step>-<k>` (the k-th line of the step's file); `group_id` = a hash
of `input` (the spec: group by input); `episode_id` = the line's `id`-like extra (`ID_KEYS`) when
the dump has one, else NA; `locator` = `<file>:<offset>:<length>` of its line.
A dump folder that is missing or outside the allowed roots is a `Problem`, not an error.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass

import orjson
import pandas as pd

from rundash_core import cache, episode_ids, frames
from rundash_core.io.bytetail import ByteTail
from rundash_core.io.configs import dig
from rundash_core.io.files import OUTSIDE_ROOTS, file_id, inside_roots, is_dir
from rundash_core.io.jsonl import LineProblems, read_located_object
from rundash_core.logs.line import ANSI_BYTES as _ANSI
from rundash_core.numbers import finite_float as _number
from rundash_core.run import Problem
from rundash_core.sources.relax.rollout_file import _rows as jsonl_rows

SPLITS = ("train", "val")
SETTINGS = {"train": "trainer.rollout_data_dir", "val": "trainer.validation_data_dir"}
DUMPED = re.compile(rb"Dumped generations to (.+?)[/\\](\d+)\.jsonl")
STEP_FILE = re.compile(r"^(\d+)\.jsonl$")
SAMPLE_ID = re.compile(r"^([tv])(\d+)-")
CHUNK_BYTES = 16 << 20
TEXT_KEYS = ("input", "output")
ID_KEYS = ("id", "sample_id", "episode_id", "index")  # an extra naming the sample itself (not `uid`: a prompt's)


@dataclass(frozen=True)
class DumpDir:
    """One dump folder: where it is, the split its setting says (None: shared, or known only from
    the log: decided per file), and how the log or config named it."""

    path: str
    split: str | None
    named: str


OFFERS = frozenset({"samples", "episodes"})  # what a run with a dump folder offers (`Run.capabilities`)


# Where the dumps are -----------------------------------------------------------------------------
class DumpLines(ByteTail):
    """The folders a log's `Dumped generations to <dir>/<step>.jsonl` lines name, in order of first
    appearance, read incrementally (a replaced log is read again)."""

    def __init__(self, path: str):
        super().__init__(path)
        self._lock = threading.Lock()
        self.dirs: dict[str, None] = {}

    @property
    def nbytes(self) -> int:
        return 200 + sum(100 + len(d) for d in self.dirs)

    def refresh(self) -> DumpLines:
        with self._lock:
            while (new := self.read_lines(CHUNK_BYTES)) is not None:
                if new.reset:
                    self.dirs = {}
                if not new.cut:
                    break
                data = new.complete  # a held last line is read once it is whole
                if b"Dumped generations to " in data:
                    for m in DUMPED.finditer(_ANSI.sub(b"", data)):
                        self.dirs.setdefault(m.group(1).decode("utf-8", "replace").strip(), None)
        return self


def logged_dirs(log: str) -> list[str]:
    lines = cache.shared.get_or_create(("verl-dump-lines", os.path.realpath(log)), lambda: DumpLines(log))
    return list(lines.refresh().dirs)


def dump_dirs(log: str | None, configs: list, *, bases: list[str]) -> tuple[list[DumpDir], list[Problem]]:
    """The run's dump folders that exist, and a problem per one named but missing or outside the
    allowed roots. `configs`: the log's parsed config prints and overrides (dicts); `bases`: where
    a relative folder is looked for, in order."""
    named: dict[str, set[str]] = {}
    for cfg in configs:
        for split, setting in SETTINGS.items():
            value = dig(cfg, *setting.split("."))
            if isinstance(value, str) and value.strip() and value.strip().lower() not in ("null", "none"):
                named.setdefault(value.strip(), set()).add(split)
    for raw in logged_dirs(log) if log else []:
        named.setdefault(raw, set())
    found: dict[str, tuple[set[str], str]] = {}
    problems = []
    for raw, splits in named.items():
        path, why = _resolve(raw, bases)
        if path is None:
            what = " / ".join(SETTINGS[s] for s in sorted(splits)) or "Dumped generations to"
            problems.append(Problem(why[0], f"generation dump folder ({what}: {raw}) {why[1]}: "
                                            "its samples are not shown"))
            continue
        have = found.setdefault(path, (set(), raw))
        have[0].update(splits)
    dirs = [DumpDir(p, next(iter(s)) if len(s) == 1 else None, raw) for p, (s, raw) in found.items()]
    return dirs, problems


def _resolve(raw: str, bases: list[str]) -> tuple[str | None, tuple[str, str]]:
    """The existing folder `raw` names (absolute, or relative to one of `bases`), or None and
    (the path tried, why it is not read)."""
    text = os.path.expanduser(raw)
    candidates = [text] if os.path.isabs(text) else [os.path.join(b, text) for b in bases]
    candidates = [os.path.normpath(c) for c in candidates]
    outside = None
    for c in candidates:
        if not inside_roots(c):
            outside = outside or c
        elif is_dir(c):
            return os.path.realpath(c), ("", "")
    if outside is not None and os.path.lexists(outside):
        return None, (outside, OUTSIDE_ROOTS)
    return None, (candidates[0], "missing")


# One dump file ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DumpFile:
    """The scalars of one `<step>.jsonl` (no text): per line (offset, length, score, group hash,
    has `reward`, its own id), and what could not be read."""

    rows: list[tuple[int, int, float | None, str | None, bool, str | None]]
    problems: list[tuple[str, int, int]]

    def split(self) -> str:
        """By the rows, for a shared folder: validation dumps always add `reward`."""
        return "val" if self.rows and all(r[4] for r in self.rows) else "train"


def read_dump(path: str) -> DumpFile | None:
    """The parsed file, cached until it changes (None: not a readable file)."""
    fid = file_id(path)
    if fid is None:
        return None
    return cache.shared.current(("verl-dump", os.path.realpath(path)), fid, lambda: _parse(path, fid.size))


def _parse(path: str, size: int) -> DumpFile:
    problems, rows = LineProblems(), []
    try:
        for line, offset, length, row in jsonl_rows(path, size, problems):
            text = row.get("input")
            group = hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:10] if isinstance(text, str) else None
            if not isinstance(row.get("output"), str):
                problems.add("row without an 'output' text", line)
            rows.append((offset, length, _number(row.get("score")), group, "reward" in row, _dump_id(row)))
    except OSError as e:
        problems.add(f"cannot be read ({e.strerror.lower() if e.strerror else e})", 0)
    if size == 0:
        problems.add("empty file: no samples", 0)
    return DumpFile(rows, list(problems.items()))


def _dump_id(row: dict) -> str | None:
    """The sample's own id when the dump carries one (an `id`-like extra), else None."""
    v = next((row[k] for k in ID_KEYS if k in row), None)
    return v if isinstance(v, str) and v else str(v) if isinstance(v, int) and not isinstance(v, bool) else None


def step_files(folder: str) -> list[tuple[int, str]]:
    """(step, path) of a dump folder's `<step>.jsonl` files, in step order."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted((int(m.group(1)), os.path.join(folder, n)) for n in names if (m := STEP_FILE.match(n)))


# The run's samples ------------------------------------------------------------------------------------
def list_samples(dirs: list[DumpDir], *, split: str | None = None, step: int | None = None) -> pd.DataFrame:
    """`frames.SAMPLES` rows of every dump file (of `step` / `split` only, when given)."""
    if split not in (None, *SPLITS):
        raise ValueError(f"split must be 'train', 'val' or None, not {split!r}")
    out, seen = [], set()
    for n, d in enumerate(dirs):
        if split is not None and d.split not in (None, split):
            continue
        for file_step, path in step_files(d.path):
            if step is not None and file_step != step:
                continue
            parsed = read_dump(path)
            if parsed is None:
                continue
            kind = d.split or parsed.split()
            if split is not None and kind != split:
                continue
            for k, (offset, length, score, group, _has_reward, own_id) in enumerate(parsed.rows):
                sid = f"{kind[0]}{file_step}-{k}"
                if sid in seen:
                    sid = f"{sid}-d{n}"
                seen.add(sid)
                out.append({"sample_id": sid, "episode_id": own_id, "split": kind, "step": file_step,
                            "trainer_step": file_step if kind == "train" else None, "group_id": group,
                            "reward": score, "locator": frames.line_locator(path, offset, length)})
    return frames.typed(out, frames.SAMPLES)


def read_episode(run_id: str, dirs: list[DumpDir], sample_id: str) -> frames.Episode:
    """The sample's line, read at its locator: `input` as the user message, `output` as the
    assistant's, `score` as the reward; numeric extras as metrics, `gts` and text extras as ids."""
    m = SAMPLE_ID.match(sample_id)
    samples = list_samples(dirs, step=int(m.group(2))) if m else None
    if samples is None or not (samples["sample_id"] == sample_id).any():
        samples = list_samples(dirs)  # (the dump's own id: any step)
    row = samples.iloc[episode_ids.find(samples, sample_id, run_id)]
    sample_id = row["sample_id"]
    path = frames.parse_line_locator(row["locator"])[0]
    record = read_located_object(row["locator"], sample=f"{run_id}: sample {sample_id!r}")
    extras = {k: v for k, v in record.items() if k not in (*TEXT_KEYS, "score", "step", "gts")}
    metrics = {k: float(v) for k, v in extras.items() if _number(v) is not None or isinstance(v, bool)}
    ids = {k: v for k, v in extras.items() if isinstance(v, str)}
    if record.get("gts") is not None:
        ids = {"gts": _text(record["gts"]), **ids}
    reward = row["reward"]
    return frames.Episode(
        sample_id=sample_id, run_id=run_id, split=row["split"], step=int(row["step"]),
        reward=None if pd.isna(reward) else float(reward), metrics=metrics,
        messages=[frames.Message("user", _text(record.get("input"))),
                  frames.Message("assistant", _text(record.get("output")))],
        ids={**ids, "file": os.path.basename(path), "line": str(int(row["sample_id"].split("-")[1]) + 1)},
        raw={k: v for k, v in extras.items() if k not in metrics and k not in ids})


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def dump_problems(dirs: list[DumpDir], missing: list[Problem]) -> list[Problem]:
    """The folders that could not be read, and the problems of the dump files read so far (a
    problems list does not parse every dump)."""
    out = list(missing)
    for d in dirs:
        for _step, path in step_files(d.path):
            fid = file_id(path)
            have = cache.shared.peek(("verl-dump", os.path.realpath(path))) if fid is not None else None
            if have is not None and have[0] == fid:
                out += [Problem(path, what, n, line or None) for what, n, line in have[1].problems]
    return out
