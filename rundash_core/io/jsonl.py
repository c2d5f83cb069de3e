"""Incremental JSONL reading into Arrow tables.

`JsonlTail` remembers how far a file has been read (byte offset plus file identity), so a refresh
parses only the complete lines appended since. A partial last line (a writer mid-line) is held
back until its newline arrives; a file that shrank or was replaced is re-read from the start.

Parsing is pyarrow's multi-threaded NDJSON reader on the whole byte range (the fast path). Only
when that fails (garbage lines, bad UTF-8, NUL bytes, non-object lines) is the range split into
pieces, and only the pieces that fail are parsed line by line, so one bad line costs one piece,
not the file. Every line that could not be read is counted in `problems`, by kind, with the first
line number where it happened.
"""
from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.json as pj

from .files import FileId, describe_unreadable, file_id, read_range

PIECE_BYTES = 4 << 20
CHECKPOINT_BYTES = 64


@dataclass
class LineProblems:
    """Counts of unreadable lines per kind of problem, with the first line number of each kind."""

    counts: dict[str, int] = field(default_factory=dict)
    first_line: dict[str, int] = field(default_factory=dict)

    def add(self, what: str, line: int, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n
        self.first_line.setdefault(what, line)

    def update(self, other: "LineProblems") -> None:
        for what, n, line in other.items():
            self.add(what, line, n)

    def clear(self) -> None:
        self.counts.clear()
        self.first_line.clear()

    def items(self):
        for what, n in self.counts.items():
            yield what, n, self.first_line[what]


RowCoercer = Callable[[dict, int, LineProblems], dict | None]


def parse_jsonl_bytes(
    buf: bytes,
    problems: LineProblems,
    *,
    first_line: int = 1,
    coerce_row: RowCoercer | None = None,
) -> pa.Table:
    """Parse complete JSONL lines into one Arrow table; bad lines are counted, never raised."""
    if not buf.strip():
        return pa.table({})
    if b"NaN" in buf or b"Infinity" in buf:
        _count_non_finite(buf, problems, first_line)
    try:
        return _arrow_parse(buf)
    except _ARROW_FAILS:
        pass
    found = LineProblems()  # merged into `problems` once, whichever way the range is read
    tables = []
    line = first_line
    for piece in _split_pieces(buf, PIECE_BYTES):
        try:
            tables.append(_arrow_parse(piece))
        except _ARROW_FAILS:
            tables.append(_parse_lines(piece, found, line, coerce_row))
        line += piece.count(b"\n")
    tables = [t for t in tables if t.num_columns]
    try:
        table = pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # a key has different types in different pieces: read the whole range line by line
        found = LineProblems()
        table = _parse_lines(buf, found, first_line, coerce_row)
    problems.update(found)
    return table


# Arrow's reader raises these on lines it cannot take (bad UTF-8 surfaces as UnicodeDecodeError).
_ARROW_FAILS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError)
# Arrow reads a bare `null` line as a row of nulls; it is not a JSON object, so the line reader
# must see it.
_NULL_LINE = re.compile(rb"[ \t\r]*null[ \t\r]*(?:\n|$)")
_NULL_AFTER_NEWLINE = re.compile(rb"\n[ \t\r]*null[ \t\r]*(?:\n|$)")  # a literal first byte: fast scan


