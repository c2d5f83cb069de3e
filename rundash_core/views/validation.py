"""Validation shared by every kind: the val key grammars, the CoT share, breakdowns and deltas.

Val is **scored, not rewarded**: a validation number is what the verifier (or the eval's grader)
says about held-out tasks, a different number from a different grader than the reward the
trainer learns from. Everything here keeps the two apart (the page says "Val Score").

- verl keys (`docs/formats/verl.md` 9): `val-core|val-aux/<data_source>/<var>/<metric>`
  parsed from the right (a data source may hold `/`), `val-aux/num_turns/<stat>`, the legacy
  `val/test_score/<ds>` and `test_score/<ds>`, SFT `val/loss`.
- prime-rl keys (`prime-rl.md` 4.5): `eval/<env>/<subset>/<agent>/{avg@k,pass@k,pass^k}` and
  `eval/<env>/<subset>/<agent>/reward/mean`.
- eval samples (Relax `eval/N.jsonl`, any kind's non-train samples): per step and dataset.
- CoT share (`swe-lego-rl.md` 7): per response, chain-of-thought characters over response
  characters, where the response counts tool-call arguments as well as the visible text; per
  event over one fixed cohort of tasks, with its coverage.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import pandas as pd

from rundash_core import frames

LOW_COVERAGE = 0.5  # below this share of the cohort, an event's number is indicative only
COT_SAMPLE = 120  # the CoT cohort keeps the first this many tasks (sorted), as Lego-RL does
ALL = "all"  # the source of run-level numbers (turns, SFT loss)
THINK_END = "</think>"

_VERL = re.compile(r"^(?P<section>val-core|val-aux)/(?P<ds>.+)/(?P<var>[^/]+)/"
                   r"(?P<metric>(?:mean|std)@\d+|(?:best|worst|maj)@\d+/(?:mean|std))$")
_TURNS = re.compile(r"^val-aux/num_turns/(min|max|mean)$")
_LEGACY = re.compile(r"^(?:val/)?test_score/(?P<ds>.+)$")
_PLAIN = re.compile(r"^val/(?P<name>[^/]+)$")  # SFT val/loss, val/perplexity
_PRIME = re.compile(r"^eval/(?P<env>[^/]+)/(?P<subset>all|effective)/(?P<agent>[^/]+)/"
                    r"(?P<metric>(?:avg|pass)@\d+|pass\^\d+|reward/mean)$")


@dataclass(frozen=True)
class ValKey:
    """What one logged validation key says: for which source, which statistic, headline or not."""

    source: str
    var: str
    metric: str
    core: bool


def parse_val_key(key: str) -> ValKey | None:
    """verl's validation key grammar (verl spec 9), newest first; None for a key that is not one."""
    if (m := _TURNS.match(key)) is not None:
        return ValKey(ALL, "", f"num_turns/{m.group(1)}", False)
    if (m := _VERL.match(key)) is not None:
        return ValKey(m["ds"], m["var"], m["metric"], m["section"] == "val-core")
    if (m := _LEGACY.match(key)) is not None:
        return ValKey(m["ds"], "", "test_score", True)
    if (m := _PLAIN.match(key)) is not None:
        return ValKey(ALL, "", m["name"], m["name"] == "loss")
    return None


def parse_eval_key(key: str) -> ValKey | None:
    """prime-rl's eval keys: avg@k (all episodes) and pass@k (effective, binary rewards) are the
    headline numbers; pass^k and the mean reward are auxiliary."""
    m = _PRIME.match(key)
    if m is None:
        return None
    metric = m["metric"] if m["agent"] == "agent" else f"{m['agent']}/{m['metric']}"
    if m["metric"] == "reward/mean":
        metric = f"{m['subset']}/{metric}"
    return ValKey(m["env"], "", metric, m["metric"].startswith(("avg@", "pass@")))


def _statistic(k: ValKey, core_var: dict[str, str]) -> str:
    """The metric alone for the source's core variable (`mean@4`), `var/metric` otherwise."""
    return k.metric if k.var in ("", core_var.get(k.source)) else f"{k.var}/{k.metric}"


