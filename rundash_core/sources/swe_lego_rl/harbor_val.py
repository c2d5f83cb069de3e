"""Validation analyses over Harbor val dumps (`docs/formats/swe-lego-rl.md` sections 6-8).

Input: the val events of a SWE-Lego-RL run (its `_groups()` rows with split `val`) and the first
copy of each task per event (the smallest trial path: async validation re-sends tasks, and only
the first copy is scored). Output: the CoT share per event over the fixed cohort (`frames.VAL_COT`)
and the failure mode of each cohort task of one event (`frames.FAILURE_MODES`).

Per trial, only the files a view needs are read: `proxy_trajectory.json` for the CoT share;
`verifier/report.json`, `agent/openhands_sdk.txt` (its first 1.5 MB; else the proxy trajectory's
tool calls) and the task's gold patch (`<task path>/solution/solve.sh`) for the failure mode.
What was read is kept per exp dir in `cache.shared` (one entry per exp dir, like the trial rows),
per trial with the identity of the files it came from, so a refresh reads only new or changed
trials: a dump still being written costs its new trials only.
"""
from __future__ import annotations

import os
import threading

import pandas as pd

from rundash_core import cache, frames
from rundash_core.io.configs import dig
from rundash_core.io.files import file_id, read_range
from rundash_core.sources.swe_lego_rl import failure_modes as fm
from rundash_core.sources.swe_lego_rl import harbor
from rundash_core.views import validation as val

PROXY = "proxy_trajectory.json"
SDK_LOG = os.path.join("agent", "openhands_sdk.txt")
REPORT = os.path.join("verifier", "report.json")
SOLVE = os.path.join("solution", "solve.sh")


class _TrialMemo:
    """Per trial dir and analysis: (identity of the files it was computed from, the value)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: dict[tuple, tuple] = {}

    @property
    def nbytes(self) -> int:
        return 1024 + 400 * len(self._items)

    def get(self, key: tuple, ident: tuple, build):
        with self._lock:
            have = self._items.get(key)
        if have is not None and have[0] == ident:
            return have[1]
        value = build()
        with self._lock:
            self._items[key] = (ident, value)
        return value


def _memo(trial_dir: str) -> _TrialMemo:
    exp_dir = os.path.dirname(os.path.dirname(trial_dir))
    return cache.shared.get_or_create(("harbor-val", os.path.realpath(exp_dir)), _TrialMemo)


def _json(trial_dir: str, name: str) -> tuple[dict | None, str | None]:
    path = os.path.join(trial_dir, name)
    fid = file_id(path)
    if fid is None:
        return None, (f"no {name}" if not os.path.lexists(path) else f"{name} is not a readable file")
    return harbor.load_json_object(path, fid, name)


def _snapshot(proxy: dict | None) -> list | None:
    """The proxy's `messages_snapshot`, each message's `content` and `tool_calls` of a type the
    analyses can walk (a number there made `validation`/`failure_modes` raise), else dropped."""
    messages = dig(proxy, "messages_snapshot")
    if not isinstance(messages, list):
        return None
    return [{**m, "content": m.get("content") if isinstance(m.get("content"), (str, list)) else None,
             "tool_calls": m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []}
            if isinstance(m, dict) else m for m in messages]


def _idents(trial_dir: str, *names: str) -> tuple:
    return tuple(file_id(os.path.join(trial_dir, n)) for n in names)


# CoT share (spec 7.1) ---------------------------------------------------------------------------------
def trial_cot(trial_dir: str) -> dict | None:
    """Spec 7.1 for one trial: None without a readable result.json or proxy trajectory."""
    def build():
        result, _ = _json(trial_dir, harbor.RESULT)
        if result is None:
            return None
        proxy, _ = _json(trial_dir, PROXY)
        counts = val.message_cot(_snapshot(proxy))
        return counts
    return _memo(trial_dir).get(("cot", trial_dir), _idents(trial_dir, harbor.RESULT, PROXY), build)


def _event_rows(events: list[tuple]) -> pd.DataFrame:
    """event (folder name), step (trainer step), folder (number), in display order: paired events
    by trainer step, then the unpaired ones by folder."""
    rows = [(g[1], g[3], g[0]) for g in events]
    rows.sort(key=lambda r: (r[1] is None, r[1] if r[1] is not None else 0, r[2]))
    return pd.DataFrame({"event": pd.array([r[0] for r in rows], dtype="str"),
                         "step": pd.array([r[1] for r in rows], dtype="Int64"),
                         "folder": pd.array([r[2] for r in rows], dtype="Int64")})


def _with_events(events: list[tuple], first: pd.DataFrame) -> pd.DataFrame:
    names = {g[0]: g[1] for g in events}
    return first.assign(event=first["step"].map(names))


def cohort(events: list[tuple], first: pd.DataFrame) -> list[str]:
    return val.fixed_cohort(_with_events(events, first), len(events))


def val_cot(events: list[tuple], first: pd.DataFrame, *, sample: int = val.COT_SAMPLE) -> pd.DataFrame:
    """`frames.VAL_COT` per val event over the fixed cohort's first `sample` tasks."""
    if not events:
        return frames.empty(frames.VAL_COT)
    firsts = _with_events(events, first)
    tasks = val.fixed_cohort(firsts, len(events))
    wanted = set(tasks[:sample])
    rows = []
    for event, task, trial_dir in zip(firsts["event"], firsts["task_id"], firsts["locator"]):
        if task in wanted:
            counts = trial_cot(trial_dir)
            if counts is not None:
                rows.append({"event": event, "task_id": task, **counts})
    trials = pd.DataFrame(rows, columns=["event", "task_id", "turns", "cot_chars", "tool_chars", "resp_chars"])
    cache.shared.evict()
    return val.cot_share(_event_rows(events), trials, tasks, sample=sample)


