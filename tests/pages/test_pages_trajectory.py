"""The Trajectory page through AppTest on the demo runs, and its helpers (`rundash_core.views.trajectory`)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.frames import Message, ToolCall
from rundash_core.views import trajectory as tj
from rundash_core.views import transcript_markup as tm

from helpers import REPO, open_page
from helpers.hostile import XSS_MARKUP
from helpers.pages import code_values, first_run_of_kind, sample_table

PAGE = "pages/trajectory.py"
ROOT = REPO


def _first_content(ep) -> str:
    return next(m.content.strip() for m in ep.messages if m.content and m.content.strip())


@pytest.mark.parametrize("kind", ["relax", "swe-lego-rl"])
def test_deep_link_opens_the_episode(monkeypatch, demo_runs, kind):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, kind)
    samples = run.samples()
    sid = samples["sample_id"].iloc[len(samples) // 2]
    ep = run.episode(sid)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid})
    codes = code_values(at)
    assert _first_content(ep) in codes
    assert any(m.content.strip() in codes for m in ep.messages if m.role == "assistant" and m.content)
    reward = [m.value for m in at.metric if m.label == "Reward"]
    assert reward == [f"{ep.reward:.4g}"]
    assert sid in codes  # the id is copyable
    labels = [e.label for e in at.expander]
    entries = tm.transcript_entries(ep.messages)  # (a tool result is shown under its call)
    assert sum(1 for label in labels if label.split(" ")[0].rstrip(".\\").isdigit()) == len(entries)
    # the table is still there, unfiltered
    assert len(sample_table(at)) == len(samples)
    assert "locator" in sample_table(at).columns  # (hidden through column_config, not dropped)


def test_step_filter_and_prev_next(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "relax")
    steps = run.steps()["step"].astype(int).tolist()
    s = steps[1]
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "step": str(s)})
    assert len(sample_table(at)) == len(run.samples(step=s)) > 0
    assert set(sample_table(at)["step"]) == {s}
    at.button(key="tr_next").click().run()
    assert at.query_params["step"] == str(steps[2])
    assert len(sample_table(at)) == len(run.samples(step=steps[2]))
    at.selectbox(key="step").set_value(steps[0]).run()
    assert len(sample_table(at)) == len(run.samples(step=steps[0]))
    assert at.query_params["step"] == str(steps[0])
    # eval steps are marked in the picker
    ev = run.steps()
    ev_step = int(ev[ev["eval"].fillna(False).astype(bool)]["step"].iloc[0])
    assert at.selectbox(key="step").format_func(ev_step).endswith("eval")


def test_split_and_sort_are_in_the_url(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "swe-lego-rl")
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "split": "train", "sort": "reward_asc"})
    table = sample_table(at)
    want = run.samples(split="train")
    assert len(table) == len(want) and set(table["split"]) == {"train"}
    assert table["reward"].dropna().is_monotonic_increasing
    at.selectbox(key="sort").set_value("output_tokens_desc").run()
    assert at.query_params["sort"] == "output_tokens_desc"
    assert sample_table(at)["output_tokens"].dropna().is_monotonic_decreasing


def test_transcript_search_filters_messages(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "swe-lego-rl")
    sid = run.samples()["sample_id"].iloc[0]
    ep = run.episode(sid)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid})
    n_all = len([e for e in at.expander if e.label[:1].isdigit()])
    assert n_all == len(tm.transcript_entries(ep.messages)) > 2
    word = "separable"
    want = [i for i, m in enumerate(ep.messages) if word in tj.message_text(m).lower()]
    assert 0 < len(want) < len(ep.messages)
    at.text_input(key="tr_search").input(word.upper()).run()
    shown = [e.label for e in at.expander if e.label[:1].isdigit()]
    assert [int(label.split(".")[0].rstrip("\\")) - 1 for label in shown] == tm.transcript_entries(ep.messages, want)
    assert any(f"**{len(want)}** of {len(ep.messages)} messages" in c.value for c in at.caption)


def test_unknown_sample_warns_and_keeps_the_table(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "relax")
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": "no-such-sample"})
    assert any("no sample" in w.value for w in at.warning)
    assert len(sample_table(at)) == len(run.samples())
    assert not at.metric


def test_runs_without_samples_show_the_empty_state(monkeypatch, demo_runs, tmp_path):
    folder, runs = demo_runs
    # a run that could have samples but logged none
    empty = [(r, p) for r, p in zip(runs["run_id"], runs["path"])
             if (run := rd.open_run(p)).samples().empty and "samples" in run.capabilities]
    if empty:
        at = open_page(monkeypatch, folder, PAGE, {"run": empty[0][0]})
        assert any("has no samples" in i.value for i in at.info)
    plain = tmp_path / "plain"  # a verl log without generation dumps (the demo's has them)
    plain.mkdir()
    (plain / "sft.log").write_bytes((ROOT / "tests" / "data" / "verl" / "eh_gemma-2-2b-it-sft-0.411.log").read_bytes())
    at = open_page(monkeypatch, plain, PAGE, {"run": "sft"})
    assert (run := rd.open_run(plain / "sft.log")).samples().empty and "samples" not in run.capabilities
    assert any("has no samples" in i.value for i in at.info)
    assert not at.dataframe


def test_tokens_table_for_a_run_with_token_data(monkeypatch):
    """The real-writer prime-rl traces (shipped in tests/data) carry token streams."""
    folder = ROOT / "tests" / "data" / "prime-rl-traces"
    runs = rd.discover([folder])
    run_id, path = next((i, p) for i, p in zip(runs["run_id"], runs["path"]) if i.startswith("math-python"))
    run = rd.open_run(path, run_id=run_id)
    sid, ep = next((s, e) for s in run.samples()["sample_id"]
                   if isinstance((e := run.episode(s)).tokens, pd.DataFrame) and not e.tokens.empty)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid, "tokens": "true"})
    assert any(e.label.startswith("Tokens") for e in at.expander)
    assert any(len(d.value) == min(len(ep.tokens), 2000) and list(d.value.columns) == list(ep.tokens.columns)
               for d in at.dataframe)




def test_markup_in_a_transcript_stays_text(monkeypatch, tmp_path):
    """A Relax dump whose message content, tool name and env carry HTML/markdown: shown as code or
    escaped markdown; the page never allows unsafe HTML."""
    from rundash_core import demo

    assert "unsafe_allow_html" not in (ROOT / PAGE).read_text()
    assert "unsafe_allow_html" not in (ROOT / "rundash_core" / "views" / "trajectory.py").read_text()
    folder = demo.ensure_demo(tmp_path / "demo")
    runs = rd.discover([folder])
    run_id, run = first_run_of_kind(runs, "relax")
    sid = run.samples()["sample_id"].iloc[0]
    ep = run.episode(sid)
    target = _first_content(ep)
    # plant the payload in the sample's own line of the dump
    path, offset, length = frames.parse_line_locator(run.samples()["locator"].iloc[0])
    data = Path(path).read_bytes()
    line = data[offset:offset + length].decode()
    planted = json.dumps(target[:60])[1:-1]
    assert planted in line
    line = line.replace(planted, json.dumps(XSS_MARKUP)[1:-1], 1)
    Path(path).write_bytes(data[:offset] + line.encode() + data[offset + length:])
    from rundash_core import cache
    cache.shared.clear()
    ep2 = rd.open_run(run.path, run_id=run_id).episode(sid)
    assert any(XSS_MARKUP in m.content for m in ep2.messages)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid})
    assert any(XSS_MARKUP in c for c in code_values(at))  # shown literally in a code block
    for md in at.markdown:
        assert "<img" not in md.value and "<script" not in md.value
    # searching for the payload: its count caption escapes it
    at.text_input(key="tr_search").input("<script>").run()
    assert any("messages match" in c.value for c in at.caption)
    assert all("<script>" not in c.value or "`<script>`" in c.value for c in at.caption)


# rundash_core.views.trajectory ---------------------------------------------------------------------------
def _samples() -> pd.DataFrame:
    return frames.typed([
        {"sample_id": "a", "split": "train", "step": 1, "env": "m", "reward": 0.5, "advantage": 0.1,
         "ok": True, "output_tokens": 10},
        {"sample_id": "b", "split": "train", "step": 2, "env": "w", "reward": None, "advantage": -0.2,
         "ok": False, "output_tokens": 30},
        {"sample_id": "c", "split": "eval", "step": 2, "env": "m", "reward": 1.0, "advantage": None,
         "ok": True, "error": "timeout", "output_tokens": 20},
        {"sample_id": "d", "split": "eval", "step": None, "env": None, "reward": 0.0, "ok": None,
         "error": "  ", "output_tokens": None},
    ], frames.SAMPLES)


def test_filter_samples():
    s = _samples()
    assert tj.filter_samples(s)["sample_id"].tolist() == ["a", "b", "c", "d"]
    assert tj.filter_samples(s, step=2)["sample_id"].tolist() == ["b", "c"]
    assert tj.filter_samples(s, split="eval", step=2)["sample_id"].tolist() == ["c"]
    assert tj.filter_samples(s, env="m")["sample_id"].tolist() == ["a", "c"]
    assert tj.filter_samples(s, errors_only=True)["sample_id"].tolist() == ["b", "c"]
    assert tj.filter_samples(s, step=99).empty


def test_sort_samples():
    s = _samples()
    assert tj.sort_samples(s, "reward_desc")["sample_id"].tolist() == ["c", "a", "d", "b"]
    assert tj.sort_samples(s, "reward_asc")["sample_id"].tolist() == ["d", "a", "c", "b"]
    assert tj.sort_samples(s, "advantage_asc")["sample_id"].tolist() == ["b", "a", "c", "d"]
    assert tj.sort_samples(s, "output_tokens_desc")["sample_id"].tolist() == ["b", "c", "a", "d"]
    assert tj.sort_samples(s, None)["sample_id"].tolist() == ["a", "b", "c", "d"]
    assert tj.sort_samples(s, "bogus")["sample_id"].tolist() == ["a", "b", "c", "d"]


def test_steps_and_neighbours():
    steps = frames.typed({"step": [3, 5, 9, None], "samples": [1, 1, 1, 1], "reward_mean": [0, 0, 0, 0],
                          "eval": [False, True, None, True]}, frames.STEPS)
    opts, evals = tj.step_options(steps)
    assert opts == [3, 5, 9] and evals == {5}
    assert tj.neighbour(opts, 5, 1) == 9 and tj.neighbour(opts, 5, -1) == 3
    assert tj.neighbour(opts, 9, 1) == 9 and tj.neighbour(opts, 3, -1) == 3
    assert tj.neighbour(opts, None, 1) == 3 and tj.neighbour(opts, None, -1) == 9
    assert tj.neighbour([], None, 1) is None


def test_tool_pairing_and_search():
    msgs = [Message("user", "Sum the PRIMES"),
            Message("assistant", "", reasoning="use python", tool_calls=[ToolCall("python", '{"code": "1"}', "c1"),
                                                                         ToolCall("bash", "ls", "c2")]),
            Message("tool", "1060", tool_call_id="c1"),
            Message("tool", "again", tool_call_id="c1"),
            Message("assistant", "The answer is 1060")]
    assert tj.tool_results(msgs) == {"c1": 2}
    assert tj.tool_calls_by_id(msgs) == {"c1": (1, "python"), "c2": (1, "bash")}
    assert tj.search_messages(msgs, "") == [0, 1, 2, 3, 4]
    assert tj.search_messages(msgs, "primes") == [0]
    assert tj.search_messages(msgs, "1060") == [2, 4]
    assert tj.search_messages(msgs, "PYTHON") == [1]  # reasoning and tool names count
    assert tj.search_messages(msgs, "nothing here") == []
    assert tj.pretty_arguments('{"code": "1"}') == ('{\n  "code": "1"\n}', "json")
    assert tj.pretty_arguments("not json") == ("not json", "text")