def metrics_validation(tidy: pd.DataFrame, *, parse=parse_val_key) -> pd.DataFrame:
    """`frames.VALIDATION` rows of every validation key a tidy metrics frame holds at a step
    (event `step N`, the last value logged per step and key); `parse` says which keys count."""
    stepped = tidy[tidy["step"].notna()]
    names = pd.unique(stepped["metric"].astype("str"))
    keys = {n: k for n in names if (k := parse(n)) is not None}
    if not keys:
        return frames.empty(frames.VALIDATION)
    core_var: dict[str, str] = {}
    for k in keys.values():  # verl spec 9.1: `acc` when the source has it, else `reward`
        if k.var == "acc" or (k.var == "reward" and k.source not in core_var):
            core_var[k.source] = k.var
    rows = stepped[stepped["metric"].astype("str").isin(keys)]
    rows = rows.assign(metric=rows["metric"].astype("str")).drop_duplicates(["step", "metric"], keep="last")
    parsed = [keys[m] for m in rows["metric"]]
    steps = rows["step"].astype("int64").to_numpy()
    out = pd.DataFrame({
        "event": [f"step {s}" for s in steps], "step": steps, "source": [k.source for k in parsed],
        "statistic": [_statistic(k, core_var) for k in parsed], "value": rows["value"].to_numpy(),
        "core": [k.core for k in parsed]})
    return frames.typed(out.sort_values("step", kind="stable"), frames.VALIDATION)


def samples_validation(samples: pd.DataFrame) -> pd.DataFrame:
    """Per step and dataset (`env`) of the non-train samples: the mean score (core) over the
    scored samples, and the share solved (score > 0)."""
    s = samples[(samples["split"] != "train") & samples["step"].notna() & samples["reward"].notna()]
    if s.empty:
        return frames.empty(frames.VALIDATION)
    s = s.assign(env=s["env"].astype(object).where(s["env"].notna(), ALL), solved=s["reward"] > 0)
    g = s.groupby(["step", "env"], sort=True)
    agg = g.agg(mean=("reward", "mean"), solved=("solved", "mean"), n=("reward", "size")).reset_index()
    rows = []
    for step, env, mean, solved, n in agg.itertuples(index=False):
        rows += [(f"step {step}", step, env, "mean", mean, n, True), (f"step {step}", step, env, "solved", solved, n, False)]
    return frames.typed(pd.DataFrame(rows, columns=list(frames.VALIDATION)), frames.VALIDATION)


