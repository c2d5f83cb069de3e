"""Following an append-only file by byte offset: which complete lines are new since the last look.

`ByteTail` remembers how far a file has been read (byte offset plus file identity), so a refresh
reads only what was appended, and every byte once: a partial last line (a writer mid-line, or the
tail of a block) is kept in memory, not read again, until its newline arrives, or until the file
has not changed for SETTLE_S seconds: then it is a last line written without a newline (a finished
log) and is handed out (`NewLines.held`). Should the file then grow without that newline first, the
line is handed out again whole, flagged `NewLines.redo` (callers replace what they took from it);
if the newline comes first, it is skipped (no empty line). A file that shrank or was replaced
(another inode, or the last bytes looked at changed) is read again from the start, and the caller
is told to drop what it built.

Format readers build on it: `JsonlTail` reads everything new at once, `VerlLogTail` asks for
blocks of about a megabyte so a 1 GB console log never sits in memory whole.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from .files import FileId, describe_unreadable, file_id, read_range

CHECKPOINT_BYTES = 64  # the last bytes looked at; if they change, the file was rewritten, not appended
SETTLE_S = 5.0  # a last line without its newline is read once the file has been still this long


@dataclass
class NewLines:
    """Complete lines appended since the last read: `data[:cut]`, starting at file offset `start`."""

    data: bytes
    cut: int
    start: int
    reset: bool  # read from the start again: drop everything built from this file before
    redo: bool = False  # the first line replaces the last line handed out (it was `held` and went on)
    held: bool = False  # the last line has no newline (the file is still): it may come again as `redo`

    @property
    def lines(self) -> bytes:
        return self.data if self.cut == len(self.data) else self.data[: self.cut]

    @property
    def view(self) -> memoryview:
        """The complete lines without a copy."""
        return memoryview(self.data)[: self.cut]


class ByteTail:
    """Follows one append-only file; `read_lines()` returns only what is new since last time."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.error: str | None = None  # why the file cannot be read right now
        self.reads = 0  # bytes read from the file (each byte once per version of the file)
        self._forget()

    def _forget(self) -> None:
        """Nothing read yet (a new file, or one to read again from the start)."""
        self.fid: FileId | None = None
        self.offset = 0  # end of the lines handed out
        self._seen = 0  # end of the bytes read: the handed-out lines plus `_pending`
        self._pending = b""  # a partial last line (or block tail), kept until its newline comes
        self._held: bytes | None = None  # a last line handed out without its newline
        self._redo_due = False  # the held line went on: the next lines handed out start with it
        self._checkpoint = b""  # the last bytes before `_seen`

    @property
    def pending_bytes(self) -> int:
        """Bytes of a partial last line held back until its newline arrives."""
        return len(self._pending)

    def read_lines(self, max_bytes: int | None = None) -> NewLines | None:
        """The next complete lines (about `max_bytes` of new bytes at most; at least one whole line
        when one is there). None when no line is new (a partial line only), or the file cannot be
        read (see `error`)."""
        fid = file_id(self.path)
        if fid is None:
            self.error = "missing" if not os.path.lexists(self.path) else describe_unreadable(self.path)
            return None
        reset = not self._continues(fid)
        if reset:
            self._forget()
        settled = time.time() - fid.mtime >= SETTLE_S
        if not reset and fid.size == self._seen and not (settled and self._pending.strip()):
            self.fid, self.error = fid, None  # nothing appended (a touch, or the same bytes)
            return None
        try:
            new = self._read(self._seen, fid.size, max_bytes)
        except OSError as e:
            self.error = describe_unreadable(self.path) or str(e)
            return None
        self.error, self.fid = None, fid
        self.reads += len(new)
        self._seen += len(new)
        self._checkpoint = (self._checkpoint + new[-CHECKPOINT_BYTES:])[-CHECKPOINT_BYTES:]
        if self._held is not None and new:
            if new[:1] == b"\n":  # the held line's newline came late: it was whole
                new, self.offset = new[1:], self.offset + 1
            else:  # the held line went on: it is handed out again, whole
                self._pending, self.offset, self._redo_due = self._held, self.offset - len(self._held), True
            self._held = None
        data = self._pending + new if self._pending else new
        start = self.offset
        cut = data.rfind(b"\n") + 1
        held = cut < len(data) and settled and self._seen == fid.size and bool(data[cut:].strip())
        if held:
            self._held, cut = data[cut:], len(data)  # a finished file's last line
        self._pending = data[cut:]
        self.offset = start + cut
        if not cut and not reset:
            return None
        redo, self._redo_due = self._redo_due and cut > 0, self._redo_due and not cut
        return NewLines(data, cut, start, reset, redo, held)

    def _read(self, start: int, size: int, max_bytes: int | None) -> bytes:
        """Bytes [start, size), or a block of `max_bytes` grown until it holds a newline."""
        if max_bytes is None or size - start <= max_bytes:
            return read_range(self.path, start, size)
        end = start + max_bytes
        parts = [read_range(self.path, start, end)]
        while b"\n" not in parts[-1] and end < size:  # one line longer than a block
            more = read_range(self.path, end, min(size, end + max_bytes * len(parts)))
            if not more:
                break
            parts.append(more)
            end += len(more)
        return b"".join(parts)

    def _continues(self, fid: FileId) -> bool:
        """Is `fid` the same file we read, grown or unchanged, with the bytes we read intact?"""
        if self.fid is None or not fid.same_file(self.fid) or fid.size < self._seen:
            return False
        if not self._checkpoint:
            return self._seen == 0
        try:
            return read_range(self.path, self._seen - len(self._checkpoint), self._seen) == self._checkpoint
        except OSError:
            return False
