"""The JSON-lines files of a prime-rl traces folder, read line by line: every complete JSON-object
line of an index, annotation, rollouts or `traces.jsonl` file parsed once per file version (lines
that are not objects are counted and named as problems), and one record line of a stream chunk
read by its offset (plain chunk by byte seek, sealed chunk through its seek table)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import orjson
import zstandard

from .. import cache
from ..io import zst_seekable
from ..io.bytetail import CHECKPOINT_BYTES, advance_checkpoint, only_grew
from ..io.files import file_id, open_file
from ..run import Problem

MAX_LINE = 1 << 30
READ_AHEAD = 16 << 20  # a wrong next offset must not read gigabytes: the rest goes line-wise


def read_record_line(plain: str, offset: int, length: int = 0) -> bytes:
    """The record line at `offset` of a chunk: the plain file by byte seek when it exists (a torn
    last line, with no newline yet, is refused), else the sealed file through its seek table."""
    try:
        fh = open_file(plain)
    except FileNotFoundError:
        fh = None
    if fh is not None:
        with fh:
            fh.seek(offset)  # `length` comes from the next index row: a hint, never trusted
            data = fh.read(min(length, READ_AHEAD)) if length > 0 else b""
            if b"\n" not in data:
                data += _read_to_newline(fh)
            if b"\n" not in data:
                raise KeyError(f"{plain}: the line at {offset} is not complete yet")
            return data[:data.index(b"\n")]
    try:
        return zst_seekable.read_line(plain + ".zst", offset)  # sealed (also: sealed since listing)
    except zstandard.ZstdError as e:  # a corrupt frame behind an intact seek table
        raise zst_seekable.SeekableError(f"{plain}.zst: {e}") from e


def _read_to_newline(fh) -> bytes:
    parts, total = [], 0
    while total < MAX_LINE:
        block = fh.read(1 << 16)
        if not block:
            break
        cut = block.find(b"\n")
        if cut >= 0:
            parts.append(block[:cut + 1])
            break
        parts.append(block)
        total += len(block)
    return b"".join(parts)


@dataclass(frozen=True)
class _Parsed:
    """What a JSON-lines file gave so far: the kept objects, where its complete lines end (a torn
    last line waits for its newline), its lines that are not objects, and its last bytes read (if
    they are unchanged, the file only grew: `bytetail.only_grew`)."""

    end: int
    items: list
    lines: int = 0
    bad: int = 0
    first_bad: int | None = None
    checkpoint: bytes = b""


def objects(path: str, what: str, keep) -> list:
    """`keep(offset, length with the newline, object)` of every complete JSON-object line of a file
    (a torn last line is left out), shared under `what`. A file that grew is read from where the
    last read ended (a live index of 70k episodes costs its new lines, not a re-parse); one
    replaced, truncated or rewritten in its last bytes is read again whole. Only what `keep`
    returns is kept."""
    fid = file_id(path)
    if fid is None:
        return []
    key = (what, os.path.realpath(path))
    have = cache.shared.peek(key)
    parsed = cache.shared.current(key, fid, lambda: _parse(path, fid, keep, have), size=lambda v: _sampled_size(v.items))
    if parsed is None:
        return []
    if parsed.bad:
        BAD_LINES[key[1]] = (parsed.bad, parsed.first_bad)
    else:
        BAD_LINES.pop(key[1], None)
    return parsed.items


def _parse(path: str, fid, keep, have) -> _Parsed:
    """The file's complete lines parsed on from the last read (`have`: (its file id, `_Parsed`))."""
    old_fid, before = have if have is not None else (None, _Parsed(0, []))
    if not only_grew(path, fid, since=old_fid, end=before.end, checkpoint=before.checkpoint):
        before = _Parsed(0, [])  # replaced, truncated or rewritten: read again whole
    with open_file(path) as fh:
        fh.seek(before.end)
        data = fh.read(max(0, fid.size - before.end))
    items, pos, line, bad, first = [], 0, before.lines, before.bad, before.first_bad
    while (end := data.find(b"\n", pos)) >= 0:
        line += 1
        try:
            obj = orjson.loads(data[pos:end])
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            items.append(keep(before.end + pos, end + 1 - pos, obj))
        elif data[pos:end].strip():
            bad, first = bad + 1, first or line
        pos = end + 1
    checkpoint = advance_checkpoint(before.checkpoint, data[max(0, pos - CHECKPOINT_BYTES):pos])
    return _Parsed(before.end + pos, before.items + items if before.items else items, line, bad, first, checkpoint)


# real path -> (complete lines that are not a JSON object, the first one's line number), as last parsed
BAD_LINES: dict[str, tuple[int, int]] = {}


def bad_line_problems(run_path: str) -> list[Problem]:
    """The trace files of a run (index, annotations, rollouts, traces.jsonl) whose last parse met
    complete lines that are not JSON objects: those lines are skipped, and said so."""
    root = os.path.realpath(run_path) + os.sep
    return [Problem(path, "lines that are not JSON objects (skipped)", n, first)
            for path, (n, first) in list(BAD_LINES.items()) if path.startswith(root)]


def _sampled_size(items: list) -> int:
    """The deep size of a long list of parsed rows, from the first 64 (a walk of a 70k-row index
    costs more than parsing it)."""
    head = items[:64]
    return 64 + (cache._deep_size(head) * len(items) // len(head) if head else 0)
