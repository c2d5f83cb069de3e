"""The schemas of the run contract's frames, their empty forms, and `Episode`.

Every kind answers every method of `Run` with frames of these columns and dtypes, empty where it has
no such data, so a page or a notebook never branches on the run's kind. Id columns (`sample_id`,
`step`) are on every frame so they join.
"""
from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# column -> pandas dtype
SAMPLES = {
    "sample_id": "str",        # short, URL-safe, stable across restarts: what `episode()` takes
    "episode_id": "str",       # the writer's own id (prime-rl episode id, Relax sample index, Harbor trial
                               # name), else NA: `episode()` takes it too (`rundash_core.episode_ids`)
    "split": "str",            # 'train' | 'eval' | 'val'
    "step": "Int64",           # the step the source files it under (Harbor: the trainer step, NA where not known)
    "trainer_step": "Int64",   # the trainer step it belongs to, where the source says (else NA)
    "step_folder": "Int64",    # Harbor: the step_NNNN folder number (fully-async: a sample counter); else NA
    "group_id": "str",         # samples of one prompt (GRPO group)
    "task_id": "str",
    "env": "str",              # env, dataset or capability
    "reward": "float64",
    "advantage": "float64",
    "ok": "boolean",           # False: the rollout raised; NA: not known
    "error": "str",            # what went wrong, when something did
    "status": "str",           # stop reason / rollout status as the source writes it
    "truncated": "boolean",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "turns": "Int64",
    "duration_s": "float64",
    "arrival": "float64",      # when it arrived (epoch seconds; prime-rl: the index's `arrival`), else NA
    "locator": "str",          # where the full record is: 'path:offset:length' or a directory
}
STEPS = {"step": "Int64", "samples": "Int64", "reward_mean": "float64", "eval": "boolean"}
VALIDATION = {
    "event": "str",            # the validation event (e.g. 'step 40', a val dump folder)
    "step": "Int64",           # the trainer step it was run at (NA: not known)
    "source": "str",           # data source / capability, or where a run-level number comes from
    "statistic": "str",        # 'mean@4', 'best@4/mean', 'pass@1', 'val_score', ...
    "value": "float64",
    "n": "Int64",              # how many samples the statistic is over (NA: not known)
    "core": "boolean",         # a headline number (verl val-core) rather than an auxiliary one
}
VAL_COT = {                     # per val event, over one fixed cohort of tasks (rundash_core.views.validation)
    "event": "str", "step": "Int64",
    "cot_ratio": "float64",           # mean over tasks of cot_chars / resp_chars
    "cot_ratio_weighted": "float64",  # Σ cot_chars / Σ resp_chars
    "cot_chars": "float64", "resp_chars": "float64", "turns": "float64",  # means over the tasks kept
    "n": "Int64", "cohort_size": "Int64", "coverage": "float64",
    "low_coverage": "boolean",        # coverage < 1/2: indicative only
}
FAILURE_MODES = {                # one row per task of a val event (first copy), and why it failed
    "event": "str", "step": "Int64", "sample_step": "Int64", "sample_id": "str", "task_id": "str",
    "capability": "str", "category": "str", "reason": "str",
}
LOGS = {"component": "str", "attempt": "Int64", "path": "str", "size": "Int64",
        "updated": "datetime64[ns, UTC]"}
LOG_LINES = {"time": "datetime64[ns, UTC]", "component": "str", "level": "str", "text": "str",
             "path": "str", "offset": "Int64",
             "estimated": "boolean"}  # the line has no time of its own: `time` is estimated (logmerge)
EVAL_PLAN = {"env": "str", "step": "Int64", "expected": "Int64"}  # eval episodes a plan.json expects
REPORTS = {"name": "str", "title": "str", "path": "str", "size": "Int64", "updated": "datetime64[ns, UTC]"}


def typed(frame: pd.DataFrame | dict | None, schema: dict[str, str]) -> pd.DataFrame:
    """`frame` with exactly the schema's columns, in order and of its dtypes (missing columns
    come as all-NA). A list of row dicts or a column dict is accepted too."""
    if frame is None:
        frame = {}
    frame = frame if isinstance(frame, pd.DataFrame) else pd.DataFrame(frame)
    n = len(frame)
    out = {}
    for col, dtype in schema.items():
        values = frame[col] if col in frame.columns else pd.Series([None] * n, index=frame.index, dtype=object)
        out[col] = _as(values, dtype)
    return pd.DataFrame(out).reset_index(drop=True)


