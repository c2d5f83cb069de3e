"""Shared test code; no test file imports another. Here: the paths of the test data, run builders
and file writers, page openers, and an independent, pure-python reading of prime-rl metrics files.
Beside it, by topic: `serving` (free port, launcher, process groups, a child as another uid),
`browser`, `pages` (what an AppTest page showed), `hostile` inputs, the `verl` and `lego_validation`
references, `shapes` (growing files), `health`, `tokens`, `tui`, and `secret_corpus` with
`planted_runs` and `planted_finder`, `ai_server` (a local chat API). Fixtures: the conftest.py files.

The reference reader below is written from the format notes (prime-rl spec sections 4.2-4.6),
not from rundash's code: json.loads per line, step-keyed rows merged per (producer, step) with the
last value in file order winning per key (time = max time of the merged rows), time-keyed rows
(`step: null`) kept one per row, legacy rows without `producer` attributed by the 4.6 rules.
Every metrics test compares rundash against it.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rundash_core import cache

TESTS = Path(__file__).resolve().parents[1]  # (this file is tests/helpers/__init__.py)
REPO = TESTS.parent
DATA = TESTS / "data"
NEW_NAME = "math-python+wiki-search--qwen3-4b--0b45f1ec"
OLD_NAME = "reverse-text--qwen3-0.6b--a7be3ee1"
NEW_RUN = DATA / "prime-rl" / NEW_NAME
OLD_RUN = DATA / "prime-rl-old" / OLD_NAME
NEW_METRICS = "monitors/file/metrics.jsonl"
OLD_METRICS = "metrics.jsonl"

RESERVED = {"step", "time", "_timestamp", "producer"}


def nav_pages() -> list[tuple[str, str, bool]]:
    """(url path, title, default) of every page in the app's navigation (`pages/_ui.py`'s
    `st.Page("pages/….py", title=…)` lines), in order: what "every page" tests walk, so a new page
    is covered the day it is added."""
    text = (REPO / "pages" / "_ui.py").read_text()
    pages = re.findall(r'st\.Page\("pages/(\w+)\.py",\s*title="([^"]+)"([^)]*)\)', text)
    assert pages, "no st.Page in pages/_ui.py"
    return [(stem, title, "default=True" in rest) for stem, title, rest in pages]


def app_pages() -> list[str]:
    """Every page of the navigation as AppTest switches to it (`pages/….py`), in order."""
    return [f"pages/{stem}.py" for stem, _title, _default in nav_pages()]


# Spec 4.6, rule 2 and rules 3-4, transcribed from the format notes.
LEGACY_TRAINER = re.compile(
    r"^(perf|optim|loss|entropy|system|mismatch_kl|kl_ent_ratio|is_masked|masked_|unmasked_|max_vio|routing_"
    r"|ref_kl|val)[/_]?")
LEGACY_ORCH = re.compile(r"^(train|batch|off_policy|curriculum|eval)/")


# Reference reader ---------------------------------------------------------------------------------
def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def legacy_producer(row: dict, *, sft: bool = False) -> str:
    if row.get("step") is None:
        return "orch"  # time-keyed rows come from the orchestrator (spec 4.4)
    if sft:
        return "trainer"
    keys = [k for k in row if k not in RESERVED]
    if any(LEGACY_TRAINER.match(k) for k in keys):
        return "trainer"
    if any(LEGACY_ORCH.match(k) for k in keys):
        return "orch"
    if any(k.startswith("progress/") for k in keys):
        return "orch"
    return "trainer"


@dataclass
class Reference:
    stepped: dict = field(default_factory=dict)  # (producer, step) -> {metric: value}
    step_time: dict = field(default_factory=dict)  # (producer, step) -> max time
    cell_time: dict = field(default_factory=dict)  # (producer, step, metric) -> time of the row that set it
    first_time: dict = field(default_factory=dict)  # (producer, step) -> min time
    timed: list = field(default_factory=list)  # (producer, time, {metric: value}) per row
    rows: list = field(default_factory=list)  # every parsed row (dict) in file order
    first_row_time: float | None = None

    def tidy_counter(self) -> Counter:
        """Multiset of (producer, step or None, metric, value, time) as the tidy frame holds them;
        a step-keyed value's time is the time of the line that wrote it (last one wins)."""
        c = Counter()
        for (p, s), vals in self.stepped.items():
            for m, v in vals.items():
                c[(p, s, m, v, _t(self.cell_time[(p, s, m)]))] += 1
        for p, t, vals in self.timed:
            for m, v in vals.items():
                c[(p, None, m, v, _t(t))] += 1
        return c

    def max_step(self):
        return max((s for _p, s in self.stepped), default=None)

    def producer_keys(self) -> dict[str, set]:
        out: dict[str, set] = {}
        for (p, _s), vals in self.stepped.items():
            out.setdefault(p, set()).update(vals)
        return out