# Failure modes (spec 8) -------------------------------------------------------------------------------
def _gold(result: dict | None) -> list[str] | None:
    task = dig(result, "task_id", "path") or dig(result, "config", "task", "path")
    if not isinstance(task, str) or not task:
        return None
    path = os.path.join(task, SOLVE)
    fid = file_id(path)  # (None outside the allowed roots, or on another machine)
    if fid is None:
        return None
    try:
        return fm.gold_files(read_range(path, 0, min(fid.size, 8 << 20)).decode("utf-8", "replace"))
    except OSError:
        return None


def trial_facts(trial_dir: str, reward: float | None, output_tokens: int | None) -> fm.TrialFacts:
    """What the failure-mode rules need, read from one trial dir."""
    def build() -> fm.TrialFacts:
        report, why = _json(trial_dir, REPORT)
        first = next(iter(report.values()), None) if isinstance(report, dict) else None
        if report is not None and not isinstance(first, dict):
            first, why = None, "verifier/report.json holds no report entry"
        why = None if why == f"no {REPORT}" else why
        if fm.decided_by_verifier(reward, first):  # rules 1-3: the agent's record is not read
            return fm.TrialFacts(reward, first, None, None, output_tokens, None, why)
        sdk = os.path.join(trial_dir, SDK_LOG)
        text = edits = tokens = None
        if file_id(sdk) is not None:
            try:
                text = read_range(sdk, 0, fm.SDK_READ_BYTES).replace(b"\x00", b"").decode("utf-8", "replace")
                edits, tokens = fm.sdk_edits(text), fm.sdk_output_tokens(text)
            except OSError:
                text = None
        if text is None:
            proxy, _ = _json(trial_dir, PROXY)
            messages = _snapshot(proxy)
            if isinstance(messages, list):
                edits, text = fm.message_edits(messages)
        result, _ = _json(trial_dir, harbor.RESULT)
        return fm.TrialFacts(reward, first, text, edits, output_tokens if tokens is None else tokens,
                             _gold(result) if edits else None, why)
    ident = (reward, output_tokens, *_idents(trial_dir, REPORT, SDK_LOG, PROXY))  # (result.json: reward's)
    return _memo(trial_dir).get(("facts", trial_dir), ident, build)


def failure_modes(events: list[tuple], first: pd.DataFrame, event: str | None = None) -> pd.DataFrame:
    """`frames.FAILURE_MODES` for one val event (default: the last in display order): each
    cohort task's first copy, its category and the rule that decided it."""
    if not events:
        return frames.empty(frames.FAILURE_MODES)
    order = _event_rows(events)
    if event is None:
        event = str(order["event"].iloc[-1])
    if event not in set(order["event"]):
        raise KeyError(f"no validation event {event!r}")
    at = order[order["event"] == event].iloc[0]
    firsts = _with_events(events, first)
    tasks = set(val.fixed_cohort(firsts, len(events)))
    mine = firsts[(firsts["event"] == event) & firsts["task_id"].isin(tasks)].sort_values("task_id")
    rows = []
    for r in mine.itertuples(index=False):
        reward = None if pd.isna(r.reward) else float(r.reward)
        tokens = None if pd.isna(r.output_tokens) else int(r.output_tokens)
        category, reason = fm.classify(trial_facts(r.locator, reward, tokens))
        rows.append({"event": event, "step": at["step"], "sample_step": r.step, "sample_id": r.sample_id,
                     "task_id": r.task_id, "capability": r.env, "category": category, "reason": reason})
    cache.shared.evict()
    return frames.typed(pd.DataFrame(rows), frames.FAILURE_MODES) if rows else frames.empty(frames.FAILURE_MODES)
