"""The Trajectory page's modes and views through AppTest: stream (newest first, arrival histogram)
and step (strip, groups) modes, filters, the episode's side panel, Timeline and Tools views, Relax
markup highlighting, in-flight episodes, prev/next, deep links, and run text kept inert."""
from __future__ import annotations

import json
import re
from pathlib import Path

import rundash_core as rd
from rundash_core.views import trajectory as tj

from helpers import REPO, open_page
from helpers.hostile import XSS_MARKUP
from helpers.pages import code_values, first_run_of_kind, sample_table

PAGE = "pages/trajectory.py"


def _prime(runs, name_part: str = "7c1e9a42"):
    row = runs[runs["run_id"].str.contains(name_part)].iloc[0]
    return row["run_id"], rd.open_run(row["path"], run_id=row["run_id"])


def test_stream_mode_is_newest_first_with_an_arrival_histogram(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = _prime(runs)
    samples = run.samples()
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    assert at.segmented_control(key="mode").value == "stream"
    table = sample_table(at)
    assert len(table) == len(samples)
    arrivals = table["arrival"].dropna()
    assert len(arrivals) == samples["arrival"].notna().sum() > 0 and arrivals.is_monotonic_decreasing
    assert table["sample_id"].iloc[0] == samples.sort_values("arrival")["sample_id"].iloc[-1]
    hist = [c for c in at.get("plotly_chart") if "arrivals" in c.proto.spec]
    assert hist, "the arrival-time histogram"
    # sort by duration, then by group (one prompt's samples together)
    at.selectbox(key="sort").set_value("duration_desc").run()
    assert sample_table(at)["duration_s"].dropna().is_monotonic_decreasing
    at.selectbox(key="sort").set_value("group").run()
    groups = sample_table(at)["group_id"].tolist()
    assert groups == sorted(groups, key=lambda g: (g is None, g))
    # filters: kind and errors only
    at.selectbox(key="split").set_value("eval").run()
    assert set(sample_table(at)["split"]) == {"eval"}
    at.selectbox(key="split").set_value(None).run()
    at.toggle(key="tr_errors").set_value(True).run()
    assert len(sample_table(at)) == int(tj.has_error(samples).sum()) > 0


def test_step_mode_strip_and_groups(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = _prime(runs)
    steps = run.steps()
    evals = set(steps[steps["eval"].fillna(False).astype(bool)]["step"].astype(int))
    s = int(steps["step"].iloc[-3])
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "mode": "step", "step": str(s)})
    assert at.segmented_control(key="mode").value == "step"
    assert at.segmented_control(key="tr_strip").value == s  # the strip shows the step of the URL
    table = sample_table(at)
    assert set(table["step"]) == {s} and len(table) == len(run.samples(step=s))
    assert table["group_id"].tolist() == sorted(table["group_id"].tolist())  # step mode: by group
    other = int(steps["step"].iloc[-5])
    at.segmented_control(key="tr_strip").set_value(other).run()
    assert at.query_params["step"] == str(other) and set(sample_table(at)["step"]) == {other}
    if evals:
        e = max(evals)
        assert at.segmented_control(key="tr_strip").format_func(e).endswith("◆")
    # group view: per group stats next to the samples
    at.toggle(key="tr_groups").set_value(True).run()
    stats = [d.value for d in at.dataframe if "reward_std" in getattr(d.value, "columns", [])]
    want = tj.group_stats(run.samples(step=other))
    assert len(stats) == 1 and sorted(stats[0]["group_id"]) == sorted(want["group_id"])
    assert any("reward spread" in c.proto.spec for c in at.get("plotly_chart"))
    # choosing a group shows all its samples together, best first
    g = want["group_id"].iloc[0]
    at.selectbox(key="tr_group").set_value(g).run()
    table = sample_table(at)
    assert set(table["group_id"]) == {g} and len(table) == int(want.set_index("group_id").at[g, "n"])
    assert table["reward"].dropna().is_monotonic_decreasing


def test_prev_next_sample(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "relax")
    ids = run.samples()["sample_id"].tolist()
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": ids[1], "sort": "reward_desc"})
    order = sample_table(at)["sample_id"].tolist()
    k = order.index(ids[1])
    at.button(key="tr_next_sample").click().run()
    assert at.query_params["sample"] == order[k + 1]
    assert any(f"### Sample `{order[k + 1]}`" in m.value for m in at.markdown)  # that episode is shown
    at.button(key="tr_prev_sample").click().run()
    at.button(key="tr_prev_sample").click().run()
    assert at.query_params["sample"] == (order[k - 1] if k > 0 else order[0])
    assert at.button(key="tr_prev_sample").disabled == (k <= 1)
    assert not at.exception


