"""JSON nested deeper than a parser's limit, read as far as it goes.

orjson refuses a document nested past 1024 levels and the stdlib parser recurses until the stack
runs out, so one hostile record (a tool call's arguments nested 100,000 deep) would cost the whole
episode. `loads_shallow` replaces each value that starts past `limit` levels with a marker string
and parses the rest: the episode shows what it can and says what was cut.
"""
from __future__ import annotations

import re

import orjson

DEEP_MARK = "… (nested too deep: not shown)"
_TOKEN = re.compile(rb'\\.|["\[\]{}]', re.S)  # an escape pair is one token, so \" never ends a string


def loads_shallow(raw: bytes, limit: int = 512):
    """(value, n cut): `raw` parsed with every value opening past `limit` levels replaced by
    DEEP_MARK. Raises orjson.JSONDecodeError when the rest is still not JSON."""
    out, start, depth, cut, in_str, skip_from = [], 0, 0, 0, False, None
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok[0] == 0x5C:  # a backslash pair: only inside strings, and never structural
            continue
        if tok == b'"':
            in_str = not in_str
            continue
        if in_str:
            continue
        if tok in (b"[", b"{"):
            depth += 1
            if depth == limit + 1 and skip_from is None:
                out.append(raw[start:m.start()])
                skip_from = m.start()
        else:
            depth -= 1
            if depth == limit and skip_from is not None:
                out.append(orjson.dumps(DEEP_MARK))
                start, skip_from = m.end(), None
                cut += 1
    if skip_from is not None:  # never closed: the document is truncated anyway
        out.append(orjson.dumps(DEEP_MARK))
        cut += 1
    else:
        out.append(raw[start:])
    return orjson.loads(b"".join(out)), cut


def is_too_deep(err: Exception) -> bool:
    """Whether an orjson error is its depth limit (the rest of the line may be fine)."""
    return "depth limit" in str(err) or isinstance(err, RecursionError)
