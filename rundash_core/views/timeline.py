"""The Timeline view of one episode: lanes of phases, model calls and tool calls against time.

From what an `Episode` carries: prime-rl traces (in `raw["traces"]`) give absolute times, the
phases of `timing` (boot, setup, agent, finalize, scoring: `{start, end}` epoch seconds) and each
model call's `time {start, end}`; a tool runs between the call that asked for it (finish reason
`tool_calls`) and the next call (or the end of the agent phase). Sources with only phase durations
(Harbor's result.json) get their phases laid end to end, in order, flagged `sequential`.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rundash_core.frames import Episode
from rundash_core.io.jsonl import dict_or_empty
from rundash_core.numbers import finite_float

PHASES = ("boot", "setup", "agent", "finalize", "scoring")
LANES = ("phases", "model", "tools")


@dataclass(frozen=True)
class Span:
    lane: str      # 'phases' | 'model' | 'tools' (prefixed 'agent/' when an episode has several traces)
    label: str
    start: float   # seconds since the episode's first span
    end: float
    detail: str = ""


def _trace_spans(trace: dict, prefix: str, messages) -> list[tuple[str, str, float, float, str]]:
    out = []
    timing = dict_or_empty(trace.get("timing"))
    for phase in PHASES:
        span = dict_or_empty(timing.get(phase))
        s, e = finite_float(span.get("start")), finite_float(span.get("end"))
        if s and e and e >= s:
            out.append((prefix + "phases", phase, s, e, ""))
    agent_end = finite_float((timing.get("agent") or {}).get("end")) if isinstance(timing.get("agent"), dict) else None
    calls = [c for c in trace.get("calls") or [] if isinstance(c, dict) and isinstance(c.get("time"), dict)
             and finite_float(c["time"].get("start")) and finite_float(c["time"].get("end"))]
    calls.sort(key=lambda c: c["time"]["start"])
    for i, c in enumerate(calls):
        s, e = finite_float(c["time"]["start"]), finite_float(c["time"]["end"])
        usage = dict_or_empty(c.get("usage"))
        done = finite_float(usage.get("completion_tokens"))
        detail = " · ".join(x for x in (f"finish: {c.get('finish_reason')}" if c.get("finish_reason") else "",
                                         f"{int(done)} tokens out" if done is not None else "",
                                         "error" if c.get("error") else "") if x)
        out.append((prefix + "model", f"call {i + 1}", s, e, detail))
        node = c.get("node")
        asked = [t.name for t in messages[node].tool_calls] if messages is not None and isinstance(node, int) \
            and 0 <= node < len(messages) else []
        if c.get("finish_reason") == "tool_calls" or asked:
            until = finite_float(calls[i + 1]["time"]["start"]) if i + 1 < len(calls) else agent_end
            if until and until > e:
                out.append((prefix + "tools", ", ".join(asked) or "tools", e, until, f"after call {i + 1}"))
    return out


def episode_spans(episode: Episode) -> tuple[list[Span], bool]:
    """(spans relative to the first one, sequential): absolute times when the source has them,
    else the phase durations of `episode.timing` laid end to end (sequential=True)."""
    traces = [t for t in episode.raw.get("traces") or [] if isinstance(t, dict)] if isinstance(episode.raw, dict) else []
    several = len(traces) > 1
    raw = []
    for k, t in enumerate(traces):
        agent = dict_or_empty(t.get("agent"))
        prefix = f"{agent.get('name') or k}/" if several else ""
        raw += _trace_spans(t, prefix, None if several else episode.messages)
    if raw:
        t0 = min(start for _lane, _label, start, _end, _detail in raw)
        return [Span(lane, label, s - t0, e - t0, d) for lane, label, s, e, d in raw], False
    spans, at = [], 0.0
    for phase, seconds in episode.timing.items():
        if "." in phase or phase == "total" or finite_float(seconds) is None or seconds < 0:
            continue
        spans.append(Span("phases", phase, at, at + seconds))
        at += seconds
    return spans, True


def spans_frame(spans: list[Span]) -> pd.DataFrame:
    """The spans as a table (lane, label, start_s, end_s, duration_s, detail), in time order."""
    rows = [{"lane": s.lane, "label": s.label, "start_s": s.start, "end_s": s.end, "duration_s": s.end - s.start,
             "detail": s.detail} for s in spans]
    out = pd.DataFrame(rows, columns=["lane", "label", "start_s", "end_s", "duration_s", "detail"])
    return out.sort_values(["start_s", "lane"], kind="stable").reset_index(drop=True)