def _as(values: pd.Series, dtype: str) -> pd.Series:
    if dtype == "str":
        values = values.astype(object).where(values.notna(), None)
        return values.map(lambda v: v if v is None or isinstance(v, str) else str(v)).astype("str")
    if dtype.startswith("datetime64"):
        return pd.to_datetime(values, utc=True).astype(dtype)
    if dtype == "float64":
        return pd.to_numeric(values.astype(object).where(values.notna(), np.nan), errors="coerce").astype("float64")
    return values.astype(object).where(values.notna(), None).astype(dtype)


def typed_rows(rows: list[dict], schema: dict[str, str]) -> pd.DataFrame:
    """`typed(rows, schema)` for a long list of row dicts, built column by column from plain lists
    (no per-value pandas map: a 70k-row listing in a fraction of the time); a column holding values
    of another type goes the general way."""
    out = {}
    for col, dtype in schema.items():
        values = [r.get(col) for r in rows]
        try:
            out[col] = _plain(values, dtype)
        except (TypeError, ValueError):
            out[col] = _as(pd.Series(values, dtype=object), dtype)
    return pd.DataFrame(out)


def _plain(values: list, dtype: str) -> pd.Series:
    if dtype == "str":
        text = [v if v is None or type(v) is str else None if v != v else str(v) for v in values]
        return pd.Series(text, dtype="str")
    if dtype == "float64" and not any(type(v) is bool for v in values):
        return pd.Series(np.array(values, dtype="float64"))
    if dtype in ("Int64", "boolean"):
        return pd.Series(pd.array(values, dtype=dtype))
    raise ValueError(dtype)


def empty(schema: dict[str, str]) -> pd.DataFrame:
    return typed(None, schema)


def check(frame: pd.DataFrame, schema: dict[str, str]) -> list[str]:
    """What differs from the schema (columns, order, dtypes); [] when the frame conforms."""
    out = []
    if list(frame.columns) != list(schema):
        out.append(f"columns {list(frame.columns)} != {list(schema)}")
    for col, dtype in schema.items():
        if col in frame.columns and str(frame[col].dtype) != str(pd.Series([], dtype=dtype).dtype):
            out.append(f"{col}: {frame[col].dtype} != {dtype}")
    return out


def is_url_safe(sample_id: str) -> bool:
    return bool(sample_id) and urllib.parse.quote(sample_id, safe="") == sample_id


# Locators -------------------------------------------------------------------------------------------
def line_locator(path: str, offset: int, length: int) -> str:
    """Where one JSONL line is: read `length` bytes at `offset`, no rescan."""
    return f"{path}:{offset}:{length}"


def parse_line_locator(locator: str) -> tuple[str, int, int]:
    path, offset, length = locator.rsplit(":", 2)
    return path, int(offset), int(length)


# Episodes ------------------------------------------------------------------------------------------
@dataclass
class ToolCall:
    name: str
    arguments: str = ""  # as the model wrote them (JSON text for most agents)
    id: str | None = None


@dataclass
class Message:
    role: str                      # system | user | assistant | tool
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # for a tool result: the call it answers
    tokens: int | None = None


@dataclass
class Episode:
    """One sample's full record, whatever its source: what the Trajectory page and notebooks show."""

    sample_id: str
    run_id: str
    split: str = "train"
    step: int | None = None
    task_id: str | None = None
    env: str | None = None
    reward: float | None = None
    rewards: dict[str, float] = field(default_factory=dict)   # by component
    metrics: dict[str, float] = field(default_factory=dict)   # env metrics
    messages: list[Message] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)          # source ids (trial name, group, ...)
    timing: dict[str, float] = field(default_factory=dict)     # seconds by phase
    error: str | None = None
    tokens: pd.DataFrame | None = None  # per token: token_id, logprob, advantage, entropy, mask
    raw: dict = field(default_factory=dict)  # fields of the record not mapped above


def leaf_paths(parent: dict[int, int | None]) -> list[list[int]]:
    """Root→leaf paths of a tree of nodes given as {node: its parent (None: a root)}, one per leaf
    (a node no other node names as parent), in node order: the branches of a trace (prime-rl spec
    5.5). A parent that is not a node ends the path; a parent loop stops where it comes round."""
    has_child = set(parent.values())
    paths = []
    for leaf in sorted(n for n in parent if n not in has_child):
        path, n = [], leaf
        while n in parent and n not in path:
            path.append(n)
            n = parent[n]
        paths.append(path[::-1])
    return paths
