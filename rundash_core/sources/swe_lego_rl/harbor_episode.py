"""One Harbor trial as an `Episode`: result.json's reward, timing and error, and the agent's
transcript from its ATIF `agent/trajectory.json` (`docs/formats/swe-lego-rl.md` section 3).

ATIF steps map to messages: `system`/`user` steps as they are, `agent` steps as assistant
messages (reasoning, tool calls with their arguments as JSON text), and each observation result
as a tool message answering its call.
"""
from __future__ import annotations

import json
import os

import orjson

from rundash_core.frames import Episode, Message, ToolCall
from rundash_core.io.configs import dig
from rundash_core.io.files import file_id
from rundash_core.io.jsonl import list_or_empty
from rundash_core.numbers import finite_float
from rundash_core.sources.swe_lego_rl import harbor, harbor_values

TRAJECTORY = os.path.join("agent", "trajectory.json")
_ROLES = {"system": "system", "user": "user", "agent": "assistant"}
_PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")


def _load(trial_dir: str, name: str) -> tuple[dict | None, str | None]:
    path = os.path.join(trial_dir, name)
    fid = file_id(path)
    if fid is None:
        return None, None
    return harbor.load_json_object(path, fid, name)


def _text(v) -> str:
    """A message or arguments as text: a list of content parts is their text joined (spec 3.5),
    other values JSON (the stdlib's when orjson refuses, e.g. an int past 64 bits)."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in v):
        return "".join(p["text"] for p in v)
    try:
        return orjson.dumps(v).decode()
    except TypeError:  # (orjson.JSONEncodeError)
        return json.dumps(v, ensure_ascii=False, default=str)


def _optional_text(v) -> str | None:
    return None if v is None else _text(v)


def _seconds(phase) -> float | None:
    start, end = harbor_values.iso_time(dig(phase, "started_at")), harbor_values.iso_time(dig(phase, "finished_at"))
    return (end - start) / 1e9 if start is not None and end is not None else None


def atif_messages(trajectory: dict) -> list[Message]:
    out: list[Message] = []
    for step in list_or_empty(trajectory.get("steps")):
        if not isinstance(step, dict):
            continue
        calls = [ToolCall(_text(c.get("function_name")), _text(c.get("arguments")),
                          _optional_text(c.get("tool_call_id")))
                 for c in list_or_empty(step.get("tool_calls")) if isinstance(c, dict)]
        source = _text(step.get("source"))
        out.append(Message(_ROLES.get(source, source), _text(step.get("message")),
                           _optional_text(step.get("reasoning_content")), calls,
                           tokens=harbor_values.integer(dig(step, "metrics", "completion_tokens"))))
        for r in list_or_empty(dig(step, "observation", "results")):
            if isinstance(r, dict):
                out.append(Message("tool", _text(r.get("content")),
                                   tool_call_id=_optional_text(r.get("source_call_id"))))
    return out


def trial_episode(trial_dir: str, row: dict, run_id: str) -> Episode:
    """The episode of one trial dir; `row` is its samples() row (ids, reward, error)."""
    result, problem = _load(trial_dir, harbor.RESULT)
    trajectory, tproblem = _load(trial_dir, TRAJECTORY)
    rewards = dig(result, "verifier_result", "rewards")
    timing = {p: s for p in _PHASES if (s := _seconds(dig(result, p))) is not None}
    raw = {"problems": [p for p in (problem, tproblem) if p]}
    if not os.path.exists(os.path.join(trial_dir, TRAJECTORY)):
        raw["problems"].append("no agent/trajectory.json: no transcript")
    return Episode(
        sample_id=row["sample_id"], run_id=run_id, split=row["split"], step=row["step"], task_id=row["task_id"],
        env=row["env"], reward=row["reward"],
        rewards={k: v for k, v in ((k, finite_float(v)) for k, v in rewards.items()) if v is not None}
        if isinstance(rewards, dict) else {},
        messages=atif_messages(trajectory) if isinstance(trajectory, dict) else [],
        ids={"trial": os.path.basename(trial_dir), "trial_dir": trial_dir,
             "Harbor step folder": os.path.basename(os.path.dirname(trial_dir)),  # (step: the trainer step, or none)
             **({"id": str(result["id"])} if result and "id" in result else {})},
        timing=timing, error=row["error"], raw=raw)
