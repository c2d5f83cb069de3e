"""verl's `file` logger JSONL (`docs/formats/verl.md`, spec 10), read incrementally into the
MetricStore rows the console log gives (`verl_log`): `{"step": N, key: number, …, "producer":
"trainer", "time": NaN}`. Its own module: a JSONL reader shares nothing with the console parser.
"""
from __future__ import annotations

from rundash_core.io.jsonl import JsonlTail, Parsed, TailResult

NAN = float("nan")
PRODUCER = "trainer"


def logger_row(row) -> tuple[int, dict] | None:
    """(step, data) of a file-logger row `{"step": N, "data": {…}}`, N a whole step that fits an
    int64; None for anything else."""
    step, data = row.get("step"), row.get("data")
    if type(step) is not int or not 0 <= step < 2**63 or not isinstance(data, dict):
        return None
    return step, data


class FileLoggerTail(JsonlTail):
    """verl's `file` logger JSONL (spec 10): `{"step": N, "data": {…}}` per logging call, flattened
    to the same rows as the console log's. Only numbers are kept (null, written for NaN/inf,
    reads as a gap); a line of another shape is counted as a problem."""

    def poll(self) -> TailResult | None:
        result = super().poll()
        if result is None:
            return None
        parsed = result.parsed
        rows, numbers = [], []
        for i, r in enumerate(parsed.rows):
            found = logger_row(r)
            if found is None:
                self.problems.add('not a file-logger row ({"step": N, "data": {…}})', parsed.line_of(i))
                continue
            step, data = found
            out = {"producer": PRODUCER, "step": step}
            for k, v in data.items():
                if type(v) is int and not -(2**63) <= v < 2**63:  # Python's json writes any int
                    try:
                        v = float(v)
                    except OverflowError:
                        self.problems.add("a number too large for a float (left out)", parsed.line_of(i))
                        continue
                if type(v) in (int, float, bool) or v is None:
                    out[k] = v
            out["time"] = NAN
            rows.append(out)
            numbers.append(parsed.line_of(i))
        return TailResult(Parsed(rows, parsed.nlines, parsed.first_line, numbers), result.reset)
