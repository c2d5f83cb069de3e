"""The JSON-lines files of a prime-rl traces folder, read line by line: every complete JSON-object
line of an index, annotation, rollouts or `traces.jsonl` file parsed once per file version (lines
that are not objects are counted and named as problems), and one record line of a stream chunk
read by its offset (plain chunk by byte seek, sealed chunk through its seek table)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import orjson
import zstandard

from rundash_core import cache
from rundash_core.io import zst_seekable
from rundash_core.io.bytetail import CHECKPOINT_BYTES, only_grew
from rundash_core.io.files import file_id, open_file, read_range
from rundash_core.io.holes import line_end, nul_run_fd, run_text, size_text
from rundash_core.run import Problem

MAX_LINE = 64 << 20  # a record line read by its offset is at most this long (else: not complete)
READ_AHEAD = 16 << 20  # a wrong next offset must not read gigabytes: the rest goes line-wise
WINDOW = 16 << 20  # bytes of a JSON-lines file read per look
MAX_RECORD = MAX_LINE  # a longer line (no index row or trace is this long) is skipped, named
MAX_SKIPPED = 20


class TornRecord(KeyError):
    """The line at a record's offset has no newline yet (a torn or cut-short chunk)."""


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
                raise TornRecord(f"{plain}: the line at {offset} is not complete yet")
            return data[:data.index(b"\n")]
    try:
        return zst_seekable.read_line(plain + ".zst", offset)  # sealed (also: sealed since listing)
    except zstandard.ZstdError as e:  # a corrupt frame behind an intact seek table
        raise zst_seekable.SeekableError(f"{plain}.zst: {e}") from e


def _read_to_newline(fh) -> bytes:
    parts, total = [], 0
    while total < MAX_LINE:
        block = fh.read(1 << 16)
        if not block.strip(b"\0"):  # the end, or a hole: no newline comes
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
    skipped: tuple = ()  # (what, line): runs of NUL bytes and overlong lines passed over


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
    if parsed.skipped:
        SKIPPED[key[1]] = parsed.skipped
    else:
        SKIPPED.pop(key[1], None)
    return parsed.items


def _parse(path: str, fid, keep, have) -> _Parsed:
    """The file's complete lines parsed on from the last read (`have`: (its file id, `_Parsed`)),
    a bounded window at a time: a run of NUL bytes (a sparse hole, a crash's zeros) ends the line
    before it and is skipped unread, a line longer than MAX_RECORD is skipped; both are named."""
    old_fid, before = have if have is not None else (None, _Parsed(0, []))
    if not only_grew(path, fid, since=old_fid, end=before.end, checkpoint=before.checkpoint):
        before = _Parsed(0, [])  # replaced, truncated or rewritten: read again whole
    items, line, bad, first, skipped = [], before.lines, before.bad, before.first_bad, list(before.skipped)
    at, size = before.end, fid.size

    def take(offset: int, raw: bytes, length: int) -> None:
        nonlocal line, bad, first
        line += 1
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            items.append(keep(offset, length, obj))
        elif raw.strip():
            bad, first = bad + 1, first or line
    with open_file(path) as fh:
        fd = fh.fileno()
        while at < size:
            data = os.pread(fd, min(WINDOW, size - at), at)
            run = nul_run_fd(fd, data, at, size)
            body = data if run is None else data[:run[0] - at]
            pos = 0
            while (end := body.find(b"\n", pos)) >= 0:
                take(at + pos, body[pos:end], end + 1 - pos)
                pos = end + 1
            if run is not None:  # the line before the run ends there
                if body[pos:].strip():
                    take(at + pos, body[pos:], len(body) - pos)
                skipped.append((run_text(run), line + 1))
                at = run[1]
            elif pos:
                at += pos
            elif len(data) == WINDOW:  # one line longer than the window
                end, newline, _cr = line_end(path, at + len(data), size)
                if newline and end - at <= MAX_RECORD:
                    take(at, os.pread(fd, end - 1 - at, at), end - at)
                elif newline or end < size:
                    line += 1
                    skipped.append((f"a line of {size_text(end - at)} (longer than {size_text(MAX_RECORD)}: "
                                    "skipped)", line))
                else:
                    break  # a long torn last line: read when its newline arrives
                at = end
            else:
                break  # a torn last line waits for its newline
    checkpoint = read_range(path, max(0, at - CHECKPOINT_BYTES), at) if at else b""
    return _Parsed(at, before.items + items if before.items else items, line, bad, first, checkpoint,
                   tuple(skipped[:MAX_SKIPPED]))


# real path -> (complete lines that are not a JSON object, the first one's line number), as last parsed
BAD_LINES: dict[str, tuple[int, int]] = {}
SKIPPED: dict[str, tuple] = {}  # real path -> ((what, line), …): NUL runs and overlong lines passed over


def bad_line_problems(run_path: str) -> list[Problem]:
    """The trace files of a run (index, annotations, rollouts, traces.jsonl) whose last parse met
    complete lines that are not JSON objects: those lines are skipped, and said so."""
    root = os.path.realpath(run_path) + os.sep
    return [Problem(path, "lines that are not JSON objects (skipped)", n, first)
            for path, (n, first) in list(BAD_LINES.items()) if path.startswith(root)] + [
        Problem(path, what, 1, line) for path, skipped in list(SKIPPED.items()) if path.startswith(root)
        for what, line in skipped]


def _sampled_size(items: list) -> int:
    """The deep size of a long list of parsed rows, from the first 64 (a walk of a 70k-row index
    costs more than parsing it)."""
    head = items[:64]
    return 64 + (cache._deep_size(head) * len(items) // len(head) if head else 0)
