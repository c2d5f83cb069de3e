"""What the Trajectory page computes from the frames: filtered and sorted samples, tool calls paired
with their results, transcript search. No file I/O: inputs are `frames.SAMPLES` and `Episode`s.

Steps are on the run's step axis (`rollouts.step_axis`, the Rollouts page's too): trainer steps, or
the Harbor folder numbers ("Harbor step folder") where trainer steps are not known."""
from __future__ import annotations

import json

import pandas as pd

from rundash_core.frames import Episode, Message
from rundash_core.views.rollouts import FOLDER_LABEL, on_axis, step_axis  # noqa: F401 (one step axis for both pages)

# URL value -> (column, ascending); short and stable (`?sort=reward_desc`)
SORTS = {
    "reward_desc": ("reward", False), "reward_asc": ("reward", True),
    "advantage_desc": ("advantage", False), "advantage_asc": ("advantage", True),
    "output_tokens_desc": ("output_tokens", False), "output_tokens_asc": ("output_tokens", True),
    "arrival_desc": ("arrival", False), "arrival_asc": ("arrival", True),
    "duration_desc": ("duration_s", False), "duration_asc": ("duration_s", True),
    "group": ("group_id", True),
}
SORT_LABELS = {k: ("group" if k == "group" else f"{col.replace('_s', '').replace('_', ' ')} {'↑' if asc else '↓'}")
               for k, (col, asc) in SORTS.items()}
MODES = {"stream": "Stream", "step": "Step"}  # URL value -> label (`?mode=stream`)

# The sample table's order: the values a reader compares first (reward, advantage, status, sizes),
# then the rest, the long ids last, the writer's episode id first among them (what a user pastes)
FIRST_COLUMNS = ["reward", "advantage", "status", "step", "split", "env", "turns", "output_tokens", "input_tokens",
                 "duration_s", "arrival", "error"]
ID_COLUMNS = ("episode_id", "task_id", "group_id", "sample_id")


def table_columns(columns) -> list[str]:
    """`columns` (a samples frame's) in the sample table's order (`FIRST_COLUMNS`, the rest, `ID_COLUMNS`)."""
    have = list(columns)
    return ([c for c in FIRST_COLUMNS if c in have] + [c for c in have if c not in FIRST_COLUMNS and c not in ID_COLUMNS]
            + [c for c in ID_COLUMNS if c in have])


def step_text(episode: Episode, row: dict | None) -> str:
    """The episode's step as its side panel says it: 'step 12'; a Harbor trial with no known
    trainer step says its folder ('Harbor step folder 2', the `step_folder` column); else 'step n/a'."""
    if episode.step is not None and not pd.isna(episode.step):
        return f"step {episode.step}"
    folder = (row or {}).get("step_folder")
    return f"{FOLDER_LABEL} {int(folder)}" if folder is not None and not pd.isna(folder) else "step n/a"



def has_error(samples: pd.DataFrame) -> pd.Series:
    """Rows whose rollout raised (`ok` False) or that name an error."""
    failed = samples["ok"].eq(False).fillna(False).astype(bool)
    named = samples["error"].notna() & samples["error"].astype(object).map(
        lambda e: isinstance(e, str) and bool(e.strip()))
    return failed | named


def filter_samples(samples: pd.DataFrame, *, split: str | None = None, step: int | None = None,
                   env: str | None = None, errors_only: bool = False, status: str | None = None,
                   step_column: str = "step") -> pd.DataFrame:
    """The samples of one split / step / env / status (None: all), only the failed ones if asked;
    `step` is a value of `step_column` (the step axis' column)."""
    keep = pd.Series(True, index=samples.index)
    if status is not None:
        keep &= samples["status"].eq(status).fillna(False).astype(bool)
    if split is not None:
        keep &= samples["split"].eq(split).fillna(False).astype(bool)
    if step is not None:
        keep &= samples[step_column].eq(step).fillna(False).astype(bool)
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
    if sort == "group":  # one prompt's samples together, best first within the group
        return samples.sort_values(["group_id", "reward"], ascending=[True, False], kind="stable",
                                   na_position="last").reset_index(drop=True)
    return samples.sort_values(col, ascending=asc, kind="stable", na_position="last").reset_index(drop=True)


def newest_first(samples: pd.DataFrame) -> pd.DataFrame:
    """The stream's order: latest arrival first; samples without an arrival time keep their listed
    order reversed (sources list in arrival order), after the timed ones."""
    rev = samples.iloc[::-1]
    return rev.sort_values("arrival", ascending=False, kind="stable", na_position="last").reset_index(drop=True)


def group_stats(samples: pd.DataFrame) -> pd.DataFrame:
    """Per GRPO group (samples of one prompt): step, env, n, reward min / mean / max / std, and how
    many failed; the groups with the widest reward spread first (where the learning signal is)."""
    s = samples[samples["group_id"].notna()]
    cols = ["group_id", "step", "env", "n", "reward_min", "reward_mean", "reward_max", "reward_std", "errors"]
    if s.empty:
        return pd.DataFrame({c: [] for c in cols})
    g = s.assign(_err=has_error(s)).groupby("group_id", sort=False)
    out = pd.DataFrame({"step": g["step"].min(), "env": g["env"].first(), "n": g.size(),
                        "reward_min": g["reward"].min(), "reward_mean": g["reward"].mean(),
                        "reward_max": g["reward"].max(), "reward_std": g["reward"].std(ddof=0),
                        "errors": g["_err"].sum().astype(int)}).reset_index()
    return out.sort_values(["reward_std", "group_id"], ascending=[False, True], kind="stable",
                           na_position="last").reset_index(drop=True)[cols]


