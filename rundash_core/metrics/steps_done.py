"""Which metric rows count as a step done: one that logs at least one finite number. A row of NaNs
(a writer's placeholder, a step whose values were all non-numeric or NaN) says nothing about
training at that step, so the summary's step (run card, runs list) skips it, as charts do."""
from __future__ import annotations

from rundash_core.numbers import finite_float

RESERVED = ("step", "time", "_timestamp", "producer")


def has_finite_value(values: dict, *, skip: tuple = RESERVED) -> bool:
    """Does a row (a parsed JSON object or metric line) hold a finite number outside `skip`?"""
    for key, v in values.items():
        if key in skip:
            continue
        if finite_float(v, bools=True) is not None:
            return True
    return False


def steps_done(last: int | None, first: int | None) -> int | None:
    """Steps done from the last and first step logged: steps 0..8 are 9 done, steps 1..9 are 9
    (the summary's `step`, the same rule for every kind that numbers its steps)."""
    if last is None:
        return None
    return last + 1 if first == 0 else last
