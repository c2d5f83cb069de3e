"""Lines of a block of log bytes, as the reader needs them: each line with its file offset, and
the lines a filter may find, picked by one scan of the whole block.

A filter searches each line's text without colour (`logtext.plain_text`). Searching a 32 MB scan
line by line costs a wrapped RE2 call per line; here the block is made plain once, keeping one
line per line (`plain_block`), and one multi-line RE2 scan names the lines with a match
(`UserPattern.line_hits`). The reader still checks each picked line alone (`Filters.keeps`).
"""
from __future__ import annotations

import re

import numpy as np

from rundash_core.logs import line as logtext

MAX_LINE = 1 << 20  # a longer line is shown as its first and last LONG_LINE_SHOWN bytes
LONG_LINE_SHOWN = 64 << 10
TORCHRUN_LINE = re.compile(rb"^\[[A-Za-z_]*\d+\]:", re.M)


def plain_block(data: bytes) -> bytes | None:
    """Lines of bytes as a filter sees each of them (`plain_text`: NULs, torchrun prefixes,
    colour and a CR-LF's CR cut), still one line per line; None when they are not valid UTF-8
    (then each line is decoded alone). A line with another carriage return (tqdm's redraws) keeps
    every redraw here: `plain_text` keeps the last."""
    try:
        data.isascii() or data.decode("utf-8")  # ASCII (most logs) is UTF-8 without a decoded copy
    except UnicodeDecodeError:
        return None
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
    if b"\r\n" in data:
        data = data.replace(b"\r\n", b"\n")
    if b"]:" in data:
        data = TORCHRUN_LINE.sub(b"", data)
    return logtext.ANSI_BYTES.sub(b"", data) if b"\x1b" in data else data


def shown(raw: bytes, *, size: int | None = None) -> bytes:
    """A line as the reader keeps it: whole up to MAX_LINE bytes; a longer one (a dumped tensor, a
    batch printed whole), of `size` bytes, as its first and last LONG_LINE_SHOWN bytes around a
    note of what is left out (the head keeps its time and level)."""
    size = len(raw) if size is None else size
    if size <= MAX_LINE:
        return raw
    note = f" … [{size / 2**20:,.1f} MB line: its middle is not shown] … "
    return raw[:LONG_LINE_SHOWN] + note.encode() + raw[-LONG_LINE_SHOWN:]


def split_lines(data: bytes, first: int) -> list:
    """(offset, raw line) of each line of `data`, which starts at file offset `first` (a line
    longer than MAX_LINE as `shown`)."""
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    out, pos = [], first
    for raw in parts:
        out.append((pos, raw if len(raw) <= MAX_LINE else shown(raw)))
        pos += len(raw) + 1
    return out


def grep_lines(data: bytes, first: int, pattern) -> list:
    """(offset, raw line) of the lines of `data` (from file offset `first`) the pattern may find:
    every line it finds, picked by one RE2 scan of the whole block without colour (instead of one
    search per line), plus lines with a carriage return, whose block text holds every tqdm redraw.
    `Filters.keeps` then checks each line alone."""
    plain = plain_block(data)
    hits = pattern.line_hits(plain) if plain is not None else None
    if hits is None:  # not UTF-8, or a pattern anchored at the text's ends: line by line
        return [(o, raw) for o, raw in split_lines(data, first) if pattern.search(logtext.plain_text(raw))]
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    rows = set(np.searchsorted(np.flatnonzero(np.frombuffer(plain, np.uint8) == 10), hits).tolist())
    if b"\r" in plain:
        rows.update(np.searchsorted(ends, [m.start() for m in re.finditer(rb"\r", data)]).tolist())
    out = []
    for i in sorted(r for r in rows if r < len(ends)):
        start = int(ends[i - 1]) + 1 if i else 0
        out.append((first + start, shown(data[start:int(ends[i])])))
    return out
