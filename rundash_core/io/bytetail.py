"""Following an append-only file by byte offset: which complete lines are new since the last look.

`ByteTail` remembers how far a file has been read (byte offset plus file identity), so a refresh
reads only what was appended, and every byte once: a partial last line (a writer mid-line, or the
tail of a block) is kept in memory, not read again at every look (one over KEEP_BYTES is read
again once, whole), until its newline arrives, or until the file has not changed for SETTLE_S
seconds: then it is a last line written without a newline (a finished log) and is handed out
(`NewLines.held`). Should the file then grow without that newline first, the line is handed out
again whole, flagged `NewLines.redo` (callers replace what they took from it); if the newline
comes first, it is skipped (no empty line). A file that shrank or was replaced (another inode, or
the last bytes looked at changed) is read again from the start, and the caller is told to drop
what it built.

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
KEEP_BYTES = 8 << 20  # a partial line kept in memory between looks; a longer one is read again once whole


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
    def complete(self) -> bytes:
        """`lines` without a `held` last line (it may still go on, and then comes again as `redo`):
        for readers that keep the first value they see and cannot take one back."""
        data = self.lines
        return data[: data.rfind(b"\n") + 1] if self.held else data

    @property
    def view(self) -> memoryview:
        """The complete lines without a copy."""
        return memoryview(self.data)[: self.cut]


class ByteTail:
    """Follows one append-only file; `read_lines()` returns only what is new since last time."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.error: str | None = None  # why the file cannot be read right now
        self.reads = 0  # bytes read (each once per version of the file; a line over KEEP_BYTES twice)
        self._forget()

    def _forget(self) -> None:
        """Nothing read yet (a new file, or one to read again from the start)."""
        self.fid: FileId | None = None
        self.offset = 0  # end of the lines handed out
        self._seen = 0  # end of the bytes read: the handed-out lines plus the partial line after them
        self._pending: list[bytes] | None = []  # that partial line in pieces; None: too long to keep
        self._held = 0  # length of a last line handed out without its newline (0: none)
        self._held_line: bytes | None = None  # its bytes, when short enough to keep
        self._redo_due = False  # the held line went on: the next lines handed out start with it
        self._checkpoint = b""  # the last bytes before `_seen`

    @property
    def pending_bytes(self) -> int:
        """Bytes of a partial last line held back until its newline arrives."""
        return self._seen - self.offset

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
        if not reset and fid.size == self._seen and not (settled and self._inked_pending()):
            self.fid, self.error = fid, None  # nothing appended (a touch, or the same bytes)
            return None
        try:
            new = self._read(self._seen, fid.size, max_bytes, after=1 if self._held else 0)
        except OSError as e:
            self.error = describe_unreadable(self.path) or str(e)
            return None
        self.error, self.fid = None, fid
        self.reads += len(new)
        self._seen += len(new)
        self._checkpoint = advance_checkpoint(self._checkpoint, new)
        if self._held and new:
            new = self._resume_held(new)
        start, at_end = self.offset, self._seen == fid.size
        if b"\n" not in new and not (settled and at_end):  # still mid-line: keep the piece (no copy)
            if new and self._pending is not None:
                self._pending.append(new)
                if self.pending_bytes > KEEP_BYTES:
                    self._pending = None
            return NewLines(b"", 0, start, True) if reset else None
        if self._pending is None:  # a partial line too long to have been kept: read it once, whole
            self._pending = [read_range(self.path, start, self._seen - len(new))]
            self.reads += len(self._pending[0])
        data = b"".join([*self._pending, new]) if self._pending else new
        cut = data.rfind(b"\n") + 1
        if cut < len(data) and settled and at_end and _inked(data[cut:]):  # a finished file's last line
            self._held, cut = len(data) - cut, len(data)
            self._held_line = data[-self._held:] if self._held <= KEEP_BYTES else None
        self._pending = [data[cut:]] if cut < len(data) else []
        self.offset = start + cut
        if not cut and not reset:
            return None
        redo, self._redo_due = self._redo_due and cut > 0, self._redo_due and not cut
        return NewLines(data, cut, start, reset, redo, self._held > 0)

    def _resume_held(self, new: bytes) -> bytes:
        """The file grew after a last line was handed out without its newline: if the newline came
        first, the line was whole (the newline is skipped); else the line went on, and is handed
        out again, whole, with the next lines (`redo`)."""
        if new[:1] == b"\n":
            new, self.offset = new[1:], self.offset + 1
        else:
            line = self._held_line
            self._pending, self.offset, self._redo_due = line and [line], self.offset - self._held, True
        self._held, self._held_line = 0, None
        return new

    def _inked_pending(self) -> bool:
        """Does the partial line hold more than whitespace (then, once still, it is a last line)?"""
        return self._pending is None or any(map(_inked, self._pending))

    def _read(self, start: int, size: int, max_bytes: int | None, *, after: int = 0) -> bytes:
        """Bytes [start, size), or a block of `max_bytes` grown until it holds a newline past its
        first `after` bytes (a held line's late newline, skipped, ends no line)."""
        if max_bytes is None or size - start <= max_bytes:
            return read_range(self.path, start, size)
        end = start + max_bytes
        parts = [read_range(self.path, start, end)]
        while parts[-1].find(b"\n", 0 if parts[1:] else after) < 0 and end < size:  # a line over a block
            more = read_range(self.path, end, min(size, end + max_bytes * len(parts)))
            if not more:
                break
            parts.append(more)
            end += len(more)
        return b"".join(parts)

    def _continues(self, fid: FileId) -> bool:
        """Is `fid` the same file we read, grown or unchanged, with the bytes we read intact?"""
        return only_grew(self.path, fid, since=self.fid, end=self._seen, checkpoint=self._checkpoint)


def only_grew(path: str, fid: FileId, *, since: FileId | None, end: int, checkpoint: bytes) -> bool:
    """Is `fid` the file last read as `since`, grown or unchanged, with its first `end` bytes intact
    (`checkpoint`, the last of them, still there)? If not, it was replaced, truncated or rewritten,
    and whatever was built from it is read again from the start. (`ByteTail` and the prime-rl
    JSON-lines cache both follow files this way.)"""
    if since is None or not fid.same_file(since) or fid.size < end:
        return False
    if not checkpoint:
        return end == 0
    try:
        return read_range(path, end - len(checkpoint), end) == checkpoint
    except OSError:
        return False


def advance_checkpoint(checkpoint: bytes, new: bytes) -> bytes:
    """The last CHECKPOINT_BYTES read, once `new` is read on after `checkpoint`."""
    return (checkpoint + new[-CHECKPOINT_BYTES:])[-CHECKPOINT_BYTES:]


def _inked(piece: bytes) -> bool:
    """Does a piece of a line hold more than whitespace? (`isspace` stops at the first ink.)"""
    return bool(piece) and not piece.isspace()
