"""The log files of a prime-rl run (spec 3.1), one `frames.LOGS` row each.

`logs/attempt_N/` (or, before attempts, `logs/` itself): the top-level "master" logs, per-rank
torchrun logs, multi-node `trainer/` and `inference/` node logs, `envs/<split>/<env>.log`; plus the
SLURM `launcher/logs/job_*.log`. A file reached twice (`trainer.log` → `trainer/node_0.log`) is
listed once, under its master name. A single-node `inference.log` holds the router's lines too:
they are listed as a virtual "router" entry (`<inference.log>#router`) and hidden from the
inference entry.
"""
from __future__ import annotations

import os
import re

import pandas as pd

from rundash_core import frames
from rundash_core.io.files import walk_files
from rundash_core.logs.reading import ROUTER_SUFFIX, file_row
from rundash_core.sources.prime_rl.layout import ATTEMPT

_MASTERS = {"trainer.log": "trainer", "orchestrator.log": "orchestrator", "inference.log": "inference",
            "eval.log": "evals", "evals.log": "evals"}
_RANK = re.compile(r"(?:^|/)torchrun/.*?/(\d+)/(?:stdout|stderr)\.log$")
ORDER = ("trainer", "orchestrator", "inference", "router", "evals", "env:", "rank:")


def component_of(rel: str) -> str | None:
    """The component of a log at `rel` (relative to its attempt folder, `/`-separated)."""
    name = rel.rsplit("/", 1)[-1]
    if "/" not in rel:
        return _MASTERS.get(name, name[: -len(".log")])
    if m := _RANK.search(rel):
        return f"rank:{m.group(1)}"
    top = rel.split("/", 1)[0]
    if top == "envs":
        return "env:" + name[: -len(".log")]
    if top == "inference":
        return "router" if name == "router.log" else "inference"
    if top == "trainer":
        return "trainer"
    return top


def _order(component: str) -> int:
    return next((i for i, p in enumerate(ORDER) if component == p or p.endswith(":") and component.startswith(p)),
                len(ORDER))


def _folder_rows(folder: str, attempt: int | None, *, skip_attempts: bool) -> list[dict]:
    rows, seen = [], set()
    skip = (lambda n: bool(ATTEMPT.match(n)) or n == "latest") if skip_attempts else (lambda n: False)
    for path in walk_files(folder, skip=skip):
        rel = os.path.relpath(path, folder).replace(os.sep, "/")
        if not rel.endswith(".log"):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        component = component_of(rel)
        rows.append(file_row(path, component, attempt))
    components = {r["component"] for r in rows}
    inference = os.path.join(folder, "inference.log")
    if "router" not in components and any(r["path"] == inference for r in rows):
        rows.append(file_row(inference, "router", attempt, listed_path=inference + ROUTER_SUFFIX))
    return rows


def list_logs(run_dir: str) -> pd.DataFrame:
    """Every log file of the run, by attempt (legacy and launcher logs have no attempt)."""
    logs_dir = os.path.join(run_dir, "logs")
    rows: list[dict] = []
    try:
        names = sorted(os.listdir(logs_dir))
    except OSError:
        names = []
    attempts = sorted(int(m.group(1)) for n in names if (m := ATTEMPT.match(n)))
    for n in attempts:
        rows += _folder_rows(os.path.join(logs_dir, f"attempt_{n}"), n, skip_attempts=False)
    if os.path.isdir(logs_dir):
        rows += _folder_rows(logs_dir, None, skip_attempts=True)  # before attempts: logs/*.log, logs/envs/**
    launcher = os.path.join(run_dir, "launcher", "logs")
    for path in walk_files(launcher, max_depth=0) if os.path.isdir(launcher) else []:
        if path.endswith(".log"):
            rows.append(file_row(path, "launcher", None))
    if not rows:
        return frames.empty(frames.LOGS)
    out = frames.typed(rows, frames.LOGS)
    key = out["component"].map(_order)
    return (out.assign(_a=out["attempt"].fillna(0), _k=key).sort_values(["_a", "_k", "component"], kind="stable")
            .drop(columns=["_a", "_k"]).reset_index(drop=True))
