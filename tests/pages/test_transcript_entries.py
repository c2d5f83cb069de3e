"""The Transcript's entries (issue 23): a tool result is shown once, under its call (not again as a
message of its own), and a short entry opens expanded while a long one stays collapsed; on the
real demo runs through AppTest and on hand-made messages."""
from __future__ import annotations

import rundash_core as rd
from rundash_core.frames import Message, ToolCall
from rundash_core.views import transcript_markup as tm

from helpers import open_page

PAGE = "pages/trajectory.py"
LONG = "\n".join(f"line {k}: " + "x" * 60 for k in range(30))  # 30 lines, ~2,000 characters


def _entries(at) -> list:
    """The numbered message expanders of the Transcript view."""
    return [e for e in at.expander if e.label.split(" ")[0].rstrip(".\\").isdigit()]


def _number(entry) -> int:
    """The message number an entry's label starts with ("12\\. assistant · …": Markdown-escaped)."""
    return int(entry.label.split(" ")[0].rstrip(".\\"))


def _codes(block) -> list[str]:
    return [c.value.strip() for c in block.code]


def test_results_fold_under_their_calls():
    msgs = [Message("user", "Sum the primes"),
            Message("assistant", "", tool_calls=[ToolCall("python", '{"code": "1"}', "c1"), ToolCall("bash", "ls", "c2")]),
            Message("tool", "1060", tool_call_id="c1"),
            Message("tool", "again", tool_call_id="c1"),  # a second answer to c1: its own message
            Message("tool", "orphan", tool_call_id="zz"),  # no such call in the transcript
            Message("assistant", "The answer is 1060")]
    assert tm.folded_results(msgs) == {2: 1}
    assert tm.transcript_entries(msgs) == [0, 1, 3, 4, 5]
    assert tm.transcript_entries(msgs, [2, 5]) == [1, 5]  # a hit in a folded result shows its call
    assert tm.transcript_entries(msgs, []) == []


def test_short_entries_open_long_ones_stay_closed():
    msgs = [Message("user", "short question"), Message("assistant", LONG),
            Message("assistant", "x" * tm.OPEN_CHARS), Message("assistant", "x" * (tm.OPEN_CHARS + 1)),
            Message("assistant", "\n".join("y" * (tm.OPEN_LINES + 1))),
            Message("assistant", "", tool_calls=[ToolCall("bash", "cat big", "c1")]), Message("tool", LONG, tool_call_id="c1"),
            Message("assistant", "hi", reasoning=LONG)]  # reasoning has its own collapsed block
    assert [tm.opens_expanded(msgs, i) for i in tm.transcript_entries(msgs)] == [True, False, True, False, False, False, True]


def _lego(demo_runs):
    folder, runs = demo_runs
    row = runs[runs["kind"] == "swe-lego-rl"].iloc[0]
    return folder, row["run_id"], rd.open_run(row["path"], run_id=row["run_id"])


def test_a_tool_result_is_shown_once_under_its_call(monkeypatch, demo_runs):
    folder, run_id, run = _lego(demo_runs)
    sid = run.samples()["sample_id"].iloc[0]
    ep = run.episode(sid)
    folded = tm.folded_results(ep.messages)
    assert folded, "the demo trial answers its tool calls"
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid})
    entries = _entries(at)
    assert [int(e.label.split(".")[0].rstrip("\\")) - 1 for e in entries] == tm.transcript_entries(ep.messages)
    assert len(entries) == len(ep.messages) - len(folded)
    every = _codes(at)
    for result, call in folded.items():
        text = ep.messages[result].content.strip()
        assert every.count(text) == 1, text  # once on the page
        holder = next(e for e in entries if e.label.split(".")[0].rstrip("\\") == str(call + 1))
        assert text in _codes(holder)  # and that once under its call
        assert any(f"Result (message {result + 1})" in c.value for c in holder.caption)


def test_search_in_a_result_opens_its_call(monkeypatch, demo_runs):
    folder, run_id, run = _lego(demo_runs)
    sid = run.samples()["sample_id"].iloc[0]
    ep = run.episode(sid)
    result, call = next(iter(tm.folded_results(ep.messages).items()))
    word = ep.messages[result].content.split()[0]
    hits = [i for i, m in enumerate(ep.messages) if word.casefold() in (m.content or "").casefold()
            or word.casefold() in (m.reasoning or "").casefold()
            or any(word.casefold() in (c.name + c.arguments).casefold() for c in m.tool_calls)]
    at = open_page(monkeypatch, folder, PAGE, {"run": run_id, "sample": sid})
    at.text_input(key="tr_search").input(word).run()
    shown = [int(e.label.split(".")[0].rstrip("\\")) - 1 for e in _entries(at)]
    assert call in shown and result not in shown
    assert shown == tm.transcript_entries(ep.messages, hits)


def test_short_messages_open_and_long_ones_are_collapsed_on_the_page(monkeypatch, demo_runs):
    folder, runs = demo_runs
    row = runs[runs["kind"] == "relax"].iloc[0]
    run = rd.open_run(row["path"], run_id=row["run_id"])
    sid = run.samples()["sample_id"].iloc[0]
    ep = run.episode(sid)
    want = [tm.opens_expanded(ep.messages, i) for i in tm.transcript_entries(ep.messages)]
    assert True in want and False in want  # a long prompt, a short response
    at = open_page(monkeypatch, folder, PAGE, {"run": row["run_id"], "sample": sid})
    assert [e.proto.expanded for e in _entries(at)] == want
    at.toggle(key="tr_expand").set_value(True).run()
    assert all(e.proto.expanded for e in _entries(at))


def test_a_long_transcript_is_drawn_a_page_of_entries_at_a_time_and_search_reaches_every_page(monkeypatch, tmp_path):
    """A planted SWE-Lego-RL trial holds hundreds of entries: the page draws PAGE_ENTRIES of them
    (the browser took 9-14 s for all of them), the page picker shows the rest, a search finds a
    message on a later page."""
    from pages import _transcript

    from helpers.planted_runs import plant_lego

    planted = plant_lego(tmp_path / "runs")
    run = rd.open_run(planted.path)
    sid, ep = next((s, e) for s in run.samples()["sample_id"]
                   if len(tm.transcript_entries((e := run.episode(s)).messages)) > _transcript.PAGE_ENTRIES)
    entries = tm.transcript_entries(ep.messages)
    at = open_page(monkeypatch, tmp_path / "runs", PAGE, {"run": run.run_id, "sample": sid})
    assert [_number(e) for e in _entries(at)] == [i + 1 for i in entries[:_transcript.PAGE_ENTRIES]]
    picker = next(n for n in at.number_input if n.label.startswith("Page (of"))
    pages = -(-len(entries) // _transcript.PAGE_ENTRIES)
    assert picker.label == f"Page (of {pages})"
    picker.set_value(pages).run()
    assert [_number(e) for e in _entries(at)] == [i + 1 for i in entries[(pages - 1) * _transcript.PAGE_ENTRIES:]]
    last = ep.messages[entries[-1]]
    word = next(w for w in (last.content or "").split() if len(w) > 6)
    picker.set_value(1).run()
    at.text_input(key="tr_search").input(word).run()
    assert entries[-1] + 1 in [_number(e) for e in _entries(at)]
