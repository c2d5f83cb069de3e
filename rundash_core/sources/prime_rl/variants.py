"""The other prime-rl trace layouts (`docs/formats/prime-rl.md` 5.8): a verifiers `uv run eval`
run's bare `traces.jsonl`, and the pre-Jul-9 `rollouts/step_N/{train,eval}_rollouts*.jsonl` files.

- **verifiers eval runs**: `<run>/traces.jsonl`, one Episode record per line and no index, so the
  line offsets are scanned (once per version of the file, a torn last line left out). Split `eval`;
  step = the record's `run.work.step` / `run.step`, else 0 (a standalone eval is one step).
  `sample_id` = `eval-<k>` (the k-th complete line); the episode is read at its byte offset and
  mapped like any stream record.
- **legacy rollout dicts** (not specified: shown raw): step and split from the path, the scalars a
  key obviously holds (`reward`/`score`, `advantage`, `task`/`env`, `example_id`/`group_id`, …);
  the episode is the record itself in `Episode.raw`, with its `prompt`/`completion` as messages
  when they are chat messages or text. `sample_id` = `<step>-<split>-f<file>-<k>`.
"""
from __future__ import annotations

import os
import re

import orjson
import pandas as pd

from rundash_core import frames
from rundash_core.io.files import file_id
from rundash_core.io.jsonl import dict_or_empty, list_or_empty, read_located_object
from rundash_core.numbers import finite_float
from rundash_core.sources.prime_rl.episode import _int
from rundash_core.sources.prime_rl.lines import objects as _objects
from rundash_core.sources.prime_rl.traces import _STEP_DIR, _listdir, index_row

EVAL_TRACES = "traces.jsonl"
LEGACY_FILE = re.compile(r"^(train|eval)_rollouts.*\.jsonl$")
REWARD_KEYS = ("reward", "score", "rewards")
ADVANTAGE_KEYS = ("advantage", "advantages")
GROUP_KEYS = ("group_id", "example_id", "problem_id", "prompt_id")
TASK_KEYS = ("task_id", "example_id", "task")
ENV_KEYS = ("env", "env_name", "env_id", "task")
TRUNCATED_KEYS = ("is_truncated", "truncated")
STATUS_KEYS = ("stop_reason", "finish_reason", "stop_condition", "status")
ROW_SCALARS = ("reward", "advantage", "group_id", "task_id", "env", "truncated", "status")


# verifiers eval runs -----------------------------------------------------------------------------------
def eval_samples(run_path: str) -> pd.DataFrame:
    """One row per complete line of `<run>/traces.jsonl` (scanned: there is no index)."""
    path = os.path.join(run_path, EVAL_TRACES)
    if file_id(path) is None:
        return frames.empty(frames.SAMPLES)
    rows = _objects(path, "verifiers-eval-traces", _eval_row)
    out = []
    for k, (offset, length, step, s) in enumerate(rows):
        n_err = s["num_errors"]
        out.append({
            "sample_id": f"eval-{k}", "episode_id": s["id"], "split": "eval", "step": step, "group_id": s["group"], "env": s["env"],
            "reward": s["reward"], "advantage": s["advantage"],
            "ok": s["ok"] if isinstance(s["ok"], bool) else None,
            "error": f"{n_err} error{'s' if n_err > 1 else ''}" if n_err else None,
            "status": s["stop_condition"], "truncated": s["truncated"], "input_tokens": s["input_tokens"],
            "output_tokens": s["output_tokens"], "turns": s["turns"], "duration_s": s["duration"],
            "locator": frames.line_locator(path, offset, length)})
    return frames.typed(out, frames.SAMPLES)


def _eval_row(offset: int, length: int, rec: dict) -> tuple:
    run = dict_or_empty(rec.get("run"))
    step = _int(dict_or_empty(run.get("work")).get("step"))
    step = step if step is not None else _int(run.get("step"))
    return offset, length, step if step is not None else 0, index_row(rec)


