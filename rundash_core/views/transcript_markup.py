"""Plain prompt / response strings (Relax rows, verl dumps) split into what a reader tells apart:
chat-template markup (`<|im_start|>user`, `<|im_end|>`, `[INST]`, ...), `<think>` blocks, tool calls,
tool responses, `<tools>` and `<answer>` blocks, and noise masked by a user regex (default: multimodal
pad tokens, whose runs collapse into `<|image_pad|>×576`). The one segmenter of both views: `to_html`
renders the segments as escaped, coloured spans (every byte of run text goes through `html.escape`,
so no markup from a model can become live HTML), the terminal view styles the same segments
(`tui.highlight.block_spans`). In a response with a `</think>` but no complete `<think>…</think>`
pair, everything up to that tag is thinking: the template pre-filled the opening tag (formats/relax.md 6.1).

Which messages a transcript shows as entries: a tool result once, under its call (not again as a
message of its own); a short entry open, a long one collapsed.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass

from rundash_core.frames import Message
from rundash_core.safety.user_regex import UserPattern

DEFAULT_MASK = r"<\|(?:image_pad|video_pad|imgpad|audio_comp_pad|audio_pad)\|>"
_BLOCKS = {"think": "think", "tool_call": "tool_call", "tool_response": "tool_response", "tools": "tools",
           "answer": "answer"}
# built-in (not user) patterns: bounded alternatives and lazy bodies, linear on any input
_MARKUP = (r"<\|im_start\|>[A-Za-z_]{0,20}|<\|start_header_id\|>[A-Za-z_]{0,20}<\|end_header_id\|>"
           r"|<\|[A-Za-z0-9_.:-]{1,40}\|>|<｜[^｜\n]{1,40}｜>|\[/?(?:INST|SYSTEM_PROMPT|TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS)\]"
           r"|</?s>|</?(?:think|tool_call|tool_response|tools|answer)>")
_TOKEN = re.compile("|".join(f"(?P<{k}><{t}>.*?(?:</{t}>|\\Z))" for k, t in _BLOCKS.items()) + f"|(?P<markup>{_MARKUP})",
                    re.DOTALL)
KINDS = ("text", "markup", "think", "tool_call", "tool_response", "tools", "answer", "masked")
BLOCK_KINDS = tuple(_BLOCKS)
LABELS = {"think": "think", "tool_call": "tool call", "tool_response": "tool response", "tools": "tools",
          "answer": "answer"}
_THINK, _END_THINK = "<think>", "</think>"
_STYLE = {
    "markup": "color:#8b8bff;font-weight:600",
    "think": "color:#9a9a9a;font-style:italic;background:rgba(150,150,150,.10)",
    "tool_call": "color:#2e9e5b;background:rgba(46,158,91,.10)",
    "tool_response": "color:#c47f17;background:rgba(196,127,23,.10)",
    "tools": "color:#2e9e5b;background:rgba(46,158,91,.06)",
    "answer": "color:#0969da;background:rgba(9,105,218,.10)",
    "masked": "color:#b05fd0;background:rgba(176,95,208,.12);border-radius:3px;padding:0 2px",
}


@dataclass(frozen=True)
class Segment:
    kind: str  # one of KINDS
    text: str


def has_markup(text: str | None) -> bool:
    """Whether a string carries chat-template markup or think / tool-call blocks worth highlighting."""
    return bool(text) and _TOKEN.search(text) is not None


def masked_runs(text: str, mask: UserPattern | None) -> list[tuple[int, int, str]]:
    """(start, end, label) of each run of back-to-back mask matches: the label is the first match's
    text and the run length, e.g. `<|image_pad|>×576`."""
    if mask is None or not text:
        return []
    runs: list[list] = []
    for start, end in mask.spans(text):
        if runs and runs[-1][1] == start:
            runs[-1][1], runs[-1][3] = end, runs[-1][3] + 1
        else:
            runs.append([start, end, text[start:end], 1])
    return [(s, e, f"{first}×{n}") for s, e, first, n in runs]


def mask_noise(text: str, mask: UserPattern | None) -> str:
    """`text` with each run of mask matches collapsed into its label."""
    out, pos = [], 0
    for start, end, label in masked_runs(text, mask):
        out += [text[pos:start], label]
        pos = end
    return "".join(out) + text[pos:]


def segments(text: str | None, mask: UserPattern | None = None, *, response: bool = False) -> list[Segment]:
    """`text` as consecutive segments (joined, they give `mask_noise(text)`): masked runs first
    (a block cut by a masked run is closed there), then blocks and markup in the rest. `response`:
    a `</think>` without a complete pair makes the text up to it one think segment."""
    text = text or ""
    cut = _prefilled_think_end(text) if response else 0
    out: list[Segment] = [Segment("think", mask_noise(text[:cut], mask))] if cut else []
    text = text[cut:]
    pos = 0
    for start, end, label in masked_runs(text, mask):
        out += _split(text[pos:start])
        out.append(Segment("masked", label))
        pos = end
    out += _split(text[pos:])
    return out


def _prefilled_think_end(text: str) -> int:
    """Where a response's pre-filled thinking ends (after its first `</think>`), or 0."""
    close = text.find(_END_THINK)
    if close < 0:
        return 0
    opened = text.find(_THINK)
    if opened >= 0 and text.find(_END_THINK, opened) >= 0:  # a complete pair: the tags say it all
        return 0
    return close + len(_END_THINK)


