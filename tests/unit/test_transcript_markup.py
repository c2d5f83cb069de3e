"""Plain prompt/response strings split into markup, think, tool-call and masked segments
(`rundash_core.views.transcript_markup`), on the real Relax rows in tests/data and on crafted strings."""
from __future__ import annotations

import html
import json

from rundash_core.safety.user_regex import compile_user_pattern
from rundash_core.views import transcript_markup as tm

from helpers import DATA

RELAX = DATA / "relax" / "relax-run" / "rollout_result" / "train" / "1.jsonl"
MASK = compile_user_pattern(tm.DEFAULT_MASK, ignore_case=False)[0]


def _kinds(parts):
    return [p.kind for p in parts]


def test_segments_join_back_to_the_text_and_find_every_block():
    row = json.loads(RELAX.read_text().splitlines()[0])
    for text in (row["prompt"], row["response"]):
        parts = tm.segments(text, MASK)
        assert "".join(p.text for p in parts) == text  # nothing lost, nothing added
        assert tm.has_markup(text)
    resp = tm.segments(row["response"])
    thinks = [p.text for p in resp if p.kind == "think"]
    assert thinks and all(t.startswith("<think>") and t.endswith("</think>") for t in thinks)
    assert row["response"].count("<tool_call>") == sum(1 for p in resp if p.kind == "tool_call")
    assert row["response"].count("<tool_response>") == sum(1 for p in resp if p.kind == "tool_response")
    markup = [p.text for p in tm.segments(row["prompt"]) if p.kind == "markup"]
    assert "<|im_start|>system" in markup and "<|im_end|>" in markup and "<|im_start|>user" in markup


def test_chat_template_flavours():
    text = "<s>[INST] hi [/INST] yo</s><|begin_of_text|><|start_header_id|>user<|end_header_id|>q<|eot_id|>"
    parts = tm.segments(text)
    assert [p.text for p in parts if p.kind == "markup"] == [
        "<s>", "[INST]", "[/INST]", "</s>", "<|begin_of_text|>", "<|start_header_id|>user<|end_header_id|>", "<|eot_id|>"]
    assert [p.text for p in parts if p.kind == "text"] == [" hi ", " yo", "q"]
    assert not tm.has_markup("plain text, a < b > c, x|y") and not tm.has_markup("")
    # an unclosed think (generation cut off) runs to the end
    assert _kinds(tm.segments("a<think>still thinking")) == ["text", "think"]


def test_pad_runs_collapse_and_the_mask_is_editable():
    text = "<|vision_start|>" + "<|image_pad|>" * 576 + "<|vision_end|>see<|video_pad|><|video_pad|>"
    parts = tm.segments(text, MASK)
    masked = [p.text for p in parts if p.kind == "masked"]
    assert masked == ["<|image_pad|>×576", "<|video_pad|>×2"]
    assert tm.mask_noise(text, MASK) == "<|vision_start|><|image_pad|>×576<|vision_end|>see<|video_pad|>×2"
    assert "".join(p.text for p in parts) == tm.mask_noise(text, MASK)
    other = compile_user_pattern(r"\*{3,}")[0]  # a user pattern
    assert tm.mask_noise("a******b***c", other) == "a******×1b***×1c"
    assert tm.mask_noise(text, None) == text and tm.segments("", MASK) == []
    assert tm.counts(parts)["masked"] == 2


def test_html_escapes_every_run_character():
    evil = ('<script>alert(1)</script><think><img src=x onerror="alert(2)"></think>'
            '<tool_call>{"name": "<b onmouseover=alert(3)>"}</tool_call><|im_end|>&amp;')
    out = tm.to_html(tm.segments(evil, MASK))
    assert "<script" not in out and "<img" not in out and "<b " not in out and "onerror=\"" not in out
    assert html.escape("<script>alert(1)</script>") in out and "&amp;amp;" in out
    # only our own tags are live: span and div with constant styles
    import re
    assert set(re.findall(r"<(\w+)", out)) <= {"span", "div"}
    assert out.count('class="rd-think"') == 1 and out.count('class="rd-tool_call"') == 1


def test_one_segmenter_for_the_web_and_the_terminal():
    """The TUI's think / tool / answer spans are the web segments (on a real Relax row and crafted
    strings), and both apply the pre-filled `</think>` rule to a response only."""
    from rundash_core.tui import highlight as hl
    row = json.loads(RELAX.read_text().splitlines()[0])
    crafted = "<think>plan</think>ok <tool_call>{}</tool_call> <answer>42</answer> <tools>[]</tools>"
    for text in (row["prompt"], row["response"], crafted, "the template opened it</think>The answer"):
        for response in (False, True):
            blocks, pos = [], 0
            for p in tm.segments(text, response=response):
                if p.kind in tm.BLOCK_KINDS:
                    blocks.append((pos, pos + len(p.text)))
                pos += len(p.text)
            assert [(a, b) for a, b, _ in hl.block_spans(text, response=response)] == blocks
    assert _kinds(tm.segments(crafted)) == ["think", "text", "tool_call", "text", "answer", "text", "tools"]
    pre = tm.segments("opened</think>So 3", response=True)
    assert [(p.kind, p.text) for p in pre] == [("think", "opened</think>"), ("text", "So 3")]
    assert _kinds(tm.segments("opened</think>So 3")) == ["text", "markup", "text"]  # a prompt: tags only
    assert _kinds(tm.segments("x</think> <think>real</think>", response=True)) == ["text", "markup", "text", "think"]
