"""The ends of a verl console log, for discovery: small reads of the first and last bytes, widened
only when a field is not found there (`LogHeadTail`), and targeted byte searches over them
(`head_fields`, `tail_fields`). No line splitting, no config parse, and of the metric lines only
the last one is parsed (does it log a finite value?): the runs list of hundreds of logs must cost
little more than a stat per log.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from rundash_core.io.holes import content_end
from rundash_core.sources.verl.grammar import PROGRESS
from rundash_core.sources.verl.steps import STEP_AT as _STEP_AT
from rundash_core.sources.verl.steps import last_steps

FIRST_BYTES = 16 << 10  # what is read of each end first; a file of up to twice this is read whole
TAIL_STEPS = (16 << 10, 64 << 10, 1 << 20)  # the tail windows the last `step:N - ` is looked for in
HEAD_BYTES = 64 << 10  # the head window of the rarely needed fields (tqdm total, SFT step count, …)
CONFIG_BYTES = 256 << 10  # the config print is looked for this far into the file
LOGGER_BYTES = 256 << 10  # `Creating file logger at` is looked for this far (only with a 'file' logger)
CONFIG_WINDOW = 64 << 10  # the config print is searched for its sections within this much of its start
LINE_BYTES = 64 << 10  # a head line a search needs whole is read on for at most this much

_STR = rb"'((?:[^'\\\n]|\\.)*)'"
_EXPERIMENT = re.compile(rb"'experiment_name': " + _STR)
_PROJECT = re.compile(rb"'project_name': " + _STR)
_TOTAL = re.compile(rb"'total_training_steps': (-?\d+|None)")
_PATH = re.compile(rb"'path': (?:" + _STR + rb"|None)")
_PARTIAL = re.compile(rb"'partial_pretrain': (?:" + _STR + rb"|None)")
_VAL_KEY = re.compile(rb"(val(?:-core/|-aux/|/test_score/)[^\s:']+):")
_STAMP = re.compile(rb"20\d\d-[01]\d-[0-3]\d[ T][0-2]\d:[0-5]\d:[0-5]\d")
_CONFIG_STARTS = (b"{'actor_rollout_ref'", b"{'data'")


class LogHeadTail:
    """The first and last bytes of one open log: `head` is what was read of its start (the
    searches see exactly that), read on by `read_head(n)` only when a search needs more; `tail(n)`
    the last `n` bytes, likewise. A small file is read whole, once."""

    def __init__(self, fd: int, size: int, settled: bool = False):
        self.file_size = size
        size = content_end(fd, size)  # a sparse or zeroed tail: the ends are read before it
        self.fd, self.size = fd, size
        self.settled = settled  # the file has not changed for a while: a last line without newline is whole
        if size <= 2 * FIRST_BYTES:
            self.head = os.pread(fd, size, 0)
            self._tail, self.tail_start = self.head, 0
        else:
            self.head = os.pread(fd, FIRST_BYTES, 0)
            self.tail_start = size - FIRST_BYTES
            self._tail = os.pread(fd, FIRST_BYTES, self.tail_start)

    def read_head(self, n: int) -> bytes:
        """The head holding at least `min(n, size)` bytes: only the missing bytes are read."""
        have = len(self.head)
        if have < min(n, self.size):
            self.head += os.pread(self.fd, min(n, self.size) - have, have)
        return self.head

    def tail(self, n: int) -> bytes:
        start = max(self.size - n, 0)
        if start < self.tail_start:
            self._tail = os.pread(self.fd, self.tail_start - start, start) + self._tail
            self.tail_start = start
        return self._tail


# The head: the config print's fields, the start time ----------------------------------------------
@dataclass(frozen=True)
class HeadFields:
    experiment: str | None = None
    total_steps: int | None = None
    models: tuple = ()  # candidate model paths in config_model's order (None: absent)
    flavor: str = "rl"
    file_logger: bool = True  # the config's trainer.logger may hold 'file' (or says nothing)
    end: int = 0  # where the config print ends (0: none found)
    project: str | None = None  # trainer.project_name


def _str_value(m) -> str | None:
    if m is None or m.group(1) is None:
        return None
    return m.group(1).decode("utf-8", "replace")


def config_start(data: bytes, end: int = -1) -> int:
    """Where the first config print starts in `data[:end]` (-1: none); `{'data'` is searched only
    before the first `{'actor_rollout_ref'`."""
    end = len(data) if end < 0 else end
    rl = data.find(_CONFIG_STARTS[0], 0, end)
    sft = data.find(_CONFIG_STARTS[1], 0, end if rl < 0 else rl)
    return sft if sft >= 0 else rl


def _config_bounds(data: bytes, pos: int, hi: int | None = None) -> tuple[int, int]:
    """(offset of `'trainer': {`, the config print's end) in `data[:hi]`: its `trainer` section is
    the last (pprint sorts keys), so the end is the first line ending in `}` (not `},`) after
    `'trainer': {` within CONFIG_WINDOW of `pos`; the trainer offset is -1 when it is not within
    the window (and then so is the end)."""
    window = min(pos + CONFIG_WINDOW, len(data) if hi is None else hi)
    trainer = data.find(b"'trainer': {", pos, window)
    if trainer < 0:
        return -1, -1
    end = data.find(b"}\n", trainer, window)
    return trainer, (-1 if end < 0 else end + 1)


def first_needle(data: bytes, needles: tuple, lo: int, hi: int, hop: bytes, tries: int = 64) -> int:
    """The first offset in `data[lo:hi]` where one of `needles` lies whole (-1: none), all of them
    starting with `hop`, a byte rare in logs: hops to each `hop` byte (memchr), `bytes.find` per
    needle after `tries` misses (docs/architecture.md#fast-paths)."""
    for _ in range(tries):
        at = data.find(hop, lo, hi)
        if at < 0 or any(data.startswith(n, at, hi) for n in needles):
            return at
        lo = at + 1
    return first_needle_reference(data, needles, lo, hi)


def first_needle_reference(data: bytes, needles: tuple, lo: int, hi: int, hop: bytes = b"") -> int:
    hits = [at for n in needles if (at := data.find(n, lo, hi)) >= 0]
    return min(hits) if hits else -1


def first_of(ends: LogHeadTail, needles: tuple, limit: int, hop: bytes = b"") -> tuple[bytes, int]:
    """(head, the first offset of any of `needles` lying whole within the first `limit` bytes, or
    -1). Searches what was read, reading on (doubling) only while it is not there, and searching
    only the bytes added; hops to each `hop` byte when given (`first_needle`)."""
    top = min(limit, ends.size)
    width = max(map(len, needles))
    lo = 0
    while True:
        data = ends.head
        hi = min(len(data), top)
        at = first_needle(data, needles, lo, hi, hop) if hop else first_needle_reference(data, needles, lo, hi)
        if at >= 0 or hi >= top:
            return data, at
        lo = max(hi - width, 0)
        ends.read_head(min(top, 2 * hi))


def find_config_bounds(ends: LogHeadTail) -> tuple[bytes, int, int, int]:
    """(head, config start, offset of the print's `'trainer': {`, config end), reading on only as
    far as needed: the start (the first `{'actor_rollout_ref'` or `{'data'`, as `config_start`)
    within CONFIG_BYTES, the end within CONFIG_WINDOW of it; -1 for what is not there."""
    data, pos = first_of(ends, _CONFIG_STARTS, CONFIG_BYTES, b"{")  # `{` is rare before the config print
    if pos < 0:
        return data, -1, -1, -1
    wmax = min(pos + CONFIG_WINDOW, ends.size)
    while True:  # the trainer section and the print's end, in what was read, else within CONFIG_WINDOW
        data = ends.head
        hi = min(len(data), wmax)
        trainer, end = _config_bounds(data, pos, hi)
        if end >= 0 or hi >= wmax:
            return data, pos, trainer, end
        ends.read_head(min(wmax, 2 * hi))


def head_fields(data: bytes, pos: int | None = None, end: int | None = None, trainer: int | None = None,
               hi: int | None = None) -> HeadFields:
    """The fields the runs list shows from the first config print in `data`, by targeted byte
    searches (pprint sorts keys: `trainer` is the last top-level section) within the config print
    (found within `CONFIG_WINDOW` of its start; else over all of `data`). `trainer`: the offset
    of `'trainer': {` when the caller found it with `end` (`find_config_bounds`); `hi`: the bytes
    seen are `data[:hi]` (default: all).

    Each section is searched for from where the one sorted before it was found (the actor's
    `model`, then `critic`, then its `model`), so the print is scanned about once."""
    hi = len(data) if hi is None else hi
    pos = config_start(data, hi) if pos is None else pos
    if pos < 0:
        return HeadFields()
    rl = data.startswith(_CONFIG_STARTS[0], pos)
    if end is None:
        trainer, end = _config_bounds(data, pos, hi)
    stop = hi if end < 0 else end
    if trainer is None or trainer < 0:
        trainer = data.find(b"'trainer': {", pos, stop)
    exp = total = project = None
    logger = True
    if trainer >= 0:
        exp = _str_value(_EXPERIMENT.search(data, trainer, stop))
        project = _str_value(_PROJECT.search(data, trainer, stop))
        m = _TOTAL.search(data, trainer, stop)
        total = int(m.group(1)) if m is not None and m.group(1) != b"None" else None
        at = data.find(b"'logger': [", trainer, stop)
        close = data.find(b"]", at, stop) if at >= 0 else -1
        logger = close < 0 or data.find(b"'file'", at, close) >= 0
    models: list = []
    model = data.find(b"'model': {", pos, stop)
    if rl:
        path = _PATH.search(data, model, stop) if model >= 0 else None
        models.append(_str_value(path))
        # `critic` sorts after `actor_rollout_ref` (whose `model` is the first one): search on from there
        critic = data.find(b"'critic': {", path.end() if path is not None else max(model, pos), stop)
        cmodel = data.find(b"'model': {", critic, stop) if critic >= 0 else -1
        models.append(_str_value(_PATH.search(data, cmodel, stop)) if cmodel >= 0 else None)
    else:
        models += [_str_value(_PARTIAL.search(data, model, stop)) if model >= 0 else None,
                   _str_value(_PATH.search(data, model, stop)) if model >= 0 else None]
    return HeadFields(exp, total, tuple(models), "rl" if rl else "sft", logger, max(end, 0), project)


def first_stamp(data: bytes, start: int = 0, hi: int | None = None) -> bytes | None:
    """The first `YYYY-MM-DD HH:MM:SS` in `data[start:hi]` not preceded by a digit."""
    hi = len(data) if hi is None else hi
    while (m := _STAMP.search(data, start, hi)) is not None:
        if m.start() == 0 or not data[m.start() - 1:m.start()].isdigit():
            return m.group()
        start = m.start() + 1
    return None


def head_search(ends: LogHeadTail, pattern, literal: bytes, limit: int):
    """`pattern` searched from the first `literal` in the first `limit` bytes, on the head read
    through that line's end (at most LINE_BYTES more)."""
    _data, at = first_of(ends, (literal,), limit)
    if at < 0:
        return None
    while ends.head.find(b"\n", at) < 0 and len(ends.head) < min(ends.size, at + LINE_BYTES):
        ends.read_head(len(ends.head) + FIRST_BYTES)
    return pattern.search(ends.head, at)


def stamp_in(ends: LogHeadTail, start: int, hi: int) -> bytes | None:
    """`first_stamp` of the head's `[start, hi)`, reading on (doubling) only while none is found."""
    while True:
        data = ends.head
        top = min(len(data), hi)
        stamp = first_stamp(data, start, top)
        if stamp is not None or top >= min(hi, ends.size):
            return stamp
        start = max(top - 32, start)  # a stamp cut at the end of what was read is found whole
        ends.read_head(min(hi, 2 * len(data)))


# The tail: the last step, the tqdm total, the final-validation print ------------------------------
@dataclass(frozen=True)
class TailFields:
    last_step: int | None = None
    progress_total: int | None = None
    final_validation: bool = False
    keys: tuple = ()
    last_stamp: bytes | None = None  # the last `YYYY-MM-DD HH:MM:SS` of the window
    last_train_step: int | None = None  # of the last line logging more than validation keys


def tail_progress_total(data: bytes, lo: int, hi: int) -> int | None:
    """The total of the last `Training Progress:` bar in data[lo:hi] (None when there is none)."""
    p = hi
    while (p := data.rfind(b"Training Progress:", lo, p)) >= 0:
        m = PROGRESS.match(data, p, hi)
        if m is not None:
            return int(m.group(1))
    return None


def tail_val_keys(data: bytes, lo: int, hi: int) -> tuple[str, ...]:
    """The validation keys of the last line holding any, in data[lo:hi], in order, once each."""
    return tuple(dict.fromkeys(k.decode("utf-8", "replace") for k in _val_keys(data, lo, hi)))


_VAL_PREFIXES = (b"val-", b"val/test_score/")


def _val_keys(data: bytes, lo: int, hi: int) -> list[bytes]:
    """The validation keys of the last metric line in `data[lo:hi]` that has any: found backwards
    from each `val` (a `val-` or `val/test_score/`), the key regex run on that line only."""
    top = hi
    while (at := data.rfind(b"val", lo, hi)) >= 0:
        if not data.startswith(_VAL_PREFIXES, at, top):
            hi = at
            continue
        start, end = max(data.rfind(b"\n", lo, at) + 1, lo), data.find(b"\n", at, top)
        keys = [m.group(1) for m in _VAL_KEY.finditer(data, start, end)
                if m.start() == 0 or not (data[m.start() - 1:m.start()].isalnum() or data[m.start() - 1] in b"_/'")]
        if keys:
            return keys
        hi = top = start
    return []


_FINAL = b"Final validation metrics"
FINAL_BEFORE = 8 << 10  # how far before the last step line a final-validation print is looked for


def tail_fields(ends: LogHeadTail, progress: bool = True) -> TailFields:
    """The last step (a backwards search for the last `step:N - ` logging a finite value,
    `steps`) in the last 16 KiB (64 KiB, 1 MiB when that holds none; before that:
    `steps_before_tail`), and in the same window the final-validation print, the
    validation keys and (when `progress`: the config gives no total) the last tqdm total.

    The final-validation print follows the last step's line (early-2025 verl printed it just
    before a last validation-only line): when that line starts within FINAL_BEFORE of the
    window's start, the print is also looked for in the FINAL_BEFORE bytes before the window."""
    for nbytes in TAIL_STEPS:
        data = ends.tail(nbytes)
        lo = data.find(b"\n") + 1 if ends.tail_start > 0 else 0  # the first line is cut
        hi = len(data) if ends.settled else data.rfind(b"\n") + 1  # a partial last line is not read yet
        step, at, train = last_steps(data, lo, hi)
        if step is not None or ends.tail_start == 0:
            break
    total = tail_progress_total(data, lo, hi) if progress else None
    keys = tail_val_keys(data, lo, hi)
    final = data.find(_FINAL, lo, hi) >= 0
    if not final and at >= 0 and at - lo < FINAL_BEFORE and ends.tail_start > 0:
        more = ends.tail(ends.size - ends.tail_start + FINAL_BEFORE)  # prepends FINAL_BEFORE bytes (or fewer)
        added = len(more) - len(data)
        wlo = more.find(b"\n") + 1 if ends.tail_start > 0 else 0
        final = more.find(_FINAL, wlo, lo + added + len(_FINAL)) >= 0
    # the last wall-clock stamp: of the run's course, not of its start-up (a short log's window
    # holds both): after the first metric line when the window is the whole file
    first = _STEP_AT.search(data, lo, hi) if ends.tail_start == 0 else None
    stamps = _STAMP.findall(data, first.start() if first is not None else lo, hi) if first or ends.tail_start else []
    return TailFields(step, total, final, keys, stamps[-1] if stamps else None, train)


