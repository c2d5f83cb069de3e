"""The Timeline lanes of one episode (`rundash_core.views.timeline`): phases, model calls and the tool time
between calls, from a crafted trace and from the real-writer prime-rl records in tests/data."""
from __future__ import annotations

import pytest

import rundash_core as rd
from rundash_core.frames import Episode, Message, ToolCall
from rundash_core.views import timeline, trajectory_charts

from helpers import DATA

REAL = DATA / "prime-rl-traces" / "math-python+wiki-search--qwen3-4b--0b45f1ec"


def _episode() -> Episode:
    trace = {"timing": {"start": 100.0, "boot": {"start": 100.0, "end": 100.5}, "setup": {"start": 100.5, "end": 101.0},
                        "agent": {"start": 101.0, "end": 110.0, "model": {"duration": 5.0}},
                        "finalize": {"start": 0.0, "end": 0.0}},  # (not reached: left out)
             "calls": [{"node": 3, "finish_reason": "stop", "usage": {"completion_tokens": 7}, "time": {"start": 108.0, "end": 109.0}},
                       {"node": 1, "finish_reason": "tool_calls", "usage": {"completion_tokens": 40},
                        "time": {"start": 101.0, "end": 104.0}}]}
    msgs = [Message("user", "q"), Message("assistant", "", tool_calls=[ToolCall("python", "{}", "c1"), ToolCall("bash", "", "c2")]),
            Message("tool", "1", tool_call_id="c1"), Message("assistant", "done")]
    return Episode("s", "r", messages=msgs, raw={"traces": [trace]})


def test_lanes_from_a_trace():
    spans, sequential = timeline.episode_spans(_episode())
    assert not sequential
    got = [(s.lane, s.label, s.start, s.end) for s in spans]
    assert ("phases", "boot", 0.0, 0.5) in got and ("phases", "setup", 0.5, 1.0) in got
    assert ("phases", "agent", 1.0, 10.0) in got and not any(s.label == "finalize" for s in spans)
    assert ("model", "call 1", 1.0, 4.0) in got and ("model", "call 2", 8.0, 9.0) in got  # in time order
    # the tools ran from the call that asked for them to the next call, named from its message
    assert ("tools", "python, bash", 4.0, 8.0) in got
    assert [s.lane for s in spans].count("tools") == 1
    frame = timeline.spans_frame(spans)
    assert frame["start_s"].is_monotonic_increasing and (frame["duration_s"] >= 0).all()
    assert "finish: tool_calls · 40 tokens out" in set(frame["detail"])
    fig = trajectory_charts.timeline_figure(spans)
    assert {t.y[0] for t in fig.data} == {"phases", "model", "tools"}


def test_only_durations_are_laid_end_to_end():
    ep = Episode("s", "r", timing={"environment_setup": 2.0, "agent_execution": 10.0, "agent.model": 3.0,
                                   "verifier": 1.5, "total": 14.0})
    spans, sequential = timeline.episode_spans(ep)
    assert sequential
    assert [(s.label, s.start, s.end) for s in spans] == [("environment_setup", 0.0, 2.0),
                                                         ("agent_execution", 2.0, 12.0), ("verifier", 12.0, 13.5)]
    assert timeline.episode_spans(Episode("s", "r")) == ([], True)
    assert trajectory_charts.timeline_figure([]) is None


@pytest.mark.parametrize("kind", ["tool-use", "any"])
def test_real_prime_rl_episodes(kind):
    run = rd.open_run(REAL)
    samples = run.samples()
    checked = 0
    for sid in samples["sample_id"]:
        ep = run.episode(sid)
        if kind == "tool-use" and not any(m.tool_calls for m in ep.messages):
            continue
        spans, sequential = timeline.episode_spans(ep)
        calls = [c for t in ep.raw["traces"] for c in t.get("calls") or [] if isinstance(c.get("time"), dict)]
        if not calls:
            continue
        assert not sequential
        assert sum(1 for s in spans if s.lane.endswith("model")) == len(calls)
        assert min(s.start for s in spans) == 0.0 and all(s.end >= s.start for s in spans)
        if kind == "tool-use":
            assert any(s.lane.endswith("tools") for s in spans)
        checked += 1
        if checked >= 5:
            break
    assert checked > 0
