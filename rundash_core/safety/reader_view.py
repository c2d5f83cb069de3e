"""Text as a reader sees it: what `rundash_core.safety.redact` scans when the bytes differ from what is read.

A secret is what a person reading the text would see, not its bytes: a log line has ANSI colour
codes between a name and its value, a JSON string or a tool call's arguments spell a line break as
`\\n`, a quote as `\\"` and a full-width colon as `\\uff1a`, a shell command writes a quote as
`'"'"'`, and pprint (with a Ray prefix) continues a string literal on the next line (in the
other quotes when the piece holds one). `read(text)` gives that view and maps what is found in it
back onto the text, so a hidden span covers the bytes that spell it; `redact_text` reads a view
again when it still holds escapes (JSON inside JSON). API:
    might_differ(text)  a cheap test: False means the view is the text itself.
    read(text)          a View (its .text, and .back(spans) -> spans of the original), or None when
                        the view is the text itself.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

_VIEW = re.compile(r"\x1b\[[0-9;?]*+[A-Za-z]|(?P<q>['\"])[ \t]*+\n(?:\x1b\[[0-9;]*+m)?(?:\([^)\n]{0,80}+\))?"
                   r"(?:\x1b\[[0-9;]*+m)?[ \t]*+['\"]|'\"'\"'|'\\''"
                   r"|(?P<bs>\\++)(?P<e>(?:u001[bB]|x1[bB]|033|e)\[[0-9;?]*+[A-Za-z]|u[0-9a-fA-F]{4}|[nt\"'])")
_AS = {"n": "\n", "t": "\t", '"': '"', "'": "'"}


def might_differ(text: str) -> bool:
    """Whether the view can differ from the text (ANSI, a backslash, pprint's `'\\n` piece, a shell quote)."""
    return "\x1b" in text or "\\" in text or "'\n" in text or "'\"'" in text


@dataclass(frozen=True)
class View:
    text: str
    segs: list[tuple[int, int, int]]  # (view start, text start, text end of a replaced piece or -1)

    def back(self, spans) -> list[tuple[int, int]]:
        """Spans of the view as spans of the original text (a span touching a replaced piece covers it whole)."""
        segs, starts = self.segs, [v for v, _o, _e in self.segs]

        def at(x: int, end: bool) -> int:
            v, o, e = segs[k] if (k := bisect_right(starts, x - end) - 1) >= 0 else (0, 0, -1)
            return (e if end else o) if e >= 0 else o + x - v
        return [(at(a, False), at(b, True) if b > a else at(a, False)) for a, b in spans]


def read(text: str) -> View | None:
    """The text as a reader sees it: ANSI colour codes dropped, escapes (`\\n`, `\\"`, `\\uXXXX`) and
    shell quotes (`'"'"'`) read, a string literal continued on the next line (pprint) joined. None:
    the reader sees the text as it is."""
    view, segs, last, n = [], [], 0, 0
    for m in _VIEW.finditer(text):
        view.append(text[last:m.start()])
        n += m.start() - last
        g, e = m.group(), m.group("e")
        if e is None:  # an ANSI code or a pprint continuation is dropped; a shell quote is a quote
            rep = "" if m.group("q") or g[0] == "\x1b" else "'"
        else:  # k backslashes, then an escape (odd k: read; even k: k/2 backslashes, then it as written)
            k = len(m.group("bs"))
            rep = "\\" * (k // 2) + (e if k % 2 == 0 else "" if "[" in e else chr(int(e[1:], 16)) if e[0] == "u"
                                      else _AS[e])
        segs.append((n, m.start(), m.end()))
        view.append(rep)
        n += len(rep)
        segs.append((n, m.end(), -1))
        last = m.end()
    if not segs:
        return None
    view.append(text[last:])
    return View("".join(view), segs)
