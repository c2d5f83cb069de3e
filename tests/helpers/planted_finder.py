"""Finding planted secrets in what a surface delivers (`test_planted_secrets.py`): each secret in
every form a surface may write it (raw, Markdown-escaped, JSON, HTML), and every string inside a
value (frames, dicts, dataclasses, objects), so a leak in any spelling or container is found."""
from __future__ import annotations

import dataclasses
import html
import json

import pandas as pd

from rundash_core.views.display_text import md_escape

from helpers.secret_corpus import SPELLINGS


def _forms(secret: str) -> list[bytes]:
    """The secret as raw UTF-8 and as Markdown (`md_escape`), JSON (plotly specs, JSON bodies)
    and HTML would escape it, and combinations of those."""
    forms = set()
    for text in (secret, md_escape(secret)):
        forms |= {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1], html.escape(text)}
    return [f.encode("utf-8", "surrogatepass") for f in forms]


FORMS = [_forms(s.secret) for s in SPELLINGS]


def leaked(blob: str | bytes) -> set[int]:
    """Indexes of the spellings whose secret appears in `blob`."""
    data = blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob
    return {i for i, forms in enumerate(FORMS) if any(f in data for f in forms)}


def strings(value, seen=None):
    """Every string inside a value: frames (cells, columns, index), dicts (keys too), lists,
    dataclasses (Episode, Message, Problem, Finding, Overview), objects' attributes."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, pd.DataFrame):
        yield from (str(c) for c in value.columns)
        for col in value.columns:
            for v in value[col].tolist():
                yield from strings(v, seen)
    elif isinstance(value, pd.Series):
        for v in value.tolist():
            yield from strings(v, seen)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k, seen)
            yield from strings(v, seen)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from strings(v, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from strings(getattr(value, f.name), seen)
    elif hasattr(value, "__dict__") and not callable(value):
        yield from strings(vars(value), seen)


def text_of(*values) -> str:
    return "\n".join(s for v in values for s in strings(v))
