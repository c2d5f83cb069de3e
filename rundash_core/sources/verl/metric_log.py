"""verl console logs (`../shared/formats/verl.md`): the metric lines of a log, read incrementally.

verl prints one `step:N - key:value - key:value …` line per logging call, among a lot of noise
(Ray start-up, tqdm bars, sample dumps, tracebacks). Why this shape: most of a log's bytes are
metric lines and per-line Python work is what costs, so a block of ~1 MiB is handled in bulk: one
regex pass finds the metric lines (bytes level, noise never decoded), two byte replacements turn
all of them into one JSON array (`:` → `":`, ` - ` → `,"`), and one orjson call builds the row
dicts (keys interned, numbers parsed in C). Lines that could mean something else as JSON (a stray
space, quote, bracket, backslash or tab) or that orjson rejects (`nan`, `np.float64(…)`, a sample
dump that happens to contain `step:3 - `) go one by one: a second JSON try with the values
normalized, else the exact grammar (`verl_grammar`). Lenient where the grammar is not: a JSON
literal `true`/`false`/`null` as a value reads as 1/0/a gap. A metric line cut by another writer's
output is not read (spec 4.8) and is a problem naming its line and step (`verl_grammar.read_segments`).

`VerlLogTail` follows the file with a `ByteTail` (offset + identity, partial last line held back,
replaced file re-read) and yields MetricStore rows `{"step": N, key: number, …}`, one per metric
line, in file order. They carry no `producer` and no `time`: the store's defaults say "trainer"
and "not known", and two more keys per row would push most rows into the next dict size (memory
and page faults are a good part of a big log's parse time). Nothing here touches process-wide
state (garbage collector, signal handlers, warning filters): the app parses in every user's
session. Nor is there a need: rows hold only str keys and int/float values, so CPython never
tracks them in the cycle collector, which only walks the few lists a poll builds.
verl's `file` logger JSONL is read by `verl_file_logger.FileLoggerTail` into the same rows.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import orjson

from rundash_core.io.bytetail import ByteTail
from rundash_core.io.jsonl import LineProblems, TailResult
from rundash_core.sources.verl.grammar import parse_console_line
from rundash_core.sources.verl.problem_lines import CUT_MORE, CUT_NAMED, LocatedProblems, line_start_in  # noqa: F401 (CUT_*: re-exported)
from rundash_core.sources.verl.val_prints import PPRINT as _PPRINT, read_pprint

BLOCK_BYTES = 1 << 20

# Fast path: `step` not after a word character or `/` (spec 4.7's guard, on raw bytes), then the
# step and the rest of the line. A colour code right before `step:` (`\x1b[0mstep:`) is stripped
# by the spec before its guard looks: the usual SGR forms are accepted when what precedes them
# passes the guard.
_SGR = (rb"\x1b\[m", rb"\x1b\[\dm", rb"\x1b\[\d\dm", rb"\x1b\[\d;\dm", rb"\x1b\[\d;\d\dm", rb"\x1b\[\d\d;\d\dm")
_CANDIDATE = re.compile(rb"step(?:(?<![\w/]step)|(?<=mstep)(?:"
                        + b"|".join(rb"(?<=%sstep)(?<![\w/]%sstep)" % (f, f) for f in _SGR) + rb")):(\d+ - .*)")
_JSON_OPEN = b'{"step":'  # "producer" and "time" are set on the parsed dicts (one shared str)
_JSON_JOIN = b"},\n" + _JSON_OPEN
# Bytes that make orjson read what the grammar rejects (padded values, strings, arrays, escapes)
# become control characters, which no JSON text may hold: such a line fails and takes the exact
# path. Spaces become \x02 so that only the ` - ` separators (`\x02-\x02`) turn into JSON.
_JSON_SAFE = bytes.maketrans(b' \t\\[{"', b"\x02\x01\x01\x01\x01\x01")
_SEPARATOR = b"\x02-\x02"
_UNSAFE = (b'"', b"\\", b"[", b"{", b"\t")  # single bytes: memchr finds them fast
_NP_WRAP_BYTES = re.compile(rb"(?<=:)np\.[A-Za-z]+\d*\(([^()]*)\)")
_SPECIALS = (b"-nan", b"+nan", b"-inf", b"+inf", b"nan", b"inf")


def _unwrap(text: bytes) -> bytes:
    """`:np.float64(x)` → `:x`. Split and join: a `sub` template costs a Python call per match."""
    return b"".join(_NP_WRAP_BYTES.split(text))


def row(step: int, values: dict) -> dict:
    """A MetricStore row, shaped as the bulk path leaves them (a `step` key in values wins)."""
    return {"step": step, **values}


def _add(batch: list[dict], rows: list[dict]) -> bool:
    """Append parsed rows; a row with an empty key is no metric line."""
    rows += [d for d in batch if "" not in d] if any(map(operator.contains, batch, repeat(""))) else batch
    return True


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
        self._wrapped = self._bools = False  # seen np.float64(…) / True values: normalize in bulk
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
        for kind, at in self._markers(data, cut):
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

    @staticmethod
    def _markers(data: bytes, cut: int) -> list[tuple[str, int]]:
        """Resolved-config prints (`{'actor_rollout_ref'`) and validation pprints
        (`validation metrics: {'`) in file order. Both open a dict with `{'`: numpy finds those
        (CPython's `bytes.find` is slow for these needles), a byte check sorts them."""
        arr = np.frombuffer(data, dtype=np.uint8, count=cut)
        hits = np.flatnonzero(arr[: max(cut - 3, 0)] == 123)  # "{"
        quoted = arr[hits + 1] == 39  # "{'"
        config = quoted & (arr[hits + 2] == 97) & (arr[hits + 3] == 99)  # "{'ac"
        pprint = quoted & (hits >= 2) & (arr[np.maximum(hits - 1, 0)] == 32) & (arr[np.maximum(hits - 2, 0)] == 58)
        out = []
        for at in hits[config | pprint].tolist():
            if data.startswith(b"{'actor_rollout_ref'", at):
                out.append(("config", at))
            elif data.endswith(_PPRINT, 0, at + 1):
                out.append(("pprint", at))
        return out

    def _fast(self, block, data: bytes, start: int, rows: list[dict]) -> None:
        """The metric lines of a block as one JSON array for one orjson call. Lines that cannot be
        ours (a space or control byte left over) and lines orjson rejects go one by one."""
        found = _CANDIDATE.findall(block)
        if found:
            self._lines(found, data, start, rows)

    def _lines(self, found: list[bytes], data: bytes, start: int, rows: list[dict]) -> None:
        text = self._era(b"\n".join(found), found)
        unsafe = any(c in text for c in _UNSAFE)
        joined = text.replace(b" - ", b',\t"')
        if not unsafe and b" " not in joined and self._bulk_text(joined, rows):
            return  # the common case: one orjson call for the block
        # Some line is not ours (a space or an unsafe byte left over) or orjson stopped: parse the
        # good lines in runs, the others one by one.
        lines = joined.replace(b":", b'":').split(b"\n")
        a, n, failures = 0, len(lines), [0]
        while a < n:
            b = next((i for i in range(a, n) if b" " in lines[i] or unsafe and any(c in found[i] for c in _UNSAFE)), n)
            era = (self._wrapped, self._bools)
            done = self._bulk(lines, found, a, b, data, start, rows, failures)
            if (self._wrapped, self._bools) != era:  # a line showed the log's value era: redo the rest
                return self._lines(found[done:], data, start, rows) if done < n else None
            if b < n:
                self._one(found[b], data, start, rows)
            a = b + 1

    def _era(self, text: bytes, found: list[bytes]) -> bytes:
        """Once a line showed numpy wrappers or True/False, blocks whose sample shows them too are
        normalized in bulk (`np.float64(x)` → x, True/False → 1/0)."""
        if self._wrapped or self._bools:
            sample = (found[0], found[len(found) // 2], found[-1])
            if self._wrapped and any(b"np." in f for f in sample):
                text = _unwrap(text)
            if self._bools and any(b":True" in f or b":False" in f for f in sample):
                text = text.replace(b":True", b":1").replace(b":False", b":0")
        return text

    @staticmethod
    def _bulk_text(text: bytes, rows: list[dict]) -> bool:
        """All lines of a block at once (the common case); False when orjson stops somewhere."""
        try:
            batch = orjson.loads(b"".join((b"[", _JSON_OPEN, text.replace(b":", b'":').replace(b"\n", _JSON_JOIN),
                                           b"}]")))
        except orjson.JSONDecodeError:
            return False
        return _add(batch, rows)

    def _bulk(self, lines: list[bytes], found: list[bytes], a: int, b: int, data: bytes, start: int,
              rows: list[dict], failures: list[int]) -> int:
        """Lines [a, b) in one orjson call; where it stops, the bad line (or the one before it,
        whose key string ran on) goes one by one and the rest is tried again (after 16 stops in a
        block, line by line). Returns where it stopped early (the value era changed), else b."""
        while a < b:
            if failures[0] > 16:
                for i in range(a, b):
                    self._one(found[i], data, start, rows)
                return b
            try:
                batch = orjson.loads(b"[" + _JSON_OPEN + _JSON_JOIN.join(lines[a:b]) + b"}]")
            except orjson.JSONDecodeError as e:
                failures[0] += 1
                bad = min(b - 1, a + max(e.lineno, 1) - 1)
                if bad - 1 > a:
                    self._bulk(lines, found, a, bad - 1, data, start, rows, failures)
                era = (self._wrapped, self._bools)
                for i in range(max(a, bad - 1), bad + 1):
                    self._one(found[i], data, start, rows)
                a = bad + 1
                if (self._wrapped, self._bools) != era:
                    return a
                continue
            _add(batch, rows)
            return b
        return b

    def _one(self, found: bytes, data: bytes, start: int, rows: list[dict]) -> None:
        text = found.translate(_JSON_SAFE)
        if not self._wrapped and b":np." in text:
            self._wrapped = True
        if not self._bools and (b":True" in text or b":False" in text):
            self._bools = True
        d = self._normalized(text)
        if d is not None and "" not in d:
            _add([d], rows)
        else:
            self._candidate_exact(found, data, start, rows)

    @staticmethod
    def _normalized(text: bytes) -> dict | None:
        """Second chance for valid lines JSON cannot hold as they are: `np.float64(x)` → x,
        `True`/`False` → 1/0, `nan`/`inf` as strings turned into floats."""
        text = _unwrap(text) if b"np." in text else text
        text = text.replace(b":True", b":1").replace(b":False", b":0")
        special = False
        for s in _SPECIALS:
            if b":" + s in text:
                text = text.replace(b":" + s, b':"' + s + b'"')
                special = True
        try:
            d = orjson.loads(_JSON_OPEN + text.replace(_SEPARATOR, b',\t"').replace(b":", b'":') + b"}")
        except orjson.JSONDecodeError:
            return None
        if special:
            for k, v in d.items():
                if type(v) is str:
                    d[k] = float(v)
        return d

    def _candidate_exact(self, found: bytes, data: bytes, start: int, rows: list[dict]) -> None:
        """The exact path for a fast-path candidate (`N - rest of the physical line`)."""
        text = self._decode(found, data, start)
        head, _, more = text.partition("\r")
        cuts: list = []
        parsed = parse_console_line("step:" + head, cuts)  # the guard held on the raw bytes
        if more:
            parsed += parse_console_line(more, cuts)
        rows += (row(step, values) for step, values in parsed)
        if cuts:
            self._note_cuts(cuts, data, start, data.find(found))

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
