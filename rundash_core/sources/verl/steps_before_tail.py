"""The last metric step of a verl console log whose tail window (`ends.TAIL_STEPS`, 1 MiB)
holds none: the log ends in MiBs of other output (a traceback loop, vLLM spam), and the runs list
would show no step while the run card (a full parse) does.

The bytes before the window are searched backwards, block by block (at most FAR_BYTES per look),
and what was found up to where is remembered per file (`cache`, keyed by dev and inode): a log
that keeps growing costs only its appended bytes at the next look. The remembered end's last
bytes are compared first, so a file rewritten in place is searched again.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from rundash_core import cache
from rundash_core.sources.verl.ends import TAIL_STEPS, LogHeadTail
from rundash_core.sources.verl.steps import last_steps

FAR_BLOCK = 1 << 20  # bytes read per backwards step
FAR_BYTES = 64 << 20  # how far before the window one look searches at most
CHECK_BYTES = 64  # the bytes before a remembered end that must be unchanged for it to count


@dataclass(frozen=True)
class StepsBeforeTail:
    """What the bytes before `end` (a line start) hold: the last step (and training step)."""

    end: int
    step: int | None
    train_step: int | None
    check: bytes  # the CHECK_BYTES before `end`, as they were read


def window_start(ends: LogHeadTail) -> int:
    """Where the first whole line of the widest tail window starts (what `tail_fields` searched)."""
    window = max(ends.size - TAIL_STEPS[-1], 0)
    data = ends.tail(TAIL_STEPS[-1])
    at = data.find(b"\n", window - ends.tail_start)
    return window if at < 0 else ends.tail_start + at + 1


def last_steps_before_tail(ends: LogHeadTail) -> tuple[int | None, int | None]:
    """(last step, last training step) of the metric lines before the tail window, reading only
    the bytes appended since the last look when the file only grew."""
    end = window_start(ends)
    if end <= 0:
        return None, None
    st = os.fstat(ends.fd)
    key = ("verl-steps-before-tail", st.st_dev, st.st_ino)
    have = cache.shared.peek(key)
    lo, known, whole = max(end - FAR_BYTES, 0), (None, None), end <= FAR_BYTES
    if (have is not None and end - FAR_BYTES <= have.end <= end
            and os.pread(ends.fd, len(have.check), have.end - len(have.check)) == have.check):
        lo, known, whole = have.end, (have.step, have.train_step), True
    found = search_back(ends.fd, lo, end, lo_is_line_start=whole)
    step = found[0] if found[0] is not None else known[0]
    train = found[1] if found[1] is not None else known[1]  # (the appended bytes may log validation only)
    check = os.pread(ends.fd, min(CHECK_BYTES, end), end - min(CHECK_BYTES, end))
    cache.shared.discard(key)
    cache.shared.get_or_create(key, lambda: StepsBeforeTail(end, step, train, check), size=256)
    return step, train


def search_back(fd: int, lo: int, hi: int, *, lo_is_line_start: bool, block: int = FAR_BLOCK
                ) -> tuple[int | None, int | None]:
    """The last (step, training step) in the file's `[lo, hi)` (`hi` a line start), read backwards
    `block` bytes at a time, so a step near `hi` costs one read; a block's first line, cut, is
    searched with the block before (docs/architecture.md#fast-paths)."""
    step, size = None, block
    while hi > lo:
        start = max(hi - size, lo)
        data = os.pread(fd, hi - start, start)
        whole = start == lo and lo_is_line_start
        first = 0 if whole else data.find(b"\n") + 1
        if not whole and first in (0, len(data)):  # no line starts in the block
            if start == lo:
                break
            size *= 2  # a line longer than the block: read it whole
            continue
        size = block
        found, _at, train = last_steps(data, first, len(data))
        step = found if step is None else step
        if train is not None:  # (a last line logging validation keys only: its training step is before it)
            return step, train
        hi = start + first
    return step, None


def search_back_reference(fd: int, lo: int, hi: int, *, lo_is_line_start: bool) -> tuple[int | None, int | None]:
    data = os.pread(fd, hi - lo, lo)
    step, _at, train = last_steps(data, 0 if lo_is_line_start else (data.find(b"\n") + 1 or len(data)), len(data))
    return step, train
