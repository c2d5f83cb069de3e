"""The terminal view's text rules, without textual: the pad-token mask, `<think>`/tool-call
highlighting, search marks, sparklines and plots, the metrics rows, the card, one sample's text and
the log tail (over a `frames.LOG_LINES` frame built here)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import frames
from rundash_core.charts.series import series_index
from rundash_core.tui import highlight as hl
from rundash_core.tui.plots import BARS, column_plot, format_value, metric_rows, sparkline
from rundash_core.tui.views import card_doc, filter_log_lines, log_levels, logs_doc, run_rows, sample_doc, split_transcript

from helpers.tui import log_frame


def styled(doc_or_text, spans, style):
    text = doc_or_text if isinstance(doc_or_text, str) else doc_or_text.text
    return [text[a:b] for a, b, s in spans if s == style]


# Mask -----------------------------------------------------------------------------------------------
def test_default_mask_turns_each_pad_token_into_a_star_and_empty_disables_it():
    mask, error = hl.compile_mask(None)
    assert error is None
    text = "look: <|vision_start|>" + "<|image_pad|>" * 5 + "<|vision_end|> and <|audio_comp_pad|><|imgpad|>"
    assert hl.mask_text(text, mask) == "look: <|vision_start|>*****<|vision_end|> and **"
    assert hl.compile_mask("") == (None, None)
    assert hl.mask_text(text, None) == text
    custom, _ = hl.compile_mask(r"\d+")
    assert hl.mask_text("step 12 of 300, ünïcode 7", custom) == "step * of *, ünïcode *"


def test_a_bad_mask_regex_is_refused_with_a_reason():
    mask, error = hl.compile_mask("(a")
    assert mask is None and error.startswith("invalid regex")
    mask, error = hl.compile_mask("(?=x)")
    assert mask is None and "look-around" in error


# Highlighting ---------------------------------------------------------------------------------------
def test_think_tool_call_and_answer_blocks_are_marked_with_their_tags():
    text = "<think>plan</think>ok <tool_call>{\"name\": \"f\"}</tool_call> <answer>42</answer> <tools>[]</tools>"
    spans = hl.block_spans(text)
    assert styled(text, spans, "think") == ["<think>plan</think>"]
    assert styled(text, spans, "tool") == ['<tool_call>{"name": "f"}</tool_call>', "<tools>[]</tools>"]
    assert styled(text, spans, "answer") == ["<answer>42</answer>"]
    unclosed = "a <think>still thinking"
    assert styled(unclosed, hl.block_spans(unclosed), "think") == ["<think>still thinking"]


def test_a_response_with_only_a_closing_think_tag_is_thinking_up_to_it():
    text = "the template opened it</think>The answer is 3"
    assert styled(text, hl.block_spans(text, response=True), "think") == ["the template opened it</think>"]
    assert hl.block_spans(text) == []  # a prompt: the rule is the response's only
    paired = "x</think> then <think>real</think> end"
    assert styled(paired, hl.block_spans(paired, response=True), "think") == ["<think>real</think>"]


def test_chat_template_tokens_are_marked_by_kind():
    text = "<|im_start|>user\nhi<|im_end|><|vision_start|><|image_pad|><|endoftext|>"
    spans = hl.special_spans(text)
    assert styled(text, spans, "special") == ["<|im_start|>", "<|im_end|>"]
    assert styled(text, spans, "role_word") == ["user"]
    assert styled(text, spans, "vision") == ["<|vision_start|>"]
    assert styled(text, spans, "pad") == ["<|image_pad|>"]
    assert styled(text, spans, "token") == ["<|endoftext|>"]


def test_search_marks_every_match_in_any_case_and_a_long_field_is_cut_saying_so(monkeypatch):
    doc = hl.Doc().add_run_text("Reward and REWARD and reward").mark("reward")
    assert doc.matches() == 3 and styled(doc, doc.spans, "match") == ["Reward", "REWARD", "reward"]
    monkeypatch.setattr(hl, "MAX_FIELD_CHARS", 10)
    doc = hl.Doc().add_run_text("x" * 25)
    assert doc.text.startswith("x" * 10 + "\n") and "15 more characters not shown" in doc.text
    assert doc.text.count("x") == 10


def test_terminal_escapes_in_run_text_never_reach_the_terminal():
    raw = "\x1b[2m12:04\x1b[0m \x1b[1mINFO\x1b[0m\x1b]0;pwned\x07 ok\r\n10%\r20%\tx\x00\x9b"
    assert hl.clean(raw) == "12:04 INFO ok\n10%\n20%\tx\ufffd\ufffd"
    doc = hl.Doc().add("title \x1b[31m").add_run_text("<think>\x1b[2Ja</think>", response=True)
    assert "\x1b" not in doc.text and styled(doc, doc.spans, "think") == ["<think>a</think>"]


# Plots ----------------------------------------------------------------------------------------------
def test_sparkline_runs_low_to_high_skips_nan_and_fits_its_width():
    line = sparkline([0, 1, 2, np.nan, 3, 4, 5, 6, 7])
    assert line == BARS  # 8 finite values, one bar each, lowest to highest
    assert len(sparkline(np.arange(1000.0), width=24)) == 24
    assert sparkline([5.0, 5.0, 5.0]) == BARS[0] * 3
    assert sparkline([np.nan, np.inf]) == ""


def test_column_plot_is_as_tall_as_asked_and_its_highest_column_is_full():
    lines = column_plot([0.0, 1.0, 2.0, 10.0], width=4, height=4)
    assert len(lines) == 4 and all(len(line) == 4 for line in lines)
    assert [line[3] for line in lines] == ["█"] * 4  # the maximum fills its column
    assert lines[0][:3] == "   " and lines[-1][0] != " "  # the minimum still shows, low
    assert column_plot([], width=4) == []


def test_values_read_in_four_significant_digits():
    assert format_value(0.62181) == "0.6218" and format_value(1726.0) == "1726"
    assert format_value(float("nan")) == "n/a" and format_value(None) == "n/a"
    assert format_value(12345678.0) == "1.235e+07"


def test_metric_rows_follow_the_sections_and_end_on_the_last_logged_value(demo_runs):
    folder, runs = demo_runs
    for path in runs.path:
        run = rd.open_run(path)
        ov = run.overview()
        rows = metric_rows(series_index(run), kind=run.kind, flavor=ov.flavor, train_envs=ov.train_envs,
                           eval_envs=ov.eval_envs)
        assert rows, run.run_id
        tidy = run.metrics()
        for row in rows[:5]:
            key = row.label.split(" (")[0]
            one = tidy[(tidy["metric"] == key) & tidy["step"].notna()].sort_values("step", kind="stable")
            if row.x_kind == "step" and len(one):
                last_step = one["step"].max()
                expected = one[one["step"] == last_step]["value"].iloc[-1]
                assert row.last == pytest.approx(expected) and row.last_x == f"step {last_step}", (run.run_id, key)


# Runs list and card ---------------------------------------------------------------------------------
def test_runs_rows_show_kind_status_step_and_update_time(demo_runs):
    _folder, runs = demo_runs
    rows = run_rows(runs)
    assert [r[0] for r in rows] == list(runs["run_id"])
    assert {r[1] for r in rows} == set(runs["kind"])
    for r, (_, run) in zip(rows, runs.iterrows()):
        assert r[2] == run["status"]
        if not pd.isna(run["step"]) and not pd.isna(run["max_steps"]):
            assert r[3] == f"{run['step']}/{run['max_steps']}"
        assert r[4].endswith("UTC") or r[4] == "n/a"


def test_the_card_has_the_run_cards_fields_and_its_problems(demo_runs):
    _folder, runs = demo_runs
    run = rd.open_run(runs.path[0])
    ov = run.overview()
    text = card_doc(ov, [rd.Problem("/x/metrics.jsonl", "bad line", count=3)]).text
    assert text.startswith(f"step {ov.step}") and ov.model in text and ov.status in text
    assert "1 problem reading this run" in text and "/x/metrics.jsonl: bad line ×3" in text


# Samples --------------------------------------------------------------------------------------------
def test_a_sample_shows_prompt_and_response_with_reasoning_and_tool_calls(demo_runs):
    _folder, runs = demo_runs
    run = next(rd.open_run(p) for p in runs.path if len(rd.open_run(p).samples()) and "tokens" in rd.open_run(p).capabilities)
    sid = next(s for s in run.samples().sample_id if any(m.tool_calls for m in run.episode(s).messages))
    ep = run.episode(sid)
    prompt, response = split_transcript(ep.messages)
    assert prompt and response[0].role == "assistant"
    doc = sample_doc(ep)
    text = doc.text
    assert text.index("Prompt ·") < text.index(prompt[-1].content) < text.index("Response ·")
    call = next(c for m in response for c in m.tool_calls)
    from rundash_core.views.trajectory import pretty_arguments

    assert f"→ tool call {call.name}\n{pretty_arguments(call.arguments)[0]}" in styled(doc, doc.spans, "tool")
    reasoning = next(m.reasoning for m in response if m.reasoning)
    assert f"<think>{reasoning}</think>" in "".join(styled(doc, doc.spans, "think"))
    only = sample_doc(ep, fields={"response"}).text
    assert "Prompt ·" not in only and "Sample info" not in only and "Response ·" in only
    assert sample_doc(ep, query=call.name).matches() >= 1


# Logs -----------------------------------------------------------------------------------------------
def test_log_levels_are_the_present_ones_most_verbose_first_and_filter_the_lines():
    lines = log_frame()
    assert frames.check(lines, frames.LOG_LINES) == []
    assert log_levels(lines) == ["DEBUG", "INFO", "ERROR"]
    kept, error = filter_log_lines(lines, levels={"ERROR"})
    assert error is None and list(kept["text"].str[:4]) == ["CUDA", "a co"]  # a line with no level stays
    kept, _ = filter_log_lines(lines, query="out of MEMORY|step")
    assert list(kept["offset"]) == [0, 0]
    _, error = filter_log_lines(lines, query="(")
    assert error.startswith("invalid regex")


def test_the_log_tail_hides_secrets_and_says_no_logs_when_empty():
    text = logs_doc(log_frame()).text
    assert "01-02 03:04:06 ERROR    trainer CUDA out of memory [bold red]x[/]" in text
    assert "SECRET-VALUE" not in text and "OPENAI_API_KEY" in text
    assert "a continuation line" in text and "\x1b" not in text
    assert logs_doc(frames.empty(frames.LOG_LINES)).text.strip() == "no logs"


def test_the_text_helpers_import_neither_textual_nor_rich():
    code = ("import sys, rundash_core.tui, rundash_core.tui.views, rundash_core.tui.plots, rundash_core.tui.highlight;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
