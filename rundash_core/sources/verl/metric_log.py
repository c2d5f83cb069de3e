"""verl console logs (`docs/formats/verl.md`): the metric lines of a log, read incrementally.

verl prints one `step:N - key:value - key:value …` line per logging call, among a lot of noise
(Ray start-up, tqdm bars, sample dumps, tracebacks). A block of ~1 MiB is handled at once: NUL
bytes, resolved-config prints and validation pprints are found here, the metric lines of the rest
by `block_parse.parse_metric_block` (a fast path with a plain reference beside it:
docs/architecture.md#fast-paths). A metric line cut by another writer's output is not read
(spec 4.8) and is a problem naming its line and step (`grammar.read_segments`).

`VerlLogTail` follows the file with a `ByteTail` (offset + identity, partial last line held back,
replaced file re-read) and yields MetricStore rows `{"step": N, key: number, …}`, one per metric
line, in file order. They carry no `producer` and no `time`: the store's defaults say "trainer"
and "not known" (docs/architecture.md#fast-paths). Nothing here touches process-wide state
(garbage collector, signal handlers, warning filters): the app parses in every user's session.
verl's `file` logger JSONL is read by `file_logger.FileLoggerTail` into the same rows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rundash_core.io.bytetail import ByteTail
from rundash_core.io.jsonl import LineProblems, TailResult
from rundash_core.sources.verl.block_parse import ValueEra, parse_metric_block, row
from rundash_core.sources.verl.grammar import parse_console_line
from rundash_core.sources.verl.problem_lines import CUT_MORE, CUT_NAMED, LocatedProblems, line_start_in  # noqa: F401 (CUT_*: re-exported)
from rundash_core.sources.verl.val_prints import PPRINT as _PPRINT
from rundash_core.sources.verl.val_prints import read_pprint

BLOCK_BYTES = 1 << 20
_CONFIG = b"{'actor_rollout_ref'"


def find_markers(data: bytes, cut: int) -> list[tuple[str, int]]:
    """Resolved-config prints (`{'actor_rollout_ref'`) and validation pprints (`validation metrics:
    {'`, at its `{`) starting in `data[:cut - 3]`, in file order. Both open a dict with `{'`: numpy
    finds those, a byte check sorts them (docs/architecture.md#fast-paths)."""
    arr = np.frombuffer(data, dtype=np.uint8, count=cut)
    hits = np.flatnonzero(arr[: max(cut - 3, 0)] == 123)  # "{"
    quoted = arr[hits + 1] == 39  # "{'"
    config = quoted & (arr[hits + 2] == 97) & (arr[hits + 3] == 99)  # "{'ac"
    pprint = quoted & (hits >= 2) & (arr[np.maximum(hits - 1, 0)] == 32) & (arr[np.maximum(hits - 2, 0)] == 58)
    out = []
    for at in hits[config | pprint].tolist():
        if data.startswith(_CONFIG, at):
            out.append(("config", at))
        elif data.endswith(_PPRINT, 0, at + 1):
            out.append(("pprint", at))
    return out


def find_markers_reference(data: bytes, cut: int) -> list[tuple[str, int]]:
    found = [("config", m.start()) for m in re.finditer(re.escape(_CONFIG), data)]
    found += [("pprint", m.end() - 2) for m in re.finditer(re.escape(_PPRINT + b"'"), data)]
    return sorted((f for f in found if f[1] < cut - 3), key=lambda f: f[1])


@dataclass
class LogRows:
    """What a poll parsed, in MetricStore's terms (console rows carry no line numbers)."""

    rows: list[dict]

    def line_of(self, i: int) -> int:
        return 0


class VerlLogTail(LocatedProblems, ByteTail):
    """Follows one verl console log; `poll()` returns the metric rows appended since last time.

    Besides the rows it keeps what the run card needs from the same pass: the first and last
    metric step, whether a final validation was printed, where resolved configs were printed."""

    cr_ends = True  # tqdm redraws a progress line with `\r`: a line over the cap keeps its last redraw

    def __init__(self, path, block_bytes: int = BLOCK_BYTES):
        super().__init__(path)
        self.block_bytes = block_bytes
        self._reset_state()

    def _reset_state(self) -> None:
        self.problems = LineProblems()
        self.metric_lines = 0
        self.first_step: int | None = None
        self.first_keys: tuple[str, ...] = ()
        self.last_step: int | None = None
        self.final_validation = False
        self.config_offsets: list[int] = []
        self._era = ValueEra()  # seen np.float64(…) / True values: normalized in bulk
        self._line_mark = (0, 1)  # (byte offset, its 1-based line number): problems are located lazily
        self._from_pprint: set[int] = set()  # ids of this poll's rows that came from a pprint
        self._held_rows = 0  # metric rows of a last line read without its newline (it may come again)
        self._held_problems = LineProblems()  # and the problems it added

    def poll(self) -> TailResult | None:
        rows: list[dict] = []
        reset = got = False
        while (new := self.read_lines(self.block_bytes)) is not None:
            got = True
            if new.reset:
                reset = True
                rows.clear()
                self._reset_state()
            for what, at in self.take_skipped():  # a cut line, a run of NUL bytes
                self.problems.add(what, self._line_at(at))
            if not new.cut:
                break  # only a partial line is new
            self._take(new, rows)
        if not got:
            return None
        ours = self._from_pprint  # rows from validation pprints are not metric lines
        first = next((r for r in rows if id(r) not in ours), None)
        if first is not None:
            self.metric_lines += len(rows) - len(ours)
            if self.first_step is None:
                self.first_step = first["step"]
                self.first_keys = tuple(k for k in first if k not in ("producer", "step", "time"))
            self.last_step = next(r for r in reversed(rows) if id(r) not in ours)["step"]
        ours.clear()
        return TailResult(LogRows(rows), reset)

    def _take(self, new, rows: list[dict]) -> None:
        """Scan a block. A last line read without its newline (`held`) is scanned on its own, so
        that when it comes again whole (`redo`) its metric lines and config print count once."""
        if new.redo:
            self.metric_lines -= self._held_rows
            if not self.metric_lines:  # the held line was the first metric line: take it again
                self.first_step, self.first_keys = None, ()
            self.problems.discard(self._held_problems)
            self.config_offsets = [at for at in self.config_offsets if at < new.start]
        self._held_rows, self._held_problems = 0, LineProblems()
        body = new.data.rfind(b"\n", 0, new.cut) + 1 if new.held else new.cut
        self._scan(new.data, body, new.start, rows)
        if new.held:
            before, counts = len(rows), dict(self.problems.counts)
            self._scan(new.data[body:new.cut], new.cut - body, new.start + body, rows)
            self._held_rows = sum(id(r) not in self._from_pprint for r in rows[before:])
            for what, n in self.problems.counts.items():
                if n > counts.get(what, 0):
                    self._held_problems.add(what, self.problems.first_line[what], n - counts.get(what, 0))

    # One block of complete lines -----------------------------------------------------------------
    def _scan(self, data: bytes, cut: int, start: int, rows: list[dict]) -> None:
        raw = None  # the block as read, when its NUL bytes are removed (offsets are the file's)
        if data.find(b"\x00", 0, cut) >= 0:
            self._note_nul(data, cut, start)
            raw, data = data, data[:cut].replace(b"\x00", b"")
            cut = len(data)
        view = memoryview(data)
        pos = 0
        for kind, at in find_markers(data, cut):
            if kind == "config" and len(self.config_offsets) < 64:
                line = data.rfind(b"\n", 0, at) + 1
                self.config_offsets.append(start + (line if raw is None else line_start_in(raw, data, line)))
            elif kind == "pprint" and at >= pos:  # validation pprints split the block
                line_start = data.rfind(b"\n", 0, at) + 1
                line_end = data.find(b"\n", at, cut)
                line_end = cut if line_end < 0 else line_end  # a last line without its newline
                self._fast(view[pos:line_start], data, start, rows)
                self._line_exact(data[line_start:line_end], data, start, rows)
                pos = line_end + 1
        self._fast(view[pos:cut], data, start, rows)

    def _fast(self, block, data: bytes, start: int, rows: list[dict]) -> None:
        """The metric lines of a block without validation pprints (`parse_metric_block`), their
        problems located at their lines."""
        got = parse_metric_block(block, self._era)
        rows += got.rows
        for cuts, text in got.problems:
            if cuts is None:
                self._decode(text, data, start)  # names the invalid UTF-8 at its line
            else:
                self._note_cuts(cuts, data, start, data.find(text))

    def _line_exact(self, line: bytes, data: bytes, start: int, rows: list[dict]) -> None:
        if b"step:" in line:
            cuts: list = []
            rows += (row(s, v) for s, v in parse_console_line(self._decode(line, data, start), cuts))
            if cuts:
                self._note_cuts(cuts, data, start, data.find(line))
        elif _PPRINT in line:
            self._pprint(line, rows)

    def _pprint(self, line: bytes, rows: list[dict]) -> None:
        """A one-line `Initial/Final validation metrics: {…}` print. Era S1 logs record validation
        only there (spec 7): `test_score/<ds>` rows go to step 0 (initial) or the last step
        (final), renamed `val/test_score/<ds>`; other keys are already on the metric lines."""
        final, kind, renamed = read_pprint(line)
        self.final_validation = self.final_validation or final
        step = 0 if kind == "Initial" else (rows[-1]["step"] if rows else self.last_step)
        if renamed and step is not None:
            rows.append(row(step, renamed))
            self._from_pprint.add(id(rows[-1]))
