"""What only a pass over a whole verl console log says, for its one summary: where the log resumed
(verl's `_load_checkpoint` prints `Resuming from …/global_step_N`), where its steps went back (a
launch appended with `tee -a`), and how long its steps took (`timing_s/step`, or `timing/step`).
A run of NUL bytes (a sparse hole, a crash's zeros) is skipped unread (`holes`), and remembered.

The log is read once, then only the bytes appended since (remembered per file by dev and inode,
with the last bytes read compared first, so a file rewritten in place is read again): literal
searches by the regex engine, no line parsing, so a 1 MB log costs about a millisecond.
"""
from __future__ import annotations

import copy
import math
import operator
import os
import re
from dataclasses import dataclass, field

from rundash_core import cache
from rundash_core.io.holes import nul_run_fd, run_text

BLOCK = 8 << 20  # bytes read per look
CHECK_BYTES = 64
RESUMING = re.compile(rb"Resuming from [^\n]*?global_step_(\d+)")
STEP_AT = re.compile(rb"step:(\d+) - ")
_VALUE = rb"([^ \r\n-][^ \r\n]*)"  # (a negative time is no time)
STEP_TIMES = (re.compile(rb"timing_s/step:" + _VALUE), re.compile(rb"timing/step:" + _VALUE))
TESTING_TIME = re.compile(rb"timing(?:_s)?/testing:" + _VALUE)
PART_TIME = re.compile(rb" - timing/(?!step:)\w+:" + _VALUE)  # era S1 logs time the parts of a step only
_KEY_TAIL = frozenset(b"_/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_NP = re.compile(rb"^np\.[A-Za-z]+\d*\((.*)\)$")


@dataclass
class LogPass:
    """What the bytes before `end` (a line start) hold."""

    end: int = 0
    check: bytes = b""
    timed: bool = False  # the step timings were read too (only a log whose end has no stamp needs them)
    nul_runs: list[str] = field(default_factory=list)  # runs of NUL bytes skipped (holes), said as problems
    resumed_from: list[int] = field(default_factory=list)  # N of each `Resuming from …/global_step_N`
    restarts: list[int] = field(default_factory=list)  # steps where the metric steps went back
    top: int = -1  # the highest step so far
    going_back: bool = False  # the last step seen was below `top` (one restart, however long)
    step_seconds: float = 0.0  # `timing_s/step` summed over every metric line (a redone step counts again)
    timed_lines: int = 0
    testing_seconds: float = 0.0  # validation time of lines without a step time (the initial validation)
    part_seconds: float = 0.0  # the summed parts of lines that time no whole step (era S1)

    @property
    def duration_s(self) -> float | None:
        """Seconds the logged steps took (with validations outside a step); from the parts of each
        step (validation among them) when the log times no whole step (an estimate: it misses what
        no part timer covers). None when the log times nothing."""
        if self.timed_lines:
            return self.step_seconds + self.testing_seconds
        return self.part_seconds or None


def _seconds(text: bytes) -> float | None:
    m = _NP.match(text)
    try:
        value = float(m.group(1) if m else text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _is_step_start(data: bytes, at: int) -> bool:
    """`step:` at `at` begins a metric line: not the tail of a key (`global_step:`, `timing_s/step:`)."""
    return at == 0 or data[at - 1] not in _KEY_TAIL


def _sum(values: list[bytes]) -> tuple[float, int]:
    """(sum, count) of the finite values (`np.float64(…)` unwrapped)."""
    try:
        total = math.fsum(map(float, values))
        if math.isfinite(total):
            return total, len(values)
    except ValueError:
        pass
    kept = [v for t in values if (v := _seconds(t)) is not None]
    return math.fsum(kept), len(kept)


def _read(acc: LogPass, data: bytes) -> None:
    """`acc` with the whole lines of `data` (which starts at a line start)."""
    if b"Resuming from" in data:
        acc.resumed_from += [int(n) for n in RESUMING.findall(data)]
    steps = list(map(int, STEP_AT.findall(data)))
    if steps and (steps[0] < acc.top or any(map(operator.lt, steps[1:], steps))):
        steps = [int(m.group(1)) for m in STEP_AT.finditer(data) if _is_step_start(data, m.start())]
        for s in steps:  # (a keyed `…step:N - ` tail only repeats its line's step: it never goes back)
            if s < acc.top:
                if not acc.going_back:
                    acc.restarts.append(s)
                acc.going_back = True
            else:
                acc.going_back = False
                acc.top = s
    elif steps:
        acc.top, acc.going_back = steps[-1], False
    if acc.timed:
        _read_timings(acc, data)


def _read_timings(acc: LogPass, data: bytes) -> None:
    seconds, n = _sum(STEP_TIMES[0].findall(data) or STEP_TIMES[1].findall(data))
    acc.step_seconds += seconds
    acc.timed_lines += n
    if b"/testing:" in data:
        for m in TESTING_TIME.finditer(data):  # rare: every test_freq steps
            lo, hi = data.rfind(b"\n", 0, m.start()) + 1, data.find(b"\n", m.end())
            line = data[lo: hi if hi >= 0 else len(data)]
            if all(p.search(line) is None for p in STEP_TIMES) and (v := _seconds(m.group(1))) is not None:
                acc.testing_seconds += v
    if not acc.timed_lines:
        acc.part_seconds += _sum(PART_TIME.findall(data))[0]


def log_pass(path: str, *, timed: bool = False) -> LogPass | None:
    """The pass over the log as it is now (its whole lines), reading only what was appended since
    the last look (`timed`: with its step timings, read from the start the first time they are
    asked for); None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        key = ("verl-log-pass", st.st_dev, st.st_ino)
        have = cache.shared.peek(key)
        if (have is not None and have.end <= st.st_size and (have.timed or not timed)
                and os.pread(fd, len(have.check), have.end - len(have.check)) == have.check):
            if have.end == st.st_size:
                return have
            acc = copy.deepcopy(have)
        else:
            acc = LogPass(timed=timed)
        pos = acc.end
        while pos < st.st_size:
            data = os.pread(fd, min(BLOCK, st.st_size - pos), pos)
            run = nul_run_fd(fd, data, pos, st.st_size)
            if run is not None:  # a hole (or a crash's zeros): the line before it ends there, skipped unread
                _read(acc, data[:run[0] - pos])
                if len(acc.nul_runs) < 20:
                    acc.nul_runs.append(run_text(run))
                pos = run[1]
                continue
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # no whole line (yet) in this block
                if len(data) < BLOCK:
                    break
                cut = len(data)
            _read(acc, data[:cut])
            pos += cut
        acc.end = pos
        acc.check = os.pread(fd, min(CHECK_BYTES, pos), pos - min(CHECK_BYTES, pos))
    except OSError:
        return None
    finally:
        os.close(fd)
    cache.shared.discard(key)
    cache.shared.get_or_create(key, lambda: acc, size=512 + 16 * (len(acc.resumed_from) + len(acc.restarts)))
    return acc