def test_status_filter(monkeypatch, demo_runs, tables):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "relax")
    samples = run.samples()
    status = samples["status"].dropna().value_counts().index[-1]
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    config = next(kw["column_config"] for data, kw in tables if "sample_id" in getattr(data, "columns", [])
                  and "locator" in data.columns)
    empty = {c for c in samples.columns if samples[c].isna().all()}
    assert "arrival" in empty and {c for c, v in config.items() if v is None} == empty | {"locator"}
    at.selectbox(key="tr_status").set_value(status).run()
    assert set(sample_table(at)["status"]) == {status} and len(sample_table(at)) == int((samples["status"] == status).sum())


def test_deep_link_with_step_opens_the_same_transcript(monkeypatch, demo_runs):
    """`?run=&step=&sample=` in a fresh session: the step's table and the sample's messages."""
    folder, runs = demo_runs
    run_id, run = _prime(runs)
    samples = run.samples()
    row = samples[samples["turns"].fillna(0) > 1].iloc[-1]
    ep = run.episode(row["sample_id"])
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "step": str(row["step"]), "sample": row["sample_id"]})
    assert at.segmented_control(key="mode").value == "step" and set(sample_table(at)["step"]) == {row["step"]}
    codes = code_values(at)
    assert all(m.content.strip() in codes for m in ep.messages if m.content.strip())
    assert any(m.reasoning for m in ep.messages)
    assert any(e.label == "Reasoning" and not e.proto.expanded for e in at.expander)  # reasoning collapsed
    assert row["sample_id"] in codes and ep.ids["episode"] in codes
    side = {c.value for c in at.caption}
    assert {"REWARDS BY COMPONENT", "TURNS AND TOOLS", "TOKEN USAGE", "TIMING"} <= side
    facts = [d.value for d in at.dataframe if list(getattr(d.value, "columns", [])) == ["count", "value"]][0]
    got = dict(zip(facts["count"], facts["value"]))
    assert got["turns"] == str(sum(m.role == "assistant" for m in ep.messages))
    assert got["tool calls"] == str(sum(len(m.tool_calls) for m in ep.messages))
    assert any(e.label.startswith("Tool definitions") for e in at.expander)
    # expand all opens every message
    at.toggle(key="tr_expand").set_value(True).run()
    assert all(e.proto.expanded for e in at.expander if e.label[:1].isdigit())
    # the Timeline and Tools views
    at.segmented_control(key="tr_view").set_value("timeline").run()
    assert any(c.key == "tr_timeline" or "timeline" in c.proto.spec for c in at.get("plotly_chart"))
    lanes = [d.value for d in at.dataframe if "lane" in getattr(d.value, "columns", [])][0]
    assert {"phases", "model", "tools"} <= set(lanes["lane"])
    at.segmented_control(key="tr_view").set_value("tools").run()
    usage = [d.value for d in at.dataframe if "answered" in getattr(d.value, "columns", [])][0]
    assert int(usage["calls"].sum()) == sum(len(m.tool_calls) for m in ep.messages)


def test_relax_markup_is_highlighted_and_pads_masked(monkeypatch, demo_runs):
    folder, runs = demo_runs
    run_id, run = first_run_of_kind(runs, "relax")
    sid = run.samples()["sample_id"].iloc[0]
    ep = run.episode(sid)
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid})
    bodies = [h.value for h in at.get("html")]
    assert len(bodies) == sum(1 for m in ep.messages if m.content and "<|im_" in m.content + "<|im_")
    assert any('class="rd-markup"' in b and 'class="rd-think"' in b for b in bodies)
    assert all("<|im_start|>" not in b for b in bodies)  # escaped: &lt;|im_start|&gt;
    assert ep.messages[0].content.strip() in code_values(at)  # the raw text is still copyable
    at.text_input(key="tr_mask").input("(").run()
    assert any("Invalid regex" in e.value for e in at.error)
    at.toggle(key="tr_markup").set_value(False).run()
    assert not at.get("html")