def step_window(options: list[int], current: int | None, width: int = 11) -> list[int]:
    """At most `width` steps around `current` (the newest ones when none is chosen), for a strip."""
    if len(options) <= width:
        return list(options)
    i = options.index(current) if current in options else len(options) - 1
    lo = min(max(i - width // 2, 0), len(options) - width)
    return options[lo:lo + width]


def axis_steps(samples: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per step of the axis column: samples, mean reward, whether it holds eval samples
    (`frames.STEPS`, what `Run.steps` gives for the `step` column): the step picker's steps."""
    s = on_axis(samples, column)
    s = s[s["step"].notna()]
    if s.empty:
        return pd.DataFrame({"step": pd.array([], dtype="Int64"), "samples": pd.array([], dtype="Int64"),
                             "reward_mean": pd.Series([], dtype="float64"), "eval": pd.array([], dtype="boolean")})
    g = s.groupby("step", sort=True)
    return pd.DataFrame({"step": pd.array(g.size().index, dtype="Int64"), "samples": g.size().to_numpy(),
                         "reward_mean": g["reward"].mean().to_numpy(),
                         "eval": g["split"].agg(lambda x: bool((x != "train").any())).to_numpy()})


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


# One episode's facts (side panel, tools block) ---------------------------------------------------------
def _traces(episode: Episode) -> list[dict]:
    raw = episode.raw if isinstance(episode.raw, dict) else {}
    return [t for t in raw.get("traces") or [] if isinstance(t, dict)]


def token_usage(episode: Episode, row: dict | None = None) -> dict[str, int]:
    """Token usage: summed over the model calls' `usage` when the record has them (prompt, cached
    input, completion, reasoning), else the sample row's input / output counts."""
    out: dict[str, int] = {}
    names = {"prompt_tokens": "prompt", "cached_input_tokens": "cached input", "completion_tokens": "completion",
             "reasoning_tokens": "reasoning"}
    for t in _traces(episode):
        for c in t.get("calls") or []:
            usage = c.get("usage") if isinstance(c, dict) and isinstance(c.get("usage"), dict) else {}
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and usage.get("cached_input_tokens") is None:  # (OpenAI-style cached count)
                usage = {**usage, "cached_input_tokens": details.get("cached_tokens")}
            for key, name in names.items():
                v = usage.get(key)
                if isinstance(v, int) and not isinstance(v, bool):
                    out[name] = out.get(name, 0) + v
    if not out and row:
        for key, name in (("input_tokens", "input"), ("output_tokens", "output")):
            v = row.get(key)
            if v is not None and not pd.isna(v):
                out[name] = int(v)
    return out


def episode_facts(episode: Episode) -> dict[str, object]:
    """Counts the side panel shows: turns (assistant messages), tool calls, tool results,
    messages, model calls (when the record lists them), and the in-flight stage if any."""
    msgs = episode.messages
    calls = sum(len(t.get("calls") or []) for t in _traces(episode))
    out: dict[str, object] = {"messages": len(msgs), "turns": sum(1 for m in msgs if m.role == "assistant"),
                              "tool calls": sum(len(m.tool_calls) for m in msgs),
                              "tool results": sum(1 for m in msgs if m.role == "tool")}
    if calls:
        out["model calls"] = calls
    live = (episode.raw or {}).get("in_flight") if isinstance(episode.raw, dict) else None
    if isinstance(live, dict) and live.get("stage"):
        out["stage"] = f"in flight: {live['stage']}"
    return out


def tool_definitions(episode: Episode) -> list[dict]:
    """The tools offered to the agent (name, description, parameters as JSON text), from the record's
    traces (`tools`), first definition of each name."""
    out, seen = [], set()
    for t in _traces(episode):
        for tool in t.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool  # (OpenAI shape)
            name = str(fn.get("name") or "")
            if not name or name in seen:
                continue
            seen.add(name)
            params = fn.get("parameters")
            out.append({"name": name, "description": str(fn.get("description") or ""),
                        "parameters": json.dumps(params, indent=2, ensure_ascii=False) if params is not None else ""})
    return out


def tool_usage(messages: list[Message]) -> pd.DataFrame:
    """Per tool name: calls, answered calls, and the message numbers (1-based) that called it."""
    results = tool_results(messages)
    rows: dict[str, dict] = {}
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            r = rows.setdefault(c.name or "?", {"tool": c.name or "?", "calls": 0, "answered": 0, "messages": []})
            r["calls"] += 1
            r["answered"] += int(bool(c.id) and c.id in results)
            if i + 1 not in r["messages"]:
                r["messages"].append(i + 1)
    out = pd.DataFrame(list(rows.values()), columns=["tool", "calls", "answered", "messages"])
    out["messages"] = out["messages"].map(lambda xs: ", ".join(map(str, xs)))
    return out