def _split(text: str) -> list[Segment]:
    out, pos = [], 0
    for m in _TOKEN.finditer(text):
        if m.start() > pos:
            out.append(Segment("text", text[pos:m.start()]))
        out.append(Segment(m.lastgroup, m.group()))
        pos = m.end()
    if pos < len(text):
        out.append(Segment("text", text[pos:]))
    return out


def counts(parts: list[Segment]) -> dict[str, int]:
    """How many segments of each highlighted kind (for a legend)."""
    out: dict[str, int] = {}
    for p in parts:
        if p.kind != "text":
            out[p.kind] = out.get(p.kind, 0) + 1
    return out


def to_html(parts: list[Segment]) -> str:
    """The segments as one preformatted block of escaped, coloured spans (blocks carry a small
    label); safe to hand to `st.html`: all run text is escaped, styles are constants."""
    body = []
    for p in parts:
        text = html.escape(p.text, quote=True)
        if p.kind == "text":
            body.append(text)
            continue
        label = LABELS.get(p.kind)
        tag = (f'<span style="font-size:.7em;opacity:.7;border:1px solid currentColor;padding:0 3px;'
               f'margin-right:3px">{label}</span>') if label else ""
        body.append(f'<span class="rd-{p.kind}" style="{_STYLE[p.kind]}">{tag}{text}</span>')
    return ('<div class="rd-markup" style="white-space:pre-wrap;word-break:break-word;'
            'font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px;line-height:1.45">'
            + "".join(body) + "</div>")


# Transcript entries ----------------------------------------------------------------------------------
OPEN_CHARS, OPEN_LINES = 600, 12  # a message this short opens expanded: nothing to scroll past


def folded_results(messages: list[Message]) -> dict[int, int]:
    """Tool results shown under their call instead of as their own message: result index → the
    index of the message that made the call (a call's first answer only; a result whose call is not
    in the transcript, or a second answer to one call, stays a message of its own)."""
    made: dict[str, int] = {}
    for i, m in enumerate(messages):
        for c in m.tool_calls:
            if c.id and c.id not in made:
                made[c.id] = i
    out, answered = {}, set()
    for i, m in enumerate(messages):
        cid = m.tool_call_id
        if cid and cid in made and cid not in answered and made[cid] != i:
            out[i] = made[cid]
            answered.add(cid)
    return out


def transcript_entries(messages: list[Message], matching: list[int] | None = None) -> list[int]:
    """The messages the transcript shows as entries, in order: every message but the results shown
    under their calls; `matching` (a search's hits): only the entries holding a hit (a hit in a
    folded result shows its call's entry)."""
    folded = folded_results(messages)
    if matching is None:
        return [i for i in range(len(messages)) if i not in folded]
    return sorted({folded.get(i, i) for i in matching})


def opens_expanded(messages: list[Message], index: int, folded: dict[int, int] | None = None) -> bool:
    """Whether an entry opens expanded: what it shows (its text, its tool calls and the results
    folded under them; reasoning has its own collapsed block) is at most OPEN_CHARS characters and
    OPEN_LINES lines (`folded`: `folded_results(messages)`, when already known)."""
    m = messages[index]
    folded = folded_results(messages) if folded is None else folded
    results = [messages[r].content or "" for r, call in folded.items() if call == index]
    texts = [m.content or "", *(c.arguments or "" for c in m.tool_calls), *results]
    chars = sum(len(t) for t in texts)
    lines = sum(t.count("\n") + 1 for t in texts if t)
    return chars <= OPEN_CHARS and lines <= OPEN_LINES