def parse_row_bytes(raw: bytes):
    """One line as the reference reads it: NUL bytes dropped, bad UTF-8 replaced, must be an object."""
    raw = raw.replace(b"\x00", b"")
    if not raw.strip():
        return None
    try:
        row = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def _nanmax(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


def _t(t: float):
    return None if math.isnan(t) else t


def reference_metrics(data: bytes, *, sft: bool = False) -> Reference:
    ref = Reference()
    complete = data[: data.rfind(b"\n") + 1]  # a trailing partial line is not read yet
    for raw in complete.split(b"\n"):
        row = parse_row_bytes(raw)
        if row is None:
            continue
        ref.rows.append(row)
        t = row.get("time") if _is_number(row.get("time")) else row.get("_timestamp")
        t = float(t) if _is_number(t) else math.nan
        if ref.first_row_time is None and not math.isnan(t):
            ref.first_row_time = t
        producer = row.get("producer") if isinstance(row.get("producer"), str) else legacy_producer(row, sft=sft)
        values = {k: float(v) for k, v in row.items()
                  if k not in RESERVED and _is_number(v) and not (isinstance(v, float) and math.isnan(v))}
        step = row.get("step")
        if _is_number(step) and step >= 0:
            key = (producer, int(step))
            ref.stepped.setdefault(key, {}).update(values)
            ref.cell_time.update({(producer, int(step), m): t for m in values})
            ref.step_time[key] = _nanmax(ref.step_time.get(key, math.nan), t)
            ref.first_time[key] = -_nanmax(-ref.first_time.get(key, math.nan), -t)
        else:
            ref.timed.append((producer, t, values))
    return ref


def reference_file(path: str | os.PathLike, **kw) -> Reference:
    return reference_metrics(Path(path).read_bytes(), **kw)


def tidy_counter(frame: pd.DataFrame) -> Counter:
    c = Counter()
    for step, t, metric, value, producer in zip(frame["step"], frame["time"], frame["metric"], frame["value"],
                                                frame["producer"]):
        c[(str(producer), None if pd.isna(step) else int(step), str(metric), float(value), _t(float(t)))] += 1
    return c


def assert_tidy_matches(frame: pd.DataFrame, ref: Reference) -> None:
    """The tidy frame holds exactly the reference's values: same count, same (producer, step,
    metric) cells, same values and times."""
    got, want = tidy_counter(frame), ref.tidy_counter()
    assert sum(got.values()) == sum(want.values()) == len(frame)
    missing = want - got
    extra = got - want
    assert not missing and not extra, f"missing {list(missing)[:5]} extra {list(extra)[:5]}"


def copy_run(src: Path, dest_parent: Path, name: str | None = None) -> Path:
    dest = dest_parent / (name or src.name)
    dest_parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(dest):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return dest


def set_all_mtimes(root: Path, t: float) -> None:
    """Give every file and directory under root (and root) the same mtime."""
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            os.utime(os.path.join(dirpath, n), (t, t), follow_symlinks=False)
    os.utime(root, (t, t))


MONTH_AGO = time.time() - 30 * 86400  # an mtime no reader takes for a file still being written


def write_file(path: Path, data: str | bytes, *, mtime: float | None = MONTH_AGO) -> Path:
    """Write text or bytes to `path` (parents made), last modified at `mtime` (None: now)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def write_lines(path: Path, rows: list, mode: str = "w") -> bytes:
    """Write rows (dicts become compact JSON, bytes/str are written as is) one per line."""
    parts = []
    for r in rows:
        if isinstance(r, bytes):
            parts.append(r if r.endswith(b"\n") else r + b"\n")
        elif isinstance(r, str):
            parts.append((r if r.endswith("\n") else r + "\n").encode())
        else:
            parts.append((json.dumps(r) + "\n").encode())
    data = b"".join(parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode + "b") as fh:
        fh.write(data)
    return data


def json_lines(path: Path) -> list:
    """Every line of `path` that parses as JSON, in file order (the others skipped): a plain reading
    to hold a reader against."""
    out = []
    for raw in Path(path).read_bytes().split(b"\n"):
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


def snapshot(root: Path) -> dict:
    """Every path under root with its type, size and mtime (to prove nothing was written)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def make_rl_run(parent: Path, name: str, *, rows: list | None = None, max_steps: int | None = 10,
                model: str = "Qwen/Qwen3-0.6B", train=("reverse-text",), evals=()) -> Path:
    """A minimal current-layout RL run: configs/attempt_1/resolved + latest link + metrics."""
    run = parent / name
    resolved = run / "configs" / "attempt_1" / "resolved"
    resolved.mkdir(parents=True)
    orch = {"model": {"name": model}, "max_steps": max_steps,
            "train": {"source": [{"name": e, "env": {"id": e}} for e in train]},
            "eval": {"source": [{"name": e, "env": {"id": e}} for e in evals]}}
    (resolved / "orchestrator.json").write_text(json.dumps(orch, indent=2))
    (resolved / "trainer.json").write_text(json.dumps({"model": {"name": model}, "max_steps": max_steps}))
    os.symlink("attempt_1", run / "configs" / "latest")
    (run / "logs" / "attempt_1").mkdir(parents=True)
    os.symlink("attempt_1", run / "logs" / "latest")
    if rows is not None:
        write_lines(run / "monitors" / "file" / "metrics.jsonl", rows)
    return run


def listed_step(folder: Path, run_id: str):
    """The step the runs list (discovery) shows for one run; None when it shows none."""
    import rundash_core as rd

    step = rd.discover([folder]).set_index("run_id").loc[run_id, "step"]
    return None if pd.isna(step) else int(step)


# Pages -----------------------------------------------------------------------------------------
APP = REPO / "app.py"


def open_page(monkeypatch, folder, page: str, query: dict):
    """`page` of the real app over `folder` in a fresh AppTest session whose URL holds `query`
    (the way a shared link opens); asserts the page raised nothing."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RUNDASH_DIRS", str(folder))
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    cache.shared.clear()
    at = AppTest.from_file(str(APP), default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


