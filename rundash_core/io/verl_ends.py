"""The ends of a verl console log, for discovery: the first and last bytes in one open and at most
two reads (`read_ends`), and a file's identity (`fingerprint`), statted once per path within one
discovery pass (`stat_memo`).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from dataclasses import dataclass

HEAD_BYTES = 1 << 20  # what the head summary reads (and SWE-Lego's 256 KiB probe within it)
TAIL_BYTES = 256 << 10  # SWE-Lego's tail probe; the tail summary's 64 KiB window within it
_stat_memo: contextvars.ContextVar[dict | None] = contextvars.ContextVar("rundash_stat_memo", default=None)


@dataclass
class LogEnds:
    """The first and last bytes of one log, read once (a file of up to head + tail bytes is read
    whole and both are slices of it)."""

    head: bytes
    tail: bytes
    tail_start: int
    size: int


def read_ends(path: str, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> LogEnds:
    """One open, at most two reads. Raises OSError like open()."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size <= head + tail:
            data = os.pread(fd, size, 0)
            return LogEnds(data[:head], data[max(len(data) - tail, 0):], max(len(data) - tail, 0), len(data))
        first = os.pread(fd, head, 0)
        return LogEnds(first, os.pread(fd, tail, size - tail), size - tail, size)
    finally:
        os.close(fd)


@contextlib.contextmanager
def stat_memo():
    """Within this block, `fingerprint` stats each path once (one discovery pass: detection, the
    summary and the sort share it)."""
    token = _stat_memo.set({})
    try:
        yield
    finally:
        _stat_memo.reset(token)


def fingerprint(path: str) -> tuple | None:
    """(dev, ino, size, mtime_ns, mtime) of a regular file, None when it is missing or not a file;
    memoized inside `stat_memo()`."""
    memo = _stat_memo.get()
    if memo is not None and path in memo:
        return memo[path]
    try:
        st = os.stat(path)
        fp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mtime) if stat.S_ISREG(st.st_mode) else None
    except (OSError, ValueError):
        fp = None
    if memo is not None:
        memo[path] = fp
    return fp
