"""Following an append-only file by byte offset: which complete lines are new since the last look.

`ByteTail` remembers how far a file has been read (byte offset plus file identity), so a refresh
reads only what was appended. A partial last line (a writer mid-line) is held back until its
newline arrives, or until the file has not changed for SETTLE_S seconds: then it is a last line
written without a newline (a finished log) and is read; should the file grow again without a
newline first, that line is read again whole. A file that shrank or was replaced (another inode,
or the bytes just before the offset changed) is read again from the start, and the caller is told
to drop what it built.

Format readers build on it: `JsonlTail` reads everything new at once, `VerlLogTail` asks for
blocks of about a megabyte so a 1 GB console log never sits in memory whole.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from .files import FileId, describe_unreadable, file_id, read_range

CHECKPOINT_BYTES = 64  # the last bytes read; if they change, the file was rewritten, not appended
SETTLE_S = 5.0  # a last line without its newline is read once the file has been still this long


@dataclass
class NewLines:
    """Complete lines appended since the last read: `data[:cut]`, starting at file offset `start`."""

    data: bytes
    cut: int
    start: int
    reset: bool  # read from the start again: drop everything built from this file before

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
        self.fid: FileId | None = None
        self.offset = 0  # end of the complete lines handed out
        self.error: str | None = None  # why the file cannot be read right now
        self._seen = 0  # end of the bytes looked at (complete lines plus a held-back partial one)
        self._checkpoint = b""
        self._unterminated: int | None = None  # start of a last line read without its newline

    @property
    def pending_bytes(self) -> int:
        """Bytes of a partial last line held back until its newline arrives."""
        return self._seen - self.offset

    def read_lines(self, max_bytes: int | None = None) -> NewLines | None:
        """The next complete lines (about `max_bytes` of them at most; at least one whole line
        when one is there). None when nothing is new, or the file cannot be read (see `error`)."""
        fid = file_id(self.path)
        if fid is None:
            self.error = "missing" if not os.path.lexists(self.path) else describe_unreadable(self.path)
            return None
        reset = not self._continues(fid)
        settled = time.time() - fid.mtime >= SETTLE_S
        if not reset and fid == self.fid and fid.size == self._seen and not (self.pending_bytes and settled):
            return None
        start = 0 if reset else self._restart(fid)
        try:
            data = self._read(start, fid.size, max_bytes)
        except OSError as e:
            self.error = describe_unreadable(self.path) or str(e)
            return None
        self.error = None
        self.fid = fid
        cut = data.rfind(b"\n") + 1
        if cut < len(data) and settled and start + len(data) == fid.size and data[cut:].strip():
            self._unterminated, cut = start + cut, len(data)  # a finished file's last line
        self.offset = start + cut
        self._seen = start + len(data)
        if reset:
            self._checkpoint = b""  # the old file's bytes say nothing about the new one
        if cut:
            self._checkpoint = data[max(0, cut - CHECKPOINT_BYTES): cut]
        return NewLines(data, cut, start, reset)

    def _restart(self, fid: FileId) -> int:
        """Where to read on: the offset; or, when a last line was read without its newline and the
        file then grew without that newline coming first, that line's start (it is read again whole)."""
        line = self._unterminated
        if line is None or fid.size <= self._seen:
            return self.offset
        self._unterminated = None
        try:
            newline_first = read_range(self.path, self.offset, self.offset + 1) == b"\n"
        except OSError:
            newline_first = True
        return self.offset if newline_first else line

    def _read(self, start: int, size: int, max_bytes: int | None) -> bytes:
        """Bytes [start, size), or a block of `max_bytes` grown until it holds a newline."""
        if max_bytes is None or size - start <= max_bytes:
            return read_range(self.path, start, size)
        end = start + max_bytes
        data = read_range(self.path, start, end)
        while b"\n" not in data and end < size:  # one line longer than a block
            more = read_range(self.path, end, min(size, end + len(data)))
            if not more:
                break
            data += more
            end += len(more)
        return data

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
