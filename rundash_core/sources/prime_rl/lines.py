"""The JSON-lines files of a prime-rl traces folder, read line by line: every complete JSON-object
line of an index, annotation, rollouts or `traces.jsonl` file parsed once per file version (lines
that are not objects are counted and named as problems), and one record line of a stream chunk
read by its offset (plain chunk by byte seek, sealed chunk through its seek table)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import orjson
import zstandard

from rundash_core import cache
from rundash_core.io import bytetail, zst_seekable
from rundash_core.io.bytetail import ByteTail
from rundash_core.io.files import file_id, open_file
from rundash_core.run import Problem

MAX_LINE = 64 << 20  # a record line read by its offset is at most this long (else: not complete)
READ_AHEAD = 16 << 20  # a wrong next offset must not read gigabytes: the rest goes line-wise
WINDOW = 16 << 20  # bytes of a JSON-lines file read per look
MAX_RECORD = MAX_LINE  # a longer line (no index row or trace is this long) is cut, named
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
            if b"\n" in data:
                return data[:data.index(b"\n")]
            if data.strip() and _still_last_line(fh, offset + len(data)) and _is_json(data):
                return data  # a finished file's last record, written without its newline (`objects` lists it)
            raise TornRecord(f"{plain}: the line at {offset} is not complete yet")
    try:
        return zst_seekable.read_line(plain + ".zst", offset)  # sealed (also: sealed since listing)
    except zstandard.ZstdError as e:  # a corrupt frame behind an intact seek table
        raise zst_seekable.SeekableError(f"{plain}.zst: {e}") from e


def _still_last_line(fh, end: int) -> bool:
    """Does the file end at `end` and has it been still long enough (`bytetail.SETTLE_S`) for a last
    line without newline to count as finished?"""
    st = os.fstat(fh.fileno())
    return st.st_size == end and time.time() - st.st_mtime >= bytetail.SETTLE_S


def _is_json(data: bytes) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


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


class RecordLines(ByteTail):
    """The follower of one JSON-lines file of a traces folder: a trace line may run long (whole
    episodes), so lines are cut only past MAX_RECORD."""

    line_cap = MAX_RECORD


@dataclass(frozen=True)
class _Parsed:
    """What a JSON-lines file gave so far: the kept objects, the follower that read them (forked
    to read on, so this value never changes: `ByteTail.fork`), its lines that are not objects, what
    was passed over, and whether the last item came from a last line without its newline (`held`:
    should that line go on, the item is taken back)."""

    tail: ByteTail
    items: list
    lines: int = 0
    bad: int = 0
    first_bad: int | None = None
    skipped: tuple = ()  # (what, line): runs of NUL bytes and overlong lines passed over
    held: tuple = (False, False)  # (the held last line gave an item, it was a bad line)


def objects(path: str, what: str, keep) -> list:
    """`keep(offset, length with the newline, object)` of every complete JSON-object line of a file
    (a torn last line waits for its newline; a last line without one counts once the file is still,
    `bytetail.SETTLE_S`), shared under `what`. A file that grew is read from where the last read
    ended (a live index of 70k episodes costs its new lines, not a re-parse); one replaced,
    truncated or rewritten in its last bytes is read again whole (`ByteTail` decides both). Only
    what `keep` returns is kept."""
    fid = file_id(path)
    if fid is None:
        return []
    key = (what, os.path.realpath(path))
    have = cache.shared.peek(key)
    settled = time.time() - fid.mtime >= bytetail.SETTLE_S  # (once still, a last line without newline counts)
    parsed = cache.shared.current(key, (fid, settled), lambda: _parse(path, keep, have),
                                  size=lambda v: _sampled_size(v.items))
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


def _parse(path: str, keep, have) -> _Parsed | None:
    """The file's lines parsed on from the last read (`have`: (stamp, `_Parsed`)), by its forked
    follower, a bounded window at a time: a run of NUL bytes (a sparse hole, a crash's zeros) ends
    the line before it and is skipped unread, a line longer than MAX_RECORD is cut (and so not an
    object); both are named."""
    before = have[1] if have is not None else None
    tail = before.tail.fork() if before is not None else RecordLines(path)
    items = list(before.items) if before is not None else []
    line, bad, first = (before.lines, before.bad, before.first_bad) if before is not None else (0, 0, None)
    skipped = list(before.skipped) if before is not None else []
    held_item, held_bad = before.held if before is not None else (False, False)
    while (new := tail.read_lines(WINDOW)) is not None:
        if new.reset:
            items, line, bad, first, skipped = [], 0, 0, None, []
        elif new.redo:  # the held last line went on: take back what it gave
            line -= 1
            if held_item:
                items.pop()
            if held_bad:
                bad -= 1
        held_item = held_bad = False
        data, at, last = new.view, 0, new.cut
        notes = tail.take_skipped()
        while at < last:
            end = new.data.find(b"\n", at, last)
            stop = last if end < 0 else end
            line += 1
            try:
                obj = orjson.loads(data[at:stop])
            except orjson.JSONDecodeError:
                obj = None
            is_last = end < 0 or end + 1 == last
            if isinstance(obj, dict):
                items.append(keep(new.start + at, (end + 1 if end >= 0 else last) - at, obj))
                held_item = new.held and is_last
            elif bytes(data[at:stop]).strip():
                bad, first = bad + 1, first or line
                held_bad = new.held and is_last
            at = stop + 1
        for note, offset in notes:
            skipped.append((note, line - new.data.count(b"\n", max(0, offset - new.start), last) + 1))
    if tail.error is not None and tail.fid is None:
        return None
    return _Parsed(tail, items, line, bad, first, tuple(skipped[:MAX_SKIPPED]), (held_item, held_bad))


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