# Reading a validation frame ------------------------------------------------------------------------
def events(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per event in the frame's order: event, step (NA: not paired with a trainer step)."""
    return frame.drop_duplicates("event")[["event", "step"]].reset_index(drop=True)


def event_label(event: str, step) -> str:
    """How an event is named on an axis: its trainer step when known, else its own name (a dump
    the log never paired is shown by folder, never at a guessed step)."""
    if pd.isna(step):
        return f"{event} (no trainer step)"
    return event if event == f"step {step}" else f"step {step} · {event}"


def series_names(frame: pd.DataFrame) -> pd.Series:
    return frame["source"].astype("str") + " · " + frame["statistic"].astype("str")


def headline_statistic(frame: pd.DataFrame) -> str | None:
    """The statistic Validation shows by default (its breakdown) and the check-in and the health
    rules report: the one reported for the most sources (per capability / data source), core
    statistics first on a tie, then by name (prime-rl's avg@k before pass@k)."""
    if frame.empty:
        return None
    per = frame.groupby("statistic")["source"].nunique()
    core = frame.groupby("statistic")["core"].any()
    order = sorted(per.index, key=lambda s: (-per[s], not core[s], s))
    return order[0]


def lower_is_better(statistic: str) -> bool:
    """A loss or perplexity (SFT `val/loss`) improves downwards; scores improve upwards."""
    return statistic.rsplit("/", 1)[-1] in ("loss", "perplexity")


@dataclass(frozen=True)
class Headline:
    """The headline statistic by trainer step: its name as shown ("avg@2", "mean@1 over 2
    sources"), the values (mean over the sources reporting it at a step) and which way is better."""

    label: str
    statistic: str
    values: pd.Series  # by step (int), ascending
    lower_is_better: bool

    @property
    def best_step(self) -> int:
        return int(self.values.idxmin() if self.lower_is_better else self.values.idxmax())

    @property
    def best(self) -> float:
        return float(self.values[self.best_step])


def headline(frame: pd.DataFrame) -> Headline | None:
    """The headline statistic's series over the events paired with a trainer step; None when the
    frame has none."""
    stat = headline_statistic(frame)
    if stat is None:
        return None
    rows = frame[(frame["statistic"] == stat) & frame["step"].notna() & frame["value"].notna()]
    if rows.empty:
        return None
    values = rows.groupby(rows["step"].astype("int64"))["value"].mean().sort_index().astype("float64")
    n = rows["source"].nunique()
    label = stat if n == 1 else f"{stat} over {n} sources"
    return Headline(label, stat, values.rename_axis("step"), lower_is_better(stat))


def breakdown(frame: pd.DataFrame, event: str, statistic: str) -> pd.DataFrame:
    """Per source (capability, data source, env) at `event`: value, n, the previous event's
    value of the same source and statistic, and the change (NA where a side is missing)."""
    prev = previous_event(frame, event)
    rows = frame[frame["statistic"] == statistic]
    now = rows[rows["event"] == event][["source", "value", "n"]].drop_duplicates("source", keep="last")
    before = rows[rows["event"] == prev][["source", "value"]].drop_duplicates("source", keep="last") \
        if prev is not None else pd.DataFrame({"source": pd.Series([], dtype="str"), "value": pd.Series([], dtype="float64")})
    out = now.merge(before.rename(columns={"value": "previous"}), on="source", how="left")
    out["change"] = out["value"] - out["previous"]
    return out.sort_values(["value", "source"], ascending=[False, True]).reset_index(drop=True)


def previous_event(frame: pd.DataFrame, event: str) -> str | None:
    order = list(events(frame)["event"])
    return order[order.index(event) - 1] if event in order and order.index(event) > 0 else None


# CoT share (swe-lego-rl.md 7) -------------------------------------------------------------------------
def _text(content) -> str:
    """A message's visible text: the string, or its list parts' `text` joined; "" for null."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _arguments(arguments) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    return json.dumps(arguments, ensure_ascii=False)  # (what Lego-RL counts: Python's separators)


def message_cot(messages: list) -> dict | None:
    """SWE-Lego-RL spec 7.1 over OpenAI chat messages: turns (assistant messages), cot_chars (text before
    `</think>`), tool_chars (tool-call arguments), resp_chars = visible text + tool arguments.
    Counting the text alone would leave out the patches a coding agent writes as arguments."""
    if not isinstance(messages, list):
        return None
    turns = cot = tool = resp = 0
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        turns += 1
        c = _text(m.get("content"))
        resp += len(c)
        if THINK_END in c:
            cot += len(c.split(THINK_END, 1)[0])
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict):
                fn = call.get("function")
                tool += len(_arguments(fn.get("arguments") if isinstance(fn, dict) else None))
    return {"turns": turns, "cot_chars": cot, "tool_chars": tool, "resp_chars": resp + tool}


def fixed_cohort(task_events: pd.DataFrame, n_events: int) -> list[str]:
    """The tasks present in at least half of the events (SWE-Lego-RL spec 6: appeared·2 ≥ events), sorted:
    stragglers that leaked into one dump are left out. `task_events`: task_id, event columns."""
    if task_events.empty or n_events == 0:
        return []
    appeared = task_events.drop_duplicates(["task_id", "event"]).groupby("task_id")["event"].size()
    return sorted(str(t) for t in appeared[appeared * 2 >= n_events].index)


def cot_share(event_list: pd.DataFrame, trials: pd.DataFrame, cohort: list[str], *,
              sample: int = COT_SAMPLE) -> pd.DataFrame:
    """`frames.VAL_COT` per event (SWE-Lego-RL spec 7.2) over the first `sample` tasks of the cohort.

    `event_list`: event, step in display order; `trials`: event, task_id and the 7.1 counts of
    the first copy of each task (rows without counts do not count). Per event: cot_ratio = mean
    over tasks of cot/resp, cot_ratio_weighted = Σcot / Σresp, means of the chars and turns,
    n = tasks kept (resp_chars > 0), coverage = n / cohort_size, low_coverage below one half."""
    cohort = list(cohort)[: max(int(sample), 1)]
    wanted = set(cohort)
    kept = trials[trials["task_id"].isin(wanted) & (trials["resp_chars"].fillna(0) > 0)]
    kept = kept.drop_duplicates(["event", "task_id"])
    rows = []
    for event, step in event_list[["event", "step"]].itertuples(index=False):
        mine = kept[kept["event"] == event]
        n = len(mine)
        cot, resp = mine["cot_chars"].astype("float64"), mine["resp_chars"].astype("float64")
        coverage = n / len(cohort) if cohort else 0.0
        rows.append({"event": event, "step": step,
                     "cot_ratio": float((cot / resp).mean()) if n else math.nan,
                     "cot_ratio_weighted": float(cot.sum() / resp.sum()) if n else math.nan,
                     "cot_chars": float(cot.mean()) if n else math.nan, "resp_chars": float(resp.mean()) if n else math.nan,
                     "turns": float(mine["turns"].astype("float64").mean()) if n else math.nan,
                     "n": n, "cohort_size": len(cohort), "coverage": coverage,
                     "low_coverage": bool(coverage < LOW_COVERAGE)})
    return frames.typed(pd.DataFrame(rows), frames.VAL_COT) if rows else frames.empty(frames.VAL_COT)


def cot_delta(cot: pd.DataFrame) -> float | None:
    """First→last change of the per-task CoT share over the events that have one."""
    have = cot["cot_ratio"].dropna()
    return float(have.iloc[-1] - have.iloc[0]) if len(have) >= 2 else None


def coverage_note(n: int, cohort_size: int) -> str:
    """The tooltip of a low-coverage point (SWE-Lego-RL spec 7.2)."""
    return f"{n}/{cohort_size} tasks (low coverage — indicative only)"
