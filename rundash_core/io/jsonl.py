"""Incremental JSONL reading.

`JsonlTail` follows the file with a `ByteTail` (byte offset plus file identity), so a refresh
parses only the complete lines appended since. A partial last line (a writer mid-line) is held
back until its newline arrives; a file that shrank or was replaced is re-read from the start.

Lines are parsed with orjson (strict, fast); only a line orjson rejects goes through the lenient
path (NUL bytes removed, bad UTF-8 replaced, `NaN`/`Infinity` accepted by the stdlib parser), and
a line that still cannot be read is counted in `problems`, by kind, with the first line number.
`dict_or_empty` / `list_or_empty` read a field of a parsed row that should hold an object or a
list, whatever the writer put there (a string or number where a list belongs is not iterated).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

import orjson

from rundash_core.io.bytetail import ByteTail


@dataclass
class LineProblems:
    """Counts of unreadable lines per kind of problem, with the first line number of each kind."""

    counts: dict[str, int] = field(default_factory=dict)
    first_line: dict[str, int] = field(default_factory=dict)

    def add(self, what: str, line: int, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n
        self.first_line.setdefault(what, line)

    def update(self, other: LineProblems) -> None:
        for what, n, line in other.items():
            self.add(what, line, n)

    def clear(self) -> None:
        self.counts.clear()
        self.first_line.clear()

    def discard(self, other: LineProblems) -> None:
        """Take back what `other` added (a last line read before its end, now read again whole)."""
        for what, n, _line in other.items():
            left = self.counts.get(what, 0) - n
            if left > 0:
                self.counts[what] = left
            else:
                self.counts.pop(what, None)
                self.first_line.pop(what, None)

    def items(self):
        for what, n in self.counts.items():
            yield what, n, self.first_line[what]


@dataclass
class Parsed:
    rows: list[dict]  # the JSON objects, in file order
    nlines: int  # lines read (good or bad)
    first_line: int
    line_numbers: list[int] | None = None  # line of each row; None: rows[i] is line first_line + i

    def line_of(self, i: int) -> int:
        return self.first_line + i if self.line_numbers is None else self.line_numbers[i]


MAX_LINE_BYTES = 8 << 20  # one metrics row is a few KB; a longer line costs its time and memory, not the server's


def parse_jsonl_bytes(buf: bytes, problems: LineProblems, *, first_line: int = 1) -> Parsed:
    """Parse complete JSONL lines; bad lines are counted in `problems`, never raised."""
    if not buf:
        return Parsed([], 0, first_line)
    lines = buf.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    try:
        if max(map(len, lines)) > MAX_LINE_BYTES:
            raise orjson.JSONDecodeError("a line is too long", "", 0)
        rows = list(map(orjson.loads, lines))  # the fast path: every line is clean JSON
    except orjson.JSONDecodeError:
        rows = [_lenient(raw, problems, first_line + i) for i, raw in enumerate(lines)]
    if all(type(r) is dict for r in rows):
        return Parsed(rows, len(lines), first_line)
    kept, numbers = [], []
    for i, r in enumerate(rows):
        if type(r) is dict:
            kept.append(r)
            numbers.append(first_line + i)
        elif r is not _SKIP:
            problems.add("not a JSON object", first_line + i)
    return Parsed(kept, len(lines), first_line, numbers)


_SKIP = object()  # a line already accounted for (blank, or counted as a problem)


def _lenient(raw: bytes, problems: LineProblems, line_no: int):
    if len(raw) > MAX_LINE_BYTES:
        problems.add(f"line longer than {MAX_LINE_BYTES >> 20} MiB (skipped)", line_no)
        return _SKIP
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark (a file begun by a Windows tool): not data
        return _lenient(raw[3:], problems, line_no)
    if not raw.strip():
        return _SKIP
    if b"\x00" in raw:
        problems.add("NUL bytes (removed)", line_no)
        raw = raw.replace(b"\x00", b"")
        if not raw.strip():
            return _SKIP
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        problems.add("invalid UTF-8 (replaced)", line_no)
        text = raw.decode("utf-8", errors="replace")
    try:
        row = json.loads(text)
    except RecursionError:  # orjson stops at 1024 levels; the stdlib parser recurses past the stack
        problems.add("JSON nested too deep (skipped)", line_no)
        return _SKIP
    except ValueError:
        problems.add("truncated JSON line" if text.lstrip().startswith("{") else "not JSON", line_no)
        return _SKIP
    if b"NaN" in raw or b"Infinity" in raw:
        problems.add("NaN/Infinity values (shown as gaps or ±inf)", line_no)
    if _ESCAPE.search(raw):
        row = _without_lone_surrogates(row, problems, line_no)
    return row


_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a \uD800-\uDFFF escape: orjson refuses a lone one, json does not


def _without_lone_surrogates(row, problems: LineProblems, line_no: int):
    """The row with each lone surrogate (valid in JSON text, not encodable as UTF-8: pyarrow,
    the browser and every write raise on it) replaced by U+FFFD; pairs are kept as characters."""
    try:
        text = json.dumps(row, ensure_ascii=False, allow_nan=True)
        text.encode("utf-8")
        return row
    except UnicodeEncodeError:
        pass
    except (ValueError, RecursionError):
        return row
    problems.add("lone UTF-16 surrogate escapes (replaced by U+FFFD)", line_no)
    return json.loads(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))


@dataclass
class TailResult:
    parsed: Parsed
    reset: bool  # the file was (re)read from the start: callers drop what they built before

    @property
    def rows(self) -> list[dict]:
        return self.parsed.rows

    @property
    def first_line(self) -> int:
        return self.parsed.first_line


class JsonlTail(ByteTail):
    """Follows one append-only JSONL file; `poll()` returns only what is new since last time."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(path)
        self.lines = 0
        self.problems = LineProblems()
        self._held_problems = LineProblems()  # what a last line without its newline added

    def poll(self) -> TailResult | None:
        """Parse appended complete lines, a bounded window at a time. None when nothing changed
        (or the file is missing). A last line read before its end and then read again whole keeps
        its line number, and its problems are counted once (the rows, read twice, merge: the later
        wins). A cut line or a run of NUL bytes the tail skipped is a problem of its line."""
        parts: list[Parsed] = []
        reset = False
        while (new := self.read_lines()) is not None:
            if new.reset:
                self.lines, reset, parts = 0, True, []
                self.problems.clear()
            elif new.redo:
                self.lines -= 1
                self.problems.discard(self._held_problems)
            self._held_problems = LineProblems()
            parsed = parse_jsonl_bytes(new.lines, self.problems, first_line=self.lines + 1)
            self.lines += parsed.nlines
            parts.append(parsed)
            for what, _at in self.take_skipped():
                self.problems.add(what, self.lines + 1)
            if new.held:
                self._held_problems = _line_problems(new.lines[new.lines.rfind(b"\n") + 1:], self.lines)
            if new.held or not new.cut:
                break
        if not parts:
            return None
        return TailResult(parts[0] if len(parts) == 1 else _joined(parts), reset)


