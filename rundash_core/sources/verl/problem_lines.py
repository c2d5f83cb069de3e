"""Where a verl console log's problems are: line numbers found lazily (`metric_log.VerlLogTail`).

A big log is parsed a block at a time without counting lines (counting is a pass of its own), so
a problem (a metric line cut by other output, invalid UTF-8, NUL bytes) is located only when one
is met: newlines are counted once, from the last located offset, holes skipped unread. Kept apart
from the parse so the parse's module holds only the parse.
"""
from __future__ import annotations

import numpy as np

from rundash_core.io.files import read_range
from rundash_core.io.holes import nul_run

CUT_NAMED = 8  # problems named one by one before cut metric lines are only counted (CUT_MORE)
CUT_MORE = "more metric lines cut by other output: not read"


class LocatedProblems:
    """A mixin of `VerlLogTail`: names problems at their lines (`self.problems`, a `LineProblems`;
    `self._line_mark`, the last located (offset, line); `self.path`)."""

    def _note_cuts(self, cuts: list, data: bytes, start: int, pos: int) -> None:
        """Metric lines another writer's output cut: each named with its step (the first
        CUT_NAMED; more are counted under one problem), located at its line."""
        for step in cuts:
            what = (f"metric line of step {step} cut by other output: not read (text left over after its "
                    "values; spec 4.8)") if self._cuts_named() < CUT_NAMED else CUT_MORE
            self.problems.add(what, self._line_in(data, start, pos) if what not in self.problems.counts else 0)

    def _cuts_named(self) -> int:
        return sum(what.startswith("metric line of step ") for what in self.problems.counts)

    def _decode(self, raw: bytes, data: bytes, start: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            what = "invalid UTF-8 in a metric line (replaced)"
            self.problems.add(what, self._line_in(data, start, data.find(raw)) if what not in self.problems.counts else 0)
            return raw.decode("utf-8", "replace")

    def _note_nul(self, data: bytes, cut: int, start: int) -> None:
        what = "NUL bytes (removed)"
        pos, lines, last_line_end = data.find(b"\x00", 0, cut), 0, -1
        first = pos
        while pos >= 0:
            if pos > last_line_end:
                lines += 1
                end = data.find(b"\n", pos, cut)
                last_line_end = cut if end < 0 else end  # a last line without its newline ends at cut
            pos = data.find(b"\x00", pos + 1, cut)
        line = self._line_in(data, start, first) if what not in self.problems.counts else 0
        self.problems.add(what, line, lines)

    def _line_in(self, data: bytes, start: int, pos: int) -> int:
        """Line number of position `pos` of a block read from file offset `start` (the block may
        have lost its NUL bytes: lines are counted in it, not in the file)."""
        return self._line_at(start) + data.count(b"\n", 0, max(pos, 0))

    def _line_at(self, offset: int) -> int:
        """1-based line number of the byte at `offset`; newlines are counted once, on demand."""
        at, line = self._line_mark
        if offset < at:
            at, line = 0, 1
        while at < offset:
            chunk = read_range(self.path, at, min(offset, at + (8 << 20)))
            if not chunk:
                break
            run = nul_run(self.path, chunk, at, offset)  # a hole is skipped unread (it holds no newline)
            line += chunk.count(b"\n", 0, None if run is None else run[0] - at)
            at = at + len(chunk) if run is None else run[1]
        self._line_mark = (at, line)
        return line


def line_start_in(raw: bytes, stripped: bytes, line: int) -> int:
    """Where the line starting at `line` of `stripped` (`raw` without its NUL bytes) starts in
    `raw`: the n-th line of both, as removing NUL bytes keeps every newline."""
    n = stripped.count(b"\n", 0, line)
    return int(np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10)[n - 1]) + 1 if n else 0