def test_in_flight_episodes_are_listed_and_open(monkeypatch, tmp_path):
    """The demo's live run after one writer tick: its in-flight rows above the stream, and one
    opened by a deep link (its partial transcript)."""
    import time

    from rundash_core import demo
    from rundash_core.demo import live as writer

    folder = demo.ensure_demo(tmp_path / "demo")
    writer._LiveRun(folder).tick(time.time())
    runs = rd.discover([folder])
    run_id, run = _prime(runs)
    live = run.live_samples()
    assert len(live) == 2
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    assert any("IN FLIGHT · 2" in c.value for c in at.caption)
    shown = [d.value for d in at.dataframe if "status" in getattr(d.value, "columns", [])
             and "sample_id" in d.value.columns and "locator" not in d.value.columns][0]
    assert sorted(shown["sample_id"]) == sorted(live["sample_id"])
    assert all(s.startswith("in flight: ") for s in shown["status"])
    at.toggle(key="paused").set_value(True).run()  # pausing keeps the list, stops the refresh
    assert at.toggle(key="paused").value and any("IN FLIGHT · 2" in c.value for c in at.caption)
    flying = next(s for s in live["sample_id"] if not s.startswith("live-p-"))
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": flying})
    ep = run.episode(flying)
    assert all(m.content.strip() in code_values(at) for m in ep.messages if m.content.strip())
    facts = [d.value for d in at.dataframe if list(getattr(d.value, "columns", [])) == ["count", "value"]][0]
    assert dict(zip(facts["count"], facts["value"]))["stage"] == "in flight: running"


def test_a_stopped_runs_leftover_in_flight_episodes_are_called_unfinished(monkeypatch, tmp_path):
    """In-flight files left by a run that stopped will never land: not "in flight" any more."""
    import os
    import time

    from rundash_core import demo
    from rundash_core.demo import live as writer

    folder = demo.ensure_demo(tmp_path / "demo")
    writer._LiveRun(folder).tick(time.time())
    run_id, run = _prime(rd.discover([folder]))
    old = time.time() - 3 * 86400  # the writer went quiet days ago
    for where, _dirs, names in os.walk(run.path):
        for name in names:
            os.utime(os.path.join(where, name), (old, old))
    run = rd.open_run(run.path, run_id=run_id)
    assert run.overview().status != "running" and len(run.live_samples()) == 2
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id})
    assert any("UNFINISHED · 2" in c.value and "never landed" in c.value for c in at.caption)
    assert not any("IN FLIGHT" in c.value for c in at.caption)


def test_run_text_is_inert_everywhere(monkeypatch, tmp_path):
    """`<script>`, `<img onerror=…>` and markdown/HTML injection through message content, reasoning,
    a tool name, a tool's output, the task id and the env: shown as text (st.code, escaped markdown,
    escaped HTML), never live."""
    import time

    from rundash_core import demo
    from rundash_core.demo import live as writer

    folder = demo.ensure_demo(tmp_path / "demo")
    writer._LiveRun(folder).tick(time.time())
    runs = rd.discover([folder])
    run_id, run = _prime(runs)
    flying = next(s for s in run.live_samples()["sample_id"] if not s.startswith("live-p-"))
    path = Path(run.live_samples().set_index("sample_id").loc[flying, "locator"])
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    lines[0]["dispatch"]["task"] = XSS_MARKUP
    lines[0]["dispatch"]["env"] = XSS_MARKUP
    nodes = lines[1]["nodes"]
    nodes[0]["message"]["content"] = XSS_MARKUP + "<|im_start|>user " + XSS_MARKUP
    nodes[-1]["message"]["reasoning_content"] = XSS_MARKUP
    nodes[-1]["message"]["tool_calls"][0]["name"] = XSS_MARKUP
    call_id = nodes[-1]["message"]["tool_calls"][0]["id"]
    lines[2]["pending"] = [{"role": "tool", "tool_call_id": call_id, "content": XSS_MARKUP}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": flying})
    codes = code_values(at)
    assert sum(XSS_MARKUP in c for c in codes) >= 3  # reasoning, tool output (twice: paired and its own), raw text
    spans = [m.value for m in [*at.markdown, *at.caption]]
    assert any(f"`{XSS_MARKUP}`" in v for v in spans)  # the tool name: an inline code span (shown literally)
    for v in spans:  # outside code spans, every `<`, `[`, `]` of the payload is backslash-escaped
        bare = re.sub(r"(`+)(.+?)\1", "", v)
        assert not re.search(r"(?<!\\)<(?:img|script)|(?<!\\)\]\(javascript", bare), v
    assert any("\\<img" in v for v in spans)  # (the env in the side panel's caption, escaped)
    for e in at.expander:  # labels are markdown too: escaped the same way
        assert not re.search(r"(?<!\\)<(?:img|script)|(?<!\\)\]\(javascript", e.label), e.label
    bodies = [h.value for h in at.get("html")]
    assert bodies and all("<script" not in b and "<img" not in b for b in bodies)
    assert any("&lt;script&gt;" in b for b in bodies)
    assert not (REPO / "pages" / "_episode.py").read_text().count("unsafe_allow_html")
    assert not (REPO / "pages" / "_transcript.py").read_text().count("unsafe_allow_html")