def _arrow_parse(buf: bytes) -> pa.Table:
    if b"null" in buf and (_NULL_LINE.match(buf) or _NULL_AFTER_NEWLINE.search(buf)):
        raise pa.ArrowInvalid("a line is a bare null")
    block = min(max(len(buf) // 8, 1 << 20), 64 << 20)
    try:
        table = pj.read_json(io.BytesIO(buf), read_options=pj.ReadOptions(block_size=block))
    except pa.ArrowInvalid as e:
        if "straddling" not in str(e):
            raise
        table = pj.read_json(io.BytesIO(buf), read_options=pj.ReadOptions(block_size=len(buf) + 1))
    table.validate(full=True)  # Arrow keeps invalid UTF-8 in strings and keys; this raises on it
    return table


def _split_pieces(buf: bytes, size: int):
    start = 0
    while start < len(buf):
        end = buf.find(b"\n", min(start + size, len(buf) - 1))
        end = len(buf) if end < 0 else end + 1
        yield buf[start:end]
        start = end


def _count_non_finite(buf: bytes, problems: LineProblems, first_line: int) -> None:
    for i, raw in enumerate(buf.split(b"\n")):
        if b"NaN" in raw or b"Infinity" in raw:
            problems.add("NaN/Infinity values (shown as gaps or ±inf)", first_line + i)


def _parse_lines(piece: bytes, problems: LineProblems, first_line: int, coerce_row) -> pa.Table:
    rows = []
    for i, raw in enumerate(piece.split(b"\n")):
        line_no = first_line + i
        if not raw.strip():
            continue
        if b"\x00" in raw:
            problems.add("NUL bytes (removed)", line_no)
            raw = raw.replace(b"\x00", b"")
            if not raw.strip():
                continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            problems.add("invalid UTF-8 (replaced)", line_no)
            text = raw.decode("utf-8", errors="replace")
        try:
            row = json.loads(text)
        except ValueError:
            what = "truncated JSON line" if text.lstrip().startswith("{") else "not JSON"
            problems.add(what, line_no)
            continue
        if not isinstance(row, dict):
            problems.add("not a JSON object", line_no)
            continue
        if coerce_row is not None:
            row = coerce_row(row, line_no, problems)
            if row is None:
                continue
        rows.append(row)
    if not rows:
        return pa.table({})
    # not pa.Table.from_pylist: it takes the columns from the first row's keys only
    return _from_rows(rows, problems, first_line)


def _from_rows(rows: list[dict], problems: LineProblems, first_line: int) -> pa.Table:
    """One column per key of any row; a key whose values change type keeps numbers (and None)
    and turns the rest into strings."""
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    cols = {}
    for k in keys:
        vals = [r.get(k) for r in rows]
        try:
            cols[k] = pa.array(vals)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            problems.add(f"mixed value types for key {k!r}", first_line)
            cols[k] = pa.array([None if v is None else json.dumps(v) if not isinstance(v, str) else v
                                for v in vals], type=pa.string())
    return pa.table(cols)


@dataclass
class TailResult:
    table: pa.Table
    first_line: int
    reset: bool  # the file was (re)read from the start: callers drop what they built before


class JsonlTail:
    """Follows one append-only JSONL file; `poll()` returns only what is new since last time."""

    def __init__(self, path: str | os.PathLike, coerce_row: RowCoercer | None = None):
        self.path = os.fspath(path)
        self.coerce_row = coerce_row
        self.fid: FileId | None = None
        self.offset = 0
        self.lines = 0
        self.pending_bytes = 0
        self.problems = LineProblems()
        self.error: str | None = None  # why the file cannot be read right now
        self._checkpoint = b""

    def poll(self) -> TailResult | None:
        """Read appended complete lines. None when nothing changed (or the file is missing)."""
        fid = file_id(self.path)
        if fid is None:
            self.error = "missing" if not os.path.lexists(self.path) else describe_unreadable(self.path)
            return None
        reset = not self._continues(fid)
        if not reset and fid.size == self.offset + self.pending_bytes and fid == self.fid:
            return None
        start = 0 if reset else self.offset
        try:
            data = read_range(self.path, start, fid.size)
        except OSError as e:
            self.error = describe_unreadable(self.path) or str(e)
            return None
        self.error = None
        if reset:
            self.offset, self.lines = 0, 0
            self.problems.clear()
            self._checkpoint = b""  # the old file's bytes say nothing about the new one
        self.fid = fid
        cut = data.rfind(b"\n") + 1
        self.pending_bytes = len(data) - cut
        first_line = self.lines + 1
        complete = data[:cut]
        self.offset += cut
        self.lines += complete.count(b"\n")
        if cut:
            self._checkpoint = complete[-CHECKPOINT_BYTES:]
        table = parse_jsonl_bytes(complete, self.problems, first_line=first_line, coerce_row=self.coerce_row)
        return TailResult(table, first_line, reset)

    def _continues(self, fid: FileId) -> bool:
        """Is `fid` the same file we read, grown or unchanged, with the bytes we read intact?"""
        if self.fid is None or not fid.same_file(self.fid) or fid.size < self.offset:
            return False
        if not self._checkpoint:
            return self.offset == 0
        try:
            start = self.offset - len(self._checkpoint)
            return read_range(self.path, start, self.offset) == self._checkpoint
        except OSError:
            return False
