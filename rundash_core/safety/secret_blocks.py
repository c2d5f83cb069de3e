"""How far a secret value spans when it is more than a line: a JSON/TOML array or table, a YAML
block under a secret name, a TOML `[secrets]` table (`rundash_core.safety.redact` finds the name; this
module says which characters its value covers).

Each function appends (start, end) spans to hide and returns where the scan resumes. A hidden
block stays as many lines: each line's value is hidden, its key and indent stay (`secrets:` /
`  a: [hidden]`), so a page splitting the text again has the same lines.
    bracket_end(text, v)                    the end of the bracketed value opening at v.
    yaml_block(text, start, v, spans)       the more-indented (or `- item`) lines after a name at start.
    toml_table(text, end, spans, strict)    a `[secrets]` table's `key = value` lines (and where they end).
"""
from __future__ import annotations

import re

_REACH = 256  # how far back a YAML name's line prefix (a log line's timestamp, an error) is read
_BRACKETS = re.compile(r"\"(?:[^\"\\\n]|\\.)*+\"?|'[^'\n]*+'?|[\[\]{}]")
_TRIPLE = re.compile(r"[\w.\"'-]++[ \t]*+=[ \t]*+(?P<q>\"\"\"|''')")
_TOML_KEY = re.compile(r"[\w.\"'-]++[ \t]*+=")
_TOML_NEXT_TABLE = re.compile(r"\n[ \t]*+\[")


def bracket_end(text: str, v: int) -> int:
    """Where the bracket at v closes (strings skipped), or the end of the text."""
    depth = 0
    for t in _BRACKETS.finditer(text, v):
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(t.group(), 0)
        if depth == 0:
            return t.end()
    return len(text)  # never closed: hide to the end rather than show a secret


def _lines(text: str, i: int, stop: int):
    """(start, end) of the lines after the newline at or after i, up to `stop`."""
    i = text.find("\n", i)
    while 0 <= i < stop:
        j = text.find("\n", i + 1, stop)
        j = stop if j < 0 else j
        yield i + 1, j
        i = j


def yaml_block(text: str, start: int, v: int, spans: list) -> int:
    """`secrets:` then more-indented lines (or `- item` lines): hide each line's value (a block
    scalar's, `key: |` or `>`, is its whole line)."""
    ls = text.rfind("\n", max(0, start - _REACH), start) + 1
    prefix = text[ls:start]  # (a log line's prefix before the name: the block is what its line indents)
    alone = not prefix.strip(" \t-\"'")  # else any indented line continues it
    seps = (":", "- ") if alone and text[v] not in "|>" else ()
    indent, dashed = (len(prefix) - len(prefix.lstrip(" \t"))) if alone else 0, "-" in prefix and alone
    resume = v
    for a, b in _lines(text, v, len(text)):
        line = text[a:b].rstrip("\r")
        body = line.lstrip(" \t")
        ind = len(line) - len(body)
        if body and not (ind > indent or (ind == indent and not dashed and body.startswith("- "))):
            break
        resume = b
        if body and not body.startswith("#"):
            _hide_line(a + ind, body, seps, spans)
    return resume


def toml_table(text: str, end: int, spans: list, strict: bool) -> tuple[int, int]:
    """Hide each line's value up to the next table (`strict`, after a log line's prefix: while lines
    are `key = value`); returns where the scan resumes and where the table's lines end."""
    nxt = None if strict else _TOML_NEXT_TABLE.search(text, end)  # (strict: a `[table]` line ends it too)
    stop = nxt.start() if nxt else len(text)
    skip = -1
    for a, b in _lines(text, end, stop):
        if a < skip:  # inside a multi-line string hidden with its key
            continue
        line = text[a:b].rstrip("\r")
        body = line.lstrip(" \t")
        if strict and not _TOML_KEY.match(body):
            return end, a  # (its lines are scanned as text too: a value may open a `"""` string)
        if body and not body.startswith("#"):
            v = _TRIPLE.match(text, a + len(line) - len(body))
            if v is not None:  # `key = """` ... `"""`: every line up to the closing quotes
                close = text.find(v.group("q"), v.end())
                skip = close + 3 if close >= 0 else len(text)
                spans.append((v.end(), close if close >= 0 else skip))
                continue
            _hide_line(a + len(line) - len(body), body, ("=",), spans)
    return (end if strict else max(stop, skip)), max(stop, skip)


def _hide_line(a: int, body: str, seps: tuple[str, ...], spans: list) -> None:
    """Hide a line's value: after its first separator (`key: `, `- `, `key = `), else all of it."""
    cut = 0
    for s in seps:
        i = body.find(s)
        if i >= 0 and (s != "- " or i == 0):
            cut = i + len(s)
            break
    while cut < len(body) and body[cut] in " \t":
        cut += 1
    if cut < len(body):
        spans.append((a + cut, a + len(body)))
