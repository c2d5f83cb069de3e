"""`rundash_core.views.trajectory` beyond filters: the stream's order, the new sorts, GRPO group stats,
the step strip's window, and one episode's facts, token usage and tools."""
from __future__ import annotations

import json

import pandas as pd

from rundash_core import frames
from rundash_core.frames import Message, ToolCall
from rundash_core.views import trajectory as tj


def _timed() -> pd.DataFrame:
    return frames.typed([
        {"sample_id": "a", "split": "train", "step": 1, "group_id": "g1", "reward": 0.0, "status": "stop", "arrival": 10.0,
         "duration_s": 3.0},
        {"sample_id": "b", "split": "train", "step": 1, "group_id": "g1", "reward": 1.0, "status": "length", "arrival": 30.0,
         "duration_s": 1.0, "ok": False},
        {"sample_id": "c", "split": "train", "step": 2, "group_id": "g2", "reward": 0.5, "status": "stop", "arrival": 20.0,
         "duration_s": 2.0},
        {"sample_id": "d", "split": "eval", "step": 2, "group_id": "g2", "reward": 0.5, "status": "stop", "arrival": None},
        {"sample_id": "e", "split": "eval", "step": 2, "group_id": None, "reward": 0.9, "status": None, "arrival": None},
    ], frames.SAMPLES)


def test_stream_order_sorts_and_status():
    s = _timed()
    assert tj.newest_first(s)["sample_id"].tolist() == ["b", "c", "a", "e", "d"]  # untimed: listed order reversed
    assert tj.sort_samples(s, "arrival_asc")["sample_id"].tolist() == ["a", "c", "b", "d", "e"]
    assert tj.sort_samples(s, "duration_desc")["sample_id"].tolist() == ["a", "c", "b", "d", "e"]
    assert tj.sort_samples(s, "group")["sample_id"].tolist() == ["b", "a", "c", "d", "e"]  # best first in a group
    assert tj.filter_samples(s, status="stop")["sample_id"].tolist() == ["a", "c", "d"]
    assert set(tj.SORT_LABELS) == set(tj.SORTS) and tj.SORT_LABELS["duration_desc"] == "duration ↓"


def test_group_stats_and_step_window():
    g = tj.group_stats(_timed())
    assert g["group_id"].tolist() == ["g1", "g2"]  # widest spread first
    one = g.set_index("group_id").loc["g1"]
    assert (one["n"], one["reward_min"], one["reward_max"], one["reward_mean"], one["reward_std"], one["errors"]) == (
        2, 0.0, 1.0, 0.5, 0.5, 1)
    assert g.set_index("group_id").loc["g2", "reward_std"] == 0.0
    assert tj.group_stats(_timed().assign(group_id=None)).empty
    opts = list(range(0, 40, 2))
    assert tj.step_window(opts, 20, 5) == [16, 18, 20, 22, 24]
    assert tj.step_window(opts, None, 5) == opts[-5:] and tj.step_window(opts, 0, 5) == opts[:5]
    assert tj.step_window([1, 2], 1, 5) == [1, 2]


def test_episode_facts_usage_and_tools():
    msgs = [Message("system", "s"), Message("user", "q"),
            Message("assistant", "", tool_calls=[ToolCall("python", "{}", "c1"), ToolCall("python", "{}", "c2"),
                                                 ToolCall("bash", "ls", "c3")]),
            Message("tool", "1", tool_call_id="c1"), Message("tool", "2", tool_call_id="c3"), Message("assistant", "ok")]
    trace = {"calls": [{"usage": {"prompt_tokens": 100, "completion_tokens": 20, "cached_input_tokens": 50}},
                       {"usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 7}}}],
             "tools": [{"name": "python", "description": "Run code", "parameters": {"type": "object"}},
                       {"type": "function", "function": {"name": "bash", "parameters": None}},
                       {"name": "python", "description": "again"}]}
    ep = frames.Episode("s", "r", messages=msgs, raw={"traces": [trace], "in_flight": {"stage": "running"}})
    assert tj.episode_facts(ep) == {"messages": 6, "turns": 2, "tool calls": 3, "tool results": 2, "model calls": 2,
                                    "stage": "in flight: running"}
    assert tj.token_usage(ep) == {"prompt": 110, "completion": 25, "cached input": 57}
    bare = frames.Episode("s", "r", messages=msgs)
    assert tj.token_usage(bare, {"input_tokens": 12, "output_tokens": pd.NA}) == {"input": 12}
    defs = tj.tool_definitions(ep)
    assert [d["name"] for d in defs] == ["python", "bash"] and defs[0]["description"] == "Run code"
    assert json.loads(defs[0]["parameters"]) == {"type": "object"} and defs[1]["parameters"] == ""
    usage = tj.tool_usage(msgs).set_index("tool")
    assert usage.loc["python", "calls"] == 2 and usage.loc["python", "answered"] == 1 and usage.loc["bash", "answered"] == 1
    assert usage.loc["python", "messages"] == "3" and tj.tool_usage([]).empty
