"""The steps of verl metric lines found by byte searches over a log's ends (`ends`) and the bytes
before them (`steps_before_tail`): no whole-file parse. A line counts as a step done only when it logs at least
one finite number (`metrics.steps_done`): a line of NaNs (or text the grammar does not read as a
metric line) sets no run card step."""
from __future__ import annotations

import re

from rundash_core.metrics.steps_done import has_finite_value
from rundash_core.sources.verl.grammar import parse_console_line

STEP_AT = re.compile(rb"step:(\d+) - ")


def first_step(data: bytes, lo: int = 0) -> int | None:
    """The step of the first training metric line (`step:N - key:value - …` not preceded by a word
    character or `/`, logging a key other than validation ones) in `data[lo:]`: an initial
    validation at step 0 does not make a log 0-based (spec 2.3)."""
    while (m := STEP_AT.search(data, lo)) is not None:
        pos, lo = m.start(), m.start() + 1
        if pos and (data[pos - 1:pos].isalnum() or data[pos - 1:pos] in b"_/"):
            continue
        end = data.find(b"\n", m.end())
        segments = data[m.end(): end if end >= 0 else len(data)].split(b" - ")
        if b":" in segments[0] and any(not _is_validation_key(seg.partition(b":")[0]) for seg in segments):
            return int(m.group(1))  # (a sample print holding `step:0 - text` is no metric line)
    return None


def last_step_at(data: bytes, lo: int, hi: int) -> tuple[int | None, int]:
    """(the last `step:N - ` in `data[lo:hi]` not preceded by a word character or `/`, where it
    starts); (None, -1) when there is none. Backwards `rfind` hops, the regex tried only at each
    `step:` (docs/architecture.md#fast-paths)."""
    while (pos := data.rfind(b"step:", lo, hi)) >= 0:
        m = STEP_AT.match(data, pos, hi)
        if m is not None and (pos == 0 or not (data[pos - 1:pos].isalnum() or data[pos - 1:pos] in b"_/")):
            return int(m.group(1)), pos
        hi = pos
    return None, -1


_GUARDED_STEP_AT = re.compile(rb"(?<![\w/])step:(\d+) - ")


def last_step_at_reference(data: bytes, lo: int, hi: int) -> tuple[int | None, int]:
    found = list(_GUARDED_STEP_AT.finditer(data, lo, hi))  # the lookbehind sees before `lo`
    return (int(found[-1].group(1)), found[-1].start()) if found else (None, -1)


def _last_step_logging_a_number(data: bytes, lo: int, hi: int) -> tuple[int | None, int]:
    """`last_step_at`, skipping lines that log no finite value (`logs_a_number`)."""
    while True:
        step, at = last_step_at(data, lo, hi)
        if step is None or logs_a_number(data, at, hi):
            return step, at
        hi = at


def logs_a_number(data: bytes, at: int, hi: int) -> bool:
    """Does the metric line starting at `at` (`step:N - …`, up to its newline or `hi`) log a finite
    value (a line cut by another writer's output reads as none)?"""
    end = data.find(b"\n", at, hi)
    text = data[at: end if end >= 0 else hi].decode("utf-8", "replace")
    return any(has_finite_value(values) for _step, values in parse_console_line(text))


def last_steps(data: bytes, lo: int, hi: int) -> tuple[int | None, int, int | None]:
    """(the last step in `data[lo:hi]` logging a finite value, where its line starts (-1: none),
    the last such step of a line logging more than validation keys)."""
    step, at = _last_step_logging_a_number(data, lo, hi)
    train, where, top = step, at, hi
    while train is not None and _validation_only(data, where, top):
        top = where
        train, where = _last_step_logging_a_number(data, lo, top)
    return step, at, train


def _validation_only(data: bytes, at: int, hi: int) -> bool:
    """Does the metric line at `at` log validation keys only (SFT's per-epoch `val/loss` line)?"""
    end = data.find(b"\n", at, hi)
    body = data[data.find(b" - ", at) + 3: end if end >= 0 else hi]
    return all(_is_validation_key(seg.split(b":", 1)[0]) for seg in body.split(b" - "))


_VALIDATION_KEY = re.compile(rb"^(?:val|test_score)|validat|_val\b|/val/")


def _is_validation_key(key: bytes) -> bool:
    """`val-core/…`, `val/…`, `test_score/…`, and the timings of a validation
    (`rollouter/validate_time`, `timing_s/merge_val`, `timing/testing`)."""
    return _VALIDATION_KEY.search(key) is not None or key == b"timing/testing"
