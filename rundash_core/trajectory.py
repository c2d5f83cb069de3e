"""What the Trajectory page computes from the frames: filtered and sorted samples, tool calls paired
with their results, transcript search. No file I/O: inputs are `frames.SAMPLES` and `Episode`s."""
from __future__ import annotations

import json

import pandas as pd

from .frames import Message

# URL value -> (column, ascending); short and stable (`?sort=reward_desc`)
SORTS = {
    "reward_desc": ("reward", False), "reward_asc": ("reward", True),
    "advantage_desc": ("advantage", False), "advantage_asc": ("advantage", True),
    "output_tokens_desc": ("output_tokens", False), "output_tokens_asc": ("output_tokens", True),
}
SORT_LABELS = {k: f"{col.replace('_', ' ')} {'↑' if asc else '↓'}" for k, (col, asc) in SORTS.items()}


def has_error(samples: pd.DataFrame) -> pd.Series:
    """Rows whose rollout raised (`ok` False) or that name an error."""
    failed = samples["ok"].eq(False).fillna(False).astype(bool)
    named = samples["error"].notna() & samples["error"].astype(object).map(
        lambda e: isinstance(e, str) and bool(e.strip()))
    return failed | named


def filter_samples(samples: pd.DataFrame, *, split: str | None = None, step: int | None = None,
                   env: str | None = None, errors_only: bool = False) -> pd.DataFrame:
    """The samples of one split / step / env (None: all), only the failed ones if asked."""
    keep = pd.Series(True, index=samples.index)
    if split is not None:
        keep &= samples["split"].eq(split).fillna(False).astype(bool)
    if step is not None:
        keep &= samples["step"].eq(step).fillna(False).astype(bool)
    if env is not None:
        keep &= samples["env"].eq(env).fillna(False).astype(bool)
    if errors_only:
        keep &= has_error(samples)
    return samples[keep].reset_index(drop=True)


def sort_samples(samples: pd.DataFrame, sort: str | None) -> pd.DataFrame:
    """Sorted by one of `SORTS` (stable; absent values last); None or unknown: as the source lists them."""
    if sort not in SORTS:
        return samples
    col, asc = SORTS[sort]
    return samples.sort_values(col, ascending=asc, kind="stable", na_position="last").reset_index(drop=True)


def step_options(steps: pd.DataFrame) -> tuple[list[int], set[int]]:
    """The steps (ints, in order) and those holding eval samples."""
    out, evals = [], set()
    for step, ev in zip(steps["step"], steps["eval"]):
        if pd.isna(step):
            continue
        out.append(int(step))
        if not pd.isna(ev) and bool(ev):
            evals.add(int(step))
    return out, evals


def neighbour(options: list[int], current: int | None, delta: int) -> int | None:
    """The step `delta` (±1) away from `current` (from none: the first or the last), clamped."""
    if not options:
        return None
    if current not in options:
        return options[0] if delta > 0 else options[-1]
    i = min(max(options.index(current) + delta, 0), len(options) - 1)
    return options[i]


def tool_results(messages: list[Message]) -> dict[str, int]:
    """tool_call_id -> index of the message that answers it (the first one)."""
    out: dict[str, int] = {}
    for i, m in enumerate(messages):
        if m.tool_call_id and m.tool_call_id not in out:
            out[m.tool_call_id] = i
    return out


def tool_calls_by_id(messages: list[Message]) -> dict[str, tuple[int, str]]:
    """tool call id -> (index of the message that made it, tool name)."""
    out: dict[str, tuple[int, str]] = {}
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            if c.id and c.id not in out:
                out[c.id] = (i, c.name)
    return out


def pretty_arguments(arguments: str) -> tuple[str, str]:
    """Tool-call arguments as (text, language): indented JSON when they parse, else as written."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False), "json"
    except (TypeError, ValueError):
        return arguments or "", "text"


def message_text(m: Message) -> str:
    """Everything of a message a search looks at: content, reasoning, tool names and arguments."""
    parts = [m.content or "", m.reasoning or ""]
    parts += [f"{c.name}\n{c.arguments}" for c in m.tool_calls]
    return "\n".join(parts)


def search_messages(messages: list[Message], query: str | None) -> list[int]:
    """Indices of the messages containing `query` (substring, case-insensitive); all for none."""
    if not query:
        return list(range(len(messages)))
    q = query.casefold()
    return [i for i, m in enumerate(messages) if q in message_text(m).casefold()]
