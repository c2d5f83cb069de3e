"""Runs of NUL bytes and overlong lines, found in bounded reads.

A sparse file (`truncate` past its end) or a crash while writing leaves gigabytes of NUL bytes
and no newline; a reader growing its window to the next newline would hold them all. `nul_run`
says where such a run ends: SEEK_DATA skips holes without reading them; where the OS cannot say
(or the zeros are real), a bounded scan reads ahead, then gallops. `line_end` finds the newline of
a line too long to keep, a window at a time.
"""
from __future__ import annotations

import errno
import os

from rundash_core.io.files import open_file

NUL_RUN_BYTES = 64 << 10  # shorter NUL runs are a line's damage (bytes removed), longer ones a hole
SCAN_BYTES = 1 << 20  # one read of a bounded scan
PLAIN_ZEROS = 64 << 20  # real NUL bytes read one by one before the scan gallops
_ZEROS = b"\0" * NUL_RUN_BYTES


def size_text(n: int) -> str:
    """`100 GB`, `16 MB`, `4 KB`, `12 bytes` (powers of 1024)."""
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def _data_from(fd: int, pos: int, size: int) -> int:
    """The first data byte at or after `pos` (holes skipped unread); `pos` where the OS cannot say."""
    try:
        return min(os.lseek(fd, pos, os.SEEK_DATA), size)
    except OSError as e:
        return size if e.errno == errno.ENXIO else pos
    except AttributeError:  # no SEEK_DATA on this platform
        return pos


def data_until(fd: int, pos: int, size: int) -> int:
    """How far from `pos` a read need go: NUL_RUN_BYTES into the next hole (so the read sees it as
    a NUL run, then skipped unread); `size` where the OS cannot say or there is no hole."""
    try:
        hole = os.lseek(fd, pos, os.SEEK_HOLE)
    except (OSError, AttributeError):
        return size
    return min(size, hole + NUL_RUN_BYTES)


def _first_ink(fd: int, pos: int, n: int) -> int | None:
    """Offset of the first non-NUL byte in [pos, pos + n), None when all are NUL (or none read)."""
    block = os.pread(fd, n, pos)
    rest = block.lstrip(b"\0")
    return pos + len(block) - len(rest) if rest else None


def nul_end(fd: int, pos: int, size: int) -> int:
    """Where the run of NUL bytes at `pos` ends (`size` when it runs to the end)."""
    plain = 0
    while pos < size:
        pos = _data_from(fd, pos, size)
        if pos >= size:
            return size
        n = min(SCAN_BYTES, size - pos)
        ink = _first_ink(fd, pos, n)
        if ink is not None:
            return ink
        pos, plain = pos + n, plain + n
        if plain >= PLAIN_ZEROS:
            return _gallop(fd, pos, size)
    return size


def _gallop(fd: int, lo: int, size: int) -> int:
    """Past PLAIN_ZEROS of real NUL bytes: probe at doubling steps, then bisect to the first ink
    (bounded time; data islands between probes inside the run are taken as part of it)."""
    step, hi = SCAN_BYTES, None
    while hi is None:
        probe = min(lo + step, size - NUL_RUN_BYTES)
        if probe <= lo:
            return _first_ink(fd, lo, size - lo) or size
        hi = _first_ink(fd, probe, NUL_RUN_BYTES)
        if hi is None:
            lo, step = probe + NUL_RUN_BYTES, step * 2
    while hi - lo > SCAN_BYTES:
        mid = (lo + hi) // 2
        ink = _first_ink(fd, mid, NUL_RUN_BYTES)
        lo, hi = (mid + NUL_RUN_BYTES, hi) if ink is None else (lo, min(hi, ink))
    ink = _first_ink(fd, lo, hi - lo)
    return hi if ink is None else ink


def nul_run(path: str, data: bytes, start: int, size: int) -> tuple[int, int] | None:
    """The first run of NUL_RUN_BYTES or more NUL bytes that starts in `data` (the file's bytes
    from `start`; the run may go on past them), as (start, end) offsets; None when there is none."""
    if b"\0" not in data:
        return None
    with open_file(path) as fh:
        return nul_run_fd(fh.fileno(), data, start, size)


def nul_run_fd(fd: int, data: bytes, start: int, size: int) -> tuple[int, int] | None:
    """`nul_run` on an open file."""
    i = data.find(_ZEROS)
    if i < 0:
        i = len(data.rstrip(b"\0"))
        if i == len(data) or start + len(data) >= size:
            return None
    else:
        i = len(data[:i].rstrip(b"\0"))  # back to the run's first NUL byte
    rest = data[i:].lstrip(b"\0")
    end = start + len(data) - len(rest) if rest else nul_end(fd, start + len(data), size)
    return (start + i, end) if end - (start + i) >= NUL_RUN_BYTES else None


def run_text(run: tuple[int, int]) -> str:
    """What a NUL run is, said the same way by every reader."""
    return f"{size_text(run[1] - run[0])} of NUL bytes from byte {run[0]:,} (a hole or a crash while writing)"


def line_end(path: str, pos: int, size: int) -> tuple[int, bool, int | None]:
    """Scan from `pos` to the end of a line a window at a time: (offset past its newline, or where
    a NUL run or the file begins/ends; whether the newline was found; offset just after the last
    `\\r` seen, or None)."""
    last_cr = None
    with open_file(path) as fh:
        fd = fh.fileno()
        while pos < size:
            block = os.pread(fd, min(SCAN_BYTES, size - pos), pos)
            if not block:
                break
            nl, z = block.find(b"\n"), block.find(_ZEROS)
            stop = min(x for x in (nl, z, len(block)) if x >= 0)
            cr = block.rfind(b"\r", 0, stop)
            if cr >= 0:
                last_cr = pos + cr + 1
            if stop == nl:
                return pos + nl + 1, True, last_cr
            if stop == z:
                return pos + len(block[:z].rstrip(b"\0")), False, last_cr
            pos += len(block)
    return pos, False, last_cr


MAX_EXTENTS = 100_000  # data extents walked to find a sparse file's last data


def content_end(fd: int, size: int) -> int:
    """Where a file's content ends: `size`, or, when it ends in a run of NUL_RUN_BYTES or more
    NUL bytes (a sparse tail, a crash's zeros), where that run begins: the readers of a file's
    end (its last lines, its last step) read before it. Holes are found by SEEK_DATA / SEEK_HOLE
    unread; real zeros are read back at most PLAIN_ZEROS."""
    if size < NUL_RUN_BYTES or os.pread(fd, 1, size - 1) != b"\0":
        return size
    end, pos = size, 0  # the end of the last data extent (size where the OS cannot say)
    try:
        for _ in range(MAX_EXTENTS):
            data = os.lseek(fd, pos, os.SEEK_DATA)
            pos = end = min(os.lseek(fd, data, os.SEEK_HOLE), size)
            if pos >= size:
                break
    except (OSError, AttributeError):
        pass  # ENXIO: no data after `pos` (`end` is the last extent's); or no SEEK_DATA here
    read = 0
    while end > 0 and read < PLAIN_ZEROS:
        n = min(SCAN_BYTES, end)
        block = os.pread(fd, n, end - n)
        kept = len(block.rstrip(b"\0"))
        if kept:
            end -= n - kept
            break
        end, read = end - n, read + n
    return end if size - end >= NUL_RUN_BYTES else size
