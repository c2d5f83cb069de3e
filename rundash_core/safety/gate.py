"""The one gate: what leaves rundash passes here, with its secrets hidden (`rundash_core.safety.redact`).

Run text reaches people through many surfaces (pages, downloads, the terminal view, the CLI, the
check-in, the AI context), so hiding secrets surface by surface lets a new page forget it. Instead
`Run` gates its own public readers (`GATED`, wrapped in `Run.__init_subclass__`): every surface reads
runs through them, so none can go around it. `open_run(path, reveal=True)` (or `config(redacted=False)`)
is the explicit notebook opt-in to raw values.

    gated(obj)        str -> redact_text; DataFrame -> its text columns (a frame of log lines: each
                      file's lines redacted as one block, so a PEM body or a YAML value on the next
                      line is hidden too); dict/list -> redact(); dataclasses (Episode, Problem) ->
                      each text field; numbers and timestamps untouched. Never changes its argument.
    hidden_spans(t)   the [start, end) ranges of `t` that redact_text hides (what tokens and lines
                      overlapping a secret are hidden by).

Ids, names and paths (`KEYS`) pass untouched: they are how a surface asks for a record again.
Nested calls between a run's own readers are gated once, by the outermost (a per-thread flag).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import threading

import numpy as np
import pandas as pd

from rundash_core.safety.redact import HIDDEN, redact, redact_text

GATED = ("overview", "config", "configs", "samples", "episode", "live_samples", "logs", "read_log", "reports", "report",
         "problems", "failure_modes")
KEYS = frozenset(("sample_id", "episode_id", "run_id", "path", "locator", "offset", "name"))
_state = threading.local()
# a line that is one bare key-like token (a PEM body line, a YAML value under `api_key:`): what a read
# that starts or is filtered past its block's first line cannot tell from a secret
_BARE = re.compile(r"\s*(?=\S*\d)(?=\S*[A-Za-z])[A-Za-z0-9+/_\-]{16,}={0,2}\s*")


def gated(obj):
    """`obj` with every secret in its text hidden (a copy; see the module docstring)."""
    if isinstance(obj, str):
        return redact_text(obj)
    if obj is None or isinstance(obj, (bool, int, float, np.number, pd.Timestamp)):
        return obj
    if isinstance(obj, pd.DataFrame):
        return _frame(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _dataclass(obj)
    if isinstance(obj, (dict, list, tuple)):
        if isinstance(obj, (list, tuple)) and any(dataclasses.is_dataclass(v) for v in obj):
            return type(obj)(gated(v) for v in obj) if isinstance(obj, tuple) else [gated(v) for v in obj]
        return redact(obj)
    return obj


@contextlib.contextmanager
def inside():
    """Readers called in this block answer raw: for a reader that keeps only numbers of another's
    answer (`Run.steps` counts samples), so it pays for no redaction it does not show."""
    was = getattr(_state, "inside", False)
    _state.inside = True
    try:
        yield
    finally:
        _state.inside = was


def gate_method(fn):
    """`fn` (a `Run` reader) with its answer gated, unless the run reveals, the caller asked for
    raw values (`redacted=False`), or a gated reader is already running on this thread."""
    if getattr(fn, "__gated__", False):
        return fn

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if getattr(_state, "inside", False):
            return fn(self, *args, **kwargs)
        with inside():
            out = fn(self, *args, **kwargs)
        if getattr(self, "reveal", False) or kwargs.get("redacted", True) is False:
            return out
        return gated(out)

    method.__gated__ = True
    return method


# Frames ---------------------------------------------------------------------------------------------
def _frame(frame: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in frame.columns if c not in KEYS and _texty(frame[c])]
    if not cols:
        return frame
    out = frame.copy(deep=False)
    lines = {"text", "path"} <= set(frame.columns) and "level" in frame.columns
    for c in cols:
        out[c] = _lines(frame) if lines and c == "text" else _column(frame[c])
    out.attrs = dict(frame.attrs)
    return out


def _texty(s: pd.Series) -> bool:
    return s.dtype == object or pd.api.types.is_string_dtype(s.dtype)


def _column(s: pd.Series) -> pd.Series:
    """A text column redacted value by distinct value (the same column back when nothing is hidden:
    a listing of 70k samples costs its distinct values, not its rows)."""
    try:
        distinct = [v for v in s.dropna().unique() if isinstance(v, str)]
    except TypeError:  # unhashable values (dicts, lists): each on its own
        return pd.Series([gated(v) for v in s.tolist()], index=s.index, dtype=object)
    changed = {v: r for v in distinct if (r := _redact_text(v)) != v}
    if not changed:
        return s
    return s.map(lambda v: changed.get(v, v) if isinstance(v, str) else v).astype(s.dtype)


_MEMO: dict[str, str] = {}
_MEMO_MAX = 50_000  # (values of at most 256 characters: a few tens of MB at worst)


def _redact_text(value: str) -> str:
    """`redact_text` remembered for short values (ids, envs, statuses repeat on every listing)."""
    if len(value) > 256:
        return redact_text(value)
    if (out := _MEMO.get(value)) is None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        out = _MEMO[value] = redact_text(value)
    return out


def _lines(frame: pd.DataFrame) -> pd.Series:
    """A log-lines frame's `text`, each file's lines redacted as one block (row order kept)."""
    text = frame["text"].tolist()
    out = list(text)
    files = frame["path"].astype(object).where(frame["path"].notna(), None).tolist()
    groups: dict = {}
    for i, p in enumerate(files):
        groups.setdefault(p, []).append(i)
    for rows in groups.values():
        block = [text[i] if isinstance(text[i], str) else "" for i in rows]
        lead = True  # the block's first lines may continue a secret begun before the read
        for i, line in zip(rows, split_redacted(block)):
            lead = lead and could_continue_secret(line)
            if isinstance(text[i], str):
                out[i] = HIDDEN if lead else line
    return pd.Series(out, index=frame.index, dtype=frame["text"].dtype)


def could_continue_secret(line: str) -> bool:
    """Whether a line alone is one bare key-like token (a PEM body line, a YAML value on the line
    after its name): hidden at the start of a read (its first line may be before), and never found
    by a log search (`logs.Filters`), which shows lines out of their context."""
    return _BARE.fullmatch(line) is not None


def split_redacted(lines: list[str]) -> list[str]:
    """`lines` redacted as one text joined by newlines, back as lines (a secret spanning lines is
    hidden on each line it covers)."""
    joined = "\n".join(lines)
    spans = hidden_spans(joined)
    if not spans:
        return list(lines)
    out, start, k = [], 0, 0
    for line in lines:
        end = start + len(line)
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        parts, at, j = [], start, k
        while j < len(spans) and spans[j][0] < end:
            a, b = max(spans[j][0], start), min(spans[j][1], end)
            if a < b:
                parts += (joined[at:a], HIDDEN)
                at = b
            j += 1
        out.append("".join(parts) + joined[at:end] if parts else line)
        start = end + 1
    return out


def hidden_spans(text: str) -> list[tuple[int, int]]:
    """The ranges of `text` that `redact_text` hides, found by placing the text it keeps: each kept
    piece at its earliest and latest possible place, the hidden range between them taken widest
    (never narrower than what was hidden)."""
    out = redact_text(text)
    if out == text:
        return []
    segs = out.split(HIDDEN)
    if len(segs) == 1 or not text.startswith(segs[0]) or not text.endswith(segs[-1]):
        return [(0, len(text))]
    m = len(segs) - 1
    early = [0] * (m + 1)
    for k in range(1, m + 1):
        at = text.find(segs[k], early[k - 1] + len(segs[k - 1]) + 1)
        if at < 0:
            return [(early[k - 1] + len(segs[k - 1]), len(text))]
        early[k] = at
    late = [0] * (m + 1)
    late[m] = len(text) - len(segs[m])
    for k in range(m - 1, -1, -1):
        at = text.rfind(segs[k], 0, late[k + 1] - 1) if k else 0
        late[k] = at if at >= 0 else 0
    spans = [(early[k - 1] + len(segs[k - 1]), max(late[k], early[k - 1] + len(segs[k - 1]) + 1)) for k in range(1, m + 1)]
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


# Records --------------------------------------------------------------------------------------------
def _dataclass(obj):
    changes = {}
    for f in dataclasses.fields(obj):
        if f.name in KEYS:
            continue
        v = getattr(obj, f.name)
        if v is None or isinstance(v, (bool, int, float, pd.Timestamp)):
            continue
        if isinstance(v, dict) and all(isinstance(x, (int, float)) for x in v.values()):
            continue  # numbers by name (rewards, timing): nothing to hide
        if isinstance(v, str):
            new = _redact_text(v)
        elif isinstance(v, list) and all(isinstance(x, (str, int)) for x in v):
            new = [_redact_text(x) if isinstance(x, str) else x for x in v]
            new = v if new == v else new
        else:
            new = gated(v)
        if new is not v:
            changes[f.name] = new
    return dataclasses.replace(obj, **changes) if changes else obj
