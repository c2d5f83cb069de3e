"""Sample text for a terminal: the pad-token mask, `<think>`/tool-call highlighting, search marks.

No textual or rich here: a `Doc` is plain text plus style spans (start, end, style name), which the
terminal app turns into a `rich.text.Text` (never markup, so run text is shown literally). The
highlighting rules are the Relax viewer's (`formats/relax.md` 6.1): chat-template special tokens
here; the `<think>`, tool-call, `<tools>` and `<answer>` blocks are the web view's segments
(`views.transcript_markup.segments`, one linear scan), styled for a terminal.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from rundash_core.logs.line import ANSI
from rundash_core.safety.user_regex import UserPattern, compile_user_pattern
from rundash_core.views import transcript_markup

# The Relax TUI's default `--mask-str`: long runs of multimodal placeholder tokens become `*`s.
DEFAULT_MASK = r"<\|image_pad\|>|<\|imgpad\|>|<\|audio_comp_pad\|>"
MASK_CHAR = "*"
MAX_FIELD_CHARS = 200_000  # one field shown per sample; the rest is said, not drawn

# style name -> what it marks; the app maps names to terminal styles
STYLES = ("role", "heading", "label", "special", "role_word", "vision", "pad", "token", "tool", "answer",
          "think", "match", "muted", "error")
_SPECIAL = re.compile(r"<\|([A-Za-z0-9_]{1,40})\|>")
_BLOCK_STYLE = {"think": "think", "tools": "tool", "tool_call": "tool", "tool_response": "tool", "answer": "answer"}
_ROLE_WORD = re.compile(r"[A-Za-z_]{1,20}")
# terminal escapes (`logs.line.ANSI`) and control characters other than newline and tab:
# run text must not move the cursor, retitle the window or colour the screen
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """`text` without terminal escape sequences, carriage returns as line ends (progress bars),
    other control characters shown as `�`."""
    if not text.isprintable():
        text = _CONTROLS.sub("\ufffd", ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n"))
    return text


def compile_mask(text: str | None) -> tuple[UserPattern | None, str | None]:
    """The `--mask-str` pattern on RE2 (None: the default; "": no mask), or why it cannot be used."""
    return compile_user_pattern(DEFAULT_MASK if text is None else text, ignore_case=False)


def mask_text(text: str, mask: UserPattern | None) -> str:
    """Every match of `mask` replaced by one `*` (in the first MAX_INPUT_CHARS characters, which
    is what a user pattern searches)."""
    if mask is None or not text:
        return text
    out, last = [], 0
    for start, end in mask.spans(text):
        out += [text[last:start], MASK_CHAR]
        last = end
    out.append(text[last:])
    return "".join(out)


def special_spans(text: str, offset: int = 0) -> list[tuple[int, int, str]]:
    """Chat-template special tokens: `<|im_start|>` (its role word too), vision markers, pad tokens."""
    out = []
    for m in _SPECIAL.finditer(text):
        name = m.group(1)
        style = ("vision" if name.startswith("vision_") else "pad" if "pad" in name
                 else "special" if name.startswith("im_") else "token")
        out.append((offset + m.start(), offset + m.end(), style))
        if name == "im_start":
            w = _ROLE_WORD.match(text, m.end())
            if w:
                out.append((offset + w.start(), offset + w.end(), "role_word"))
    return out


def block_spans(text: str, *, response: bool = False, offset: int = 0) -> list[tuple[int, int, str]]:
    """The think / tool / answer blocks of `transcript_markup.segments` (the one segmenter, web
    and terminal alike) as style spans, tags included."""
    out, pos = [], offset
    for seg in transcript_markup.segments(text, response=response):
        if seg.kind in _BLOCK_STYLE:
            out.append((pos, pos + len(seg.text), _BLOCK_STYLE[seg.kind]))
        pos += len(seg.text)
    return out


def search_spans(text: str, query: str | None, offset: int = 0) -> list[tuple[int, int, str]]:
    """Where `query` occurs (substring, any case)."""
    if not query:
        return []
    hay, q = text.lower(), query.lower()
    if len(hay) != len(text):  # lower() changed the length (rare scripts): match the case as typed
        hay, q = text, query
    out, i = [], hay.find(q)
    while i >= 0:
        out.append((offset + i, offset + i + len(q), "match"))
        i = hay.find(q, i + len(q))
    return out


@dataclass
class Doc:
    """Plain text and its style spans, built piece by piece (spans later in the list win)."""

    spans: list[tuple[int, int, str]] = field(default_factory=list)
    _parts: list[str] = field(default_factory=list, repr=False)
    _len: int = 0

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def __len__(self) -> int:
        return self._len

    def add(self, text: str, style: str | None = None) -> Doc:
        """Append `text` (escapes removed) in `style`."""
        return self._append(clean(text), style)

    def _append(self, text: str, style: str | None = None) -> Doc:
        start = self._len
        self._parts.append(text)
        self._len += len(text)
        if style and text:
            self.spans.append((start, self._len, style))
        return self

    def line(self, text: str = "", style: str | None = None) -> Doc:
        return self.add(text, style).add("\n")

    def add_run_text(self, text: str, *, mask: UserPattern | None = None, response: bool = False) -> Doc:
        """Text from a run: masked, cut at MAX_FIELD_CHARS (saying so), highlighted."""
        text = clean(mask_text(text or "", mask))
        cut = len(text) - MAX_FIELD_CHARS
        text = text[:MAX_FIELD_CHARS] if cut > 0 else text
        start = self._len
        self._append(text)
        self.spans += block_spans(text, response=response, offset=start)
        self.spans += special_spans(text, offset=start)
        if cut > 0:
            self.add(f"\n… {cut:,} more characters not shown", "muted")
        return self

    def append(self, other: Doc) -> Doc:
        """`other`'s text and spans after this one's."""
        start = self._len
        self.spans += [(a + start, b + start, style) for a, b, style in other.spans]
        return self._append(other.text)

    def mark(self, query: str | None) -> Doc:
        """Mark the search matches, on top of every other style."""
        self.spans += search_spans(self.text, query)
        return self

    def matches(self) -> int:
        return sum(1 for s in self.spans if s[2] == "match")
