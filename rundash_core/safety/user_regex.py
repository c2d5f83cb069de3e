"""Regexes typed by users (metric filter, run-name match, Overview and Config search), on RE2.

The dashboard is one process shared by the whole team: a pattern such as `(.*)*X` or `(a+)+$` run by
Python's backtracking `re` can take exponential time and freeze every user's session. User patterns
therefore run on RE2 (the `google-re2` package), whose automata match in time linear in the input
for every pattern, by construction: there is no budget to tune, no timeout thread, no pattern that
is "too slow". We picked it over the `regex` package's `timeout=`, which still backtracks (each pass
would cost up to its budget while holding the GIL, and a filtering pass needs a per-call and a
total budget), because linear time needs no such bookkeeping. The cost is RE2's syntax: no
look-around and no back-references (refused with a message saying so); `\\Z` is accepted as `\\z`.

Limits: a pattern has at most MAX_PATTERN_CHARS characters; one search looks at the first
MAX_INPUT_CHARS characters of its text (RE2 also refuses patterns whose program exceeds its memory
budget, e.g. large counted repetitions, with "pattern too large").

API:
    compile_user_pattern(text, ignore_case=True) -> (UserPattern | None, error | None)
        `UserPattern.search(s) -> bool`, `.count(s) -> int` (non-overlapping matches), `.pattern`.
        Empty text: (None, None), i.e. no filter. Errors start with "invalid regex".
    filter_names(names, text, ignore_case=True) -> (kept names, error | None)
        An invalid pattern keeps every name and returns the error to show.
    NOTHING: a UserPattern that matches no text (to filter everything out after an error).
"""
from __future__ import annotations

from functools import lru_cache

import re2

MAX_PATTERN_CHARS = 500
MAX_INPUT_CHARS = 1_000_000
_UNSUPPORTED = ("(?=", "(?!", "(?<=", "(?<!", "(?P=", "\\1", "\\2", "\\3", "\\4", "\\5", "\\6", "\\7", "\\8", "\\9")


class UserPattern:
    """A compiled user pattern: linear-time `search` and `count` over str (or anything, via str())."""

    __slots__ = ("pattern", "ignore_case", "_rx")

    def __init__(self, pattern: str, ignore_case: bool, rx):
        self.pattern, self.ignore_case, self._rx = pattern, ignore_case, rx

    def search(self, text) -> bool:
        return self._rx.search(_bytes(text)) is not None

    def count(self, text) -> int:
        return sum(1 for _ in self._rx.finditer(_bytes(text)))

    def line_hits(self, block: bytes) -> list[int] | None:
        """Offsets in `block` (UTF-8 lines joined by newlines) of the first match in each line that
        has one, as if each line were searched alone: `^`/`$` at line ends, no match across a
        newline. One scan of the block instead of one call per line (a log filter's prefilter).
        None for a pattern anchored at the text's ends (`\\A`, `\\z`): search line by line."""
        if any(a in self.pattern for a in ("\\A", "\\z", "\\Z")):
            return None
        rx, out, pos = _per_line(self.pattern, self.ignore_case), [], 0
        while (m := rx.search(block, pos)) is not None:
            out.append(m.start())
            nl = block.find(b"\n", m.start())
            if nl < 0:
                break
            pos = nl + 1
        return out

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets of the non-empty non-overlapping matches in `text`'s first
        MAX_INPUT_CHARS characters (what masking or highlighting a text needs)."""
        return [(m.start(), m.end()) for m in self._rx.finditer(str(text)[:MAX_INPUT_CHARS]) if m.end() > m.start()]

    def __repr__(self) -> str:
        return f"UserPattern({self.pattern!r}, ignore_case={self.ignore_case})"


def _bytes(text) -> bytes:
    text = text if isinstance(text, str) else str(text)
    # UTF-8 bytes: RE2 matches them directly (a str would be re-encoded and its offsets mapped back);
    # "replace" keeps lone surrogates from raising.
    return text[:MAX_INPUT_CHARS].encode("utf-8", "replace")


def _python_to_re2(pattern: str) -> str:
    r"""Python's `\Z` (end of text) is RE2's `\z`; every other escape is passed through."""
    if "\\Z" not in pattern:
        return pattern
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append("\\z" if pattern[i + 1] == "Z" else pattern[i:i + 2])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


@lru_cache(maxsize=256)
def compile_user_pattern(text: str, *, ignore_case: bool = True) -> tuple[UserPattern | None, str | None]:
    """(pattern, None), or (None, why it cannot be used). Empty text means no filter: (None, None)."""
    if not text:
        return None, None
    if len(text) > MAX_PATTERN_CHARS:
        return None, f"invalid regex: pattern too long ({len(text)} characters, at most {MAX_PATTERN_CHARS})"
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.never_capture = True  # only "is there a match": no submatch engine needed
    options.log_errors = False
    try:
        rx = re2.compile(_python_to_re2(text), options)
    except re2.error as e:
        msg = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        if any(u in text for u in _UNSUPPORTED):
            msg += " (look-around and back-references are not supported)"
        return None, f"invalid regex: {msg}"
    return UserPattern(text, ignore_case, rx), None


@lru_cache(maxsize=64)
def _per_line(text: str, ignore_case: bool):
    """The pattern for searching a block line by line (`compile_user_pattern` accepted it)."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.never_capture = True
    options.never_nl = True  # no match spans two lines
    options.log_errors = False
    return re2.compile("(?m)" + _python_to_re2(text), options)


def filter_names(names, text: str, *, ignore_case: bool = True) -> tuple[list[str], str | None]:
    """The names (metric keys, run ids, ...) in which the pattern `text` is found, in their order, and
    the error to show if the pattern is invalid (then every name is kept)."""
    names = [str(n) for n in names]
    pattern, error = compile_user_pattern(text, ignore_case=ignore_case)
    if pattern is None:
        return names, error
    return [n for n in names if pattern.search(n)], None


NOTHING = compile_user_pattern(r"[^\x00-\x{10FFFF}]")[0]  # the empty character class
