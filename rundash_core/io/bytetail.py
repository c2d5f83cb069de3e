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

Format readers build on it: `JsonlTail` reads everything new window by window, `VerlLogTail`
asks for blocks of about a megabyte so a 1 GB console log never sits in memory whole.

Reads stay in bounded windows whatever the bytes: one look reads at most WINDOW_BYTES; a line
longer than LINE_CAP is cut there (its rest skipped to its newline; with `cr_ends`, the format's
`\r` redraws, its last redraw is kept) and named; a run of NUL_RUN_BYTES or more NUL bytes (a
sparse hole, or the zeros a crash while writing leaves) ends the line before it and is skipped
and named, holes found by SEEK_DATA / SEEK_HOLE without reading them (`io.holes`). What was cut
or skipped is in `skipped` (sentence, byte offset) for the format reader to name.
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass

from rundash_core.io.files import FileId, describe_unreadable, file_id, open_file, read_range
from rundash_core.io.holes import NUL_RUN_BYTES, data_until, line_end, nul_run, run_text, size_text

CHECKPOINT_BYTES = 64  # the last bytes looked at; if they change, the file was rewritten, not appended
SETTLE_S = 5.0  # a last line without its newline is read once the file has been still this long
KEEP_BYTES = 8 << 20  # a partial line kept in memory between looks; a longer one is read again once whole
WINDOW_BYTES = 64 << 20  # the most one look reads, whatever the caller asks
LINE_CAP = 16 << 20  # a line longer than this is cut here (the rest skipped to its newline)
MAX_SKIPPED = 50  # cut lines and NUL runs named per file version (the rest only counted)


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

    cr_ends = False  # True: `\r` ends a redraw (tqdm): an overlong line keeps its last redraw
    line_cap = LINE_CAP  # a longer line is cut here (a format whose records run longer sets more)

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
        self._skipping = False  # inside a cut line: bytes are skipped up to its newline
        self.skipped: list[tuple[str, int]] = []  # (what was cut or skipped, byte offset), for the reader

    def fork(self) -> ByteTail:
        """A copy that reads on from here while this one stays as it was: a follower kept as a
        value in the shared cache (`sources.prime_rl.lines`) is forked, never moved, so a reader
        holding the old value still sees it whole."""
        other = copy.copy(self)
        other._pending = None if self._pending is None else list(self._pending)
        other.skipped = list(self.skipped)
        return other

    @property
    def pending_bytes(self) -> int:
        """Bytes of a partial last line held back until its newline arrives."""
        return self._seen - self.offset

    def read_lines(self, max_bytes: int | None = None) -> NewLines | None:
        """The next complete lines (about `max_bytes` of new bytes at most, never more than
        WINDOW_BYTES; at least one whole line when one is there, cut at `line_cap`). None when no
        line is new (a partial line only), or the file cannot be read (see `error`)."""
        while (new := self._read_lines(min(max_bytes or WINDOW_BYTES, WINDOW_BYTES))) is _AGAIN:
            pass
        return new

    def _read_lines(self, max_bytes: int):
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
            if self._skipping:  # the rest of a cut line
                end, newline, _cr = line_end(self.path, self._seen, fid.size)
                self._jump(end, fid)
                self._skipping = not newline and end == fid.size
                return None if self._skipping else _AGAIN
            new = self._read(self._seen, fid.size, max_bytes, after=1 if self._held else 0)
            run = nul_run(self.path, new, self._seen, fid.size)
        except OSError as e:
            self.error = describe_unreadable(self.path) or str(e)
            return None
        self.error, self.fid = None, fid
        self.reads += len(new)
        if run is not None:
            return self._before_run(new[:run[0] - self._seen], run, reset)
        if b"\n" not in new and self._pending_len() + len(new) >= self.line_cap:
            return self._cut_line(new, fid, reset)
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

    def _pending_len(self) -> int:
        return self._seen - self.offset if not self._held else 0

    def _line_so_far(self, new: bytes) -> bytes:
        """The partial line before `new` and `new`, at most `line_cap` bytes."""
        if self._pending is None:
            head = read_range(self.path, self.offset, min(self._seen, self.offset + self.line_cap))
        else:
            head = b"".join(self._pending)
        return (head + new[:max(0, self.line_cap - len(head))])[:self.line_cap]

    def take_skipped(self) -> list[tuple[str, int]]:
        """What was cut or skipped since the last call, (sentence, byte offset), for the reader to name."""
        out, self.skipped = self.skipped, []
        return out

    def _note(self, what: str, at: int) -> None:
        if len(self.skipped) < MAX_SKIPPED:
            self.skipped.append((what, at))

    def _jump(self, to: int, fid: FileId | None = None) -> None:
        """Go on reading at `to`: what lies before it was handed out or skipped."""
        self._seen = self.offset = to
        self._pending, self._held, self._held_line = [], 0, None
        self._checkpoint = read_range(self.path, max(0, to - CHECKPOINT_BYTES), to)
        if fid is not None:
            self.error, self.fid = None, fid

    def _before_run(self, new: bytes, run: tuple[int, int], reset: bool):
        """A run of NUL bytes ends the line before it (handed out, as if a newline came) and is
        skipped unread where the OS can say where data is."""
        if self._held and new:
            new = self._resume_held(new)
        start = self.offset
        data = self._line_so_far(b"") if self._pending_len() else b""
        if len(data) < self._pending_len():  # (a partial line over `line_cap`: kept cut)
            self._note(f"a line longer than {size_text(self.line_cap)} from byte {start:,} (cut there)", start)
        data += new
        if _inked(data[data.rfind(b"\n") + 1:]):
            data += b"\n"
        self._note(run_text(run), run[0])
        self._jump(run[1])
        redo, self._redo_due = self._redo_due and bool(data), False
        if not data and not reset:
            return _AGAIN
        return NewLines(data, len(data), start, reset, redo, False)

    def _cut_line(self, new: bytes, fid: FileId, reset: bool):
        """A line over `line_cap`: its first `line_cap` bytes are handed out as a line (with
        `cr_ends`, its last redraw), its rest skipped to its newline, a window at a time."""
        start = self.offset
        head = self._line_so_far(new)
        end, newline, last_cr = line_end(self.path, self._seen + len(new), fid.size)
        if self.cr_ends and last_cr is None and (cr := head.rfind(b"\r")) >= 0:
            last_cr = start + cr + 1
        stop = end - 1 if newline else end
        if self.cr_ends and last_cr is not None:
            head = read_range(self.path, last_cr, min(stop, last_cr + self.line_cap))
            self._note(f"a line of {size_text(stop - start)} of \\r redraws from byte {start:,} "
                       "(its last redraw kept)", start)
        else:
            self._note(f"a line longer than {size_text(self.line_cap)} from byte {start:,} (cut there)", start)
        self._jump(end, fid)
        self._skipping = not newline and end == fid.size
        redo, self._redo_due = self._redo_due, False
        return NewLines(head + b"\n", len(head) + 1, start, reset, redo, False)

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
        first `after` bytes (a held line's late newline, skipped, ends no line); not past the next
        hole (the caller skips it unread)."""
        if size - start > NUL_RUN_BYTES:
            with open_file(self.path) as fh:
                size = data_until(fh.fileno(), start, size)
        if max_bytes is None or size - start <= max_bytes:
            return read_range(self.path, start, size)
        end = start + max_bytes
        parts = [read_range(self.path, start, end)]
        size = min(size, start + max(max_bytes, self.line_cap - self._pending_len()))  # a line is cut there
        while (parts[-1].find(b"\n", 0 if parts[1:] else after) < 0 and end < size
               and b"\0" * NUL_RUN_BYTES not in parts[-1]):  # a line over a block
            more = read_range(self.path, end, min(size, end + max_bytes * len(parts)))
            if not more:
                break
            parts.append(more)
            end += len(more)
        return b"".join(parts)

    def _continues(self, fid: FileId) -> bool:
        """Is `fid` the same file we read, grown or unchanged, with the bytes we read intact?"""
        return only_grew(self.path, fid, since=self.fid, end=self._seen, checkpoint=self._checkpoint)


_AGAIN = object()  # a look that only skipped (a NUL run, a cut line's rest): look again at once


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