# Legacy rollout dicts -----------------------------------------------------------------------------------
def legacy_files(run_path: str) -> list[tuple[int, str, int, str]]:
    """(step, split, file index within the step and split, path) of every legacy rollouts file."""
    root, out = os.path.join(run_path, "rollouts"), []
    for name in _listdir(root):
        if (m := _STEP_DIR.match(name)) is None:
            continue
        counts: dict[str, int] = {}
        for f in _listdir(os.path.join(root, name)):
            if (fm := LEGACY_FILE.match(f)) is not None and file_id(path := os.path.join(root, name, f)) is not None:
                split = fm.group(1)
                out.append((int(m.group(1)), split, counts.get(split, 0), path))
                counts[split] = counts.get(split, 0) + 1
    return sorted(out)


def is_legacy(path: str) -> bool:
    return LEGACY_FILE.match(os.path.basename(path)) is not None


def _first(rec: dict, keys: tuple[str, ...]):
    for k in keys:
        if k in rec and rec[k] is not None:
            return rec[k]
    return None


def _scalar(value) -> float | None:
    """A number, or the mean of a list of numbers (per-token advantages)."""
    if isinstance(value, list):
        nums = [n for v in value if (n := finite_float(v)) is not None]
        return sum(nums) / len(nums) if nums else None
    return finite_float(value)


def _text_id(value) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return None
    return str(value)


def _legacy_row(offset: int, length: int, rec: dict) -> dict:
    truncated = _first(rec, TRUNCATED_KEYS)
    status = _first(rec, STATUS_KEYS)
    return {"offset": offset, "length": length, "reward": _scalar(_first(rec, REWARD_KEYS)),
            "advantage": _scalar(_first(rec, ADVANTAGE_KEYS)), "group_id": _text_id(_first(rec, GROUP_KEYS)),
            "task_id": _text_id(_first(rec, TASK_KEYS)), "env": _text_id(_first(rec, ENV_KEYS)),
            "truncated": truncated if isinstance(truncated, bool) else None,
            "status": status if isinstance(status, str) else None}


def legacy_samples(run_path: str) -> pd.DataFrame:
    out = []
    for step, split, j, path in legacy_files(run_path):
        for k, row in enumerate(_objects(path, "prime-rl-legacy-rollouts", _legacy_row)):
            out.append({**{c: row[c] for c in ROW_SCALARS},
                        "sample_id": f"{step}-{split}-f{j}-{k}", "split": split, "step": step,
                        "locator": frames.line_locator(path, row["offset"], row["length"])})
    return frames.typed(out, frames.SAMPLES)


def legacy_episode(run_id: str, row: dict) -> frames.Episode:
    """The raw record (in `raw`), its prompt and completion as messages when they are chat text."""
    path = frames.parse_line_locator(row["locator"])[0]
    record = read_located_object(row["locator"], sample=f"{run_id}: sample {row['sample_id']!r}")
    messages = _messages(record.get("prompt"), "user") + _messages(record.get("completion"), "assistant")
    metrics = {k: n for k, v in dict_or_empty(record.get("metrics")).items()
               if (n := finite_float(v, keep_nan_inf=True)) is not None}  # as logged
    ids = {k: v for k, v in (("group", row.get("group_id")), ("task", row.get("task_id")),
                             ("file", os.path.basename(path))) if v}
    return frames.Episode(
        sample_id=row["sample_id"], run_id=run_id, split=row["split"], step=row.get("step"),
        task_id=row.get("task_id"), env=row.get("env"), reward=row.get("reward"), metrics=metrics,
        messages=messages, ids=ids, raw=record)


def _messages(value, role: str) -> list[frames.Message]:
    if isinstance(value, str):
        return [frames.Message(role, value)]
    out = []
    for m in list_or_empty(value):
        if isinstance(m, dict) and isinstance(m.get("role"), str):
            content, reasoning = m.get("content"), m.get("reasoning_content")
            out.append(frames.Message(m["role"], content if isinstance(content, str) else
                                      orjson.dumps(content).decode() if content is not None else "",
                                      reasoning=reasoning if isinstance(reasoning, str) else None))
    return out