def _joined(parts: list[Parsed]) -> Parsed:
    """The windows of one poll as one Parsed (rows in file order, each with its line)."""
    numbers = [p.line_of(i) for p in parts for i in range(len(p.rows))]
    return Parsed([r for p in parts for r in p.rows], sum(p.nlines for p in parts), parts[0].first_line, numbers)


def _line_problems(raw: bytes, line_no: int) -> LineProblems:
    """The problems one line adds (as `parse_jsonl_bytes` counts them)."""
    problems = LineProblems()
    row = _lenient(raw, problems, line_no)
    if row is not _SKIP and type(row) is not dict:
        problems.add("not a JSON object", line_no)
    return problems


def dict_or_empty(v) -> dict:
    """`v` when it is a JSON object, else {}."""
    return v if isinstance(v, dict) else {}


def list_or_empty(v) -> list:
    """`v` when it is a JSON list, else []."""
    return v if isinstance(v, list) else []


def read_located_object(locator: str, *, sample: str) -> dict:
    """The JSON object of one line, read by its `path:offset:length` locator (one byte range); a
    KeyError naming `sample` when the line cannot be read or holds no object."""
    from rundash_core.frames import parse_line_locator
    from rundash_core.io.files import read_range

    path, offset, length = parse_line_locator(locator)
    try:
        raw = read_range(path, offset, offset + length)
    except OSError as e:
        raise KeyError(f"{sample} cannot be read ({e})") from e
    problems = LineProblems()  # else read as the tail reads it: NaN, NUL bytes, bad UTF-8 are lenient
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        record = _lenient(raw, problems, 1)
    if record is _SKIP or not isinstance(record, dict):
        why = ", ".join(problems.counts) or "not a JSON object"
        raise KeyError(f"{sample} cannot be read ({why})")
    return record
