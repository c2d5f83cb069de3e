"""The metric lines of a block of verl console output, as MetricStore rows: `parse_metric_block`.

The fast version finds the metric lines with one regex pass over the raw bytes, turns them into one
JSON array by byte replacements (`:` → `":`, ` - ` → `,"`) and parses it with one orjson call;
where orjson stops it bisects on the error position, and the lines JSON cannot hold (`nan`,
`np.float64(…)`, a stray quote or space) go one by one, in the end through the grammar
(`grammar.parse_console_line`). `parse_metric_block_reference` reads the same block line by line
with the grammar alone: obviously right and slow; tests/unit/test_verl_fast_paths.py holds the two
equal on every real log. Why the fast one exists: docs/architecture.md#fast-paths.

Lenient where the grammar is not: a JSON literal `true`/`false`/`null` as a value reads as 1/0/a
gap. Rows carry no `producer` and no `time` (the store's defaults say "trainer", "not known").
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from itertools import repeat

import orjson

from rundash_core.sources.verl.grammar import parse_console_line

# `step` not after a word character or `/` (spec 4.7's guard, on raw bytes), then the step and the
# rest of the line. A colour code right before `step:` (`\x1b[0mstep:`) is stripped by the spec
# before its guard looks: the usual SGR forms are accepted when what precedes them passes the guard.
_SGR = (rb"\x1b\[m", rb"\x1b\[\dm", rb"\x1b\[\d\dm", rb"\x1b\[\d;\dm", rb"\x1b\[\d;\d\dm", rb"\x1b\[\d\d;\d\dm")
_CANDIDATE = re.compile(rb"step(?:(?<![\w/]step)|(?<=mstep)(?:"
                        + b"|".join(rb"(?<=%sstep)(?<![\w/]%sstep)" % (f, f) for f in _SGR) + rb")):(\d+ - .*)")
_JSON_OPEN = b'{"step":'
_JSON_JOIN = b"},\n" + _JSON_OPEN
# Bytes that make orjson read what the grammar rejects (padded values, strings, arrays, escapes)
# become control characters, which no JSON text may hold: such a line fails and takes the exact
# path. Spaces become \x02 so that only the ` - ` separators (`\x02-\x02`) turn into JSON.
_JSON_SAFE = bytes.maketrans(b' \t\\[{"', b"\x02\x01\x01\x01\x01\x01")
_SEPARATOR = b"\x02-\x02"
_UNSAFE = (b'"', b"\\", b"[", b"{", b"\t")
_NP_WRAP_BYTES = re.compile(rb"(?<=:)np\.[A-Za-z]+\d*\(([^()]*)\)")
_SPECIALS = (b"-nan", b"+nan", b"-inf", b"+inf", b"nan", b"inf")
_BISECT_STOPS = 16  # orjson stops in a block before the rest goes line by line


@dataclass
class ValueEra:
    """What the log's lines showed so far (kept across blocks): numpy wrappers (`np.float64(x)`),
    True/False values. Blocks whose sample shows them too are normalized before the bulk parse."""

    wrapped: bool = False
    bools: bool = False


@dataclass
class BlockRows:
    """The rows of a block in file order, and its problems in the order met: `(None, text)`:
    `text` (a metric line from its step on) is not UTF-8 (read with replacements); `(steps, text)`:
    those metric lines in `text` were cut by other output (not read, spec 4.8)."""

    rows: list[dict] = field(default_factory=list)
    problems: list[tuple[list[int] | None, bytes]] = field(default_factory=list)


def row(step: int, values: dict) -> dict:
    """A MetricStore row, shaped as the bulk path leaves them (a `step` key in values wins)."""
    return {"step": step, **values}


def parse_metric_block(block, era: ValueEra | None = None) -> BlockRows:
    """The metric lines of `block` (bytes or a memoryview of whole lines; a last line without its
    newline is read as it is) as rows; `era` is updated by what the lines show."""
    out = BlockRows()
    found = _CANDIDATE.findall(block)
    if found:
        _lines(found, era if era is not None else ValueEra(), out)
    return out


def parse_metric_block_reference(block) -> BlockRows:
    """`parse_metric_block` by the grammar, one physical line at a time."""
    out = BlockRows()
    for line in bytes(block).split(b"\n"):
        if b"step:" not in line:
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            text = line.decode("utf-8", "replace")
            out.problems.append((None, line))
        cuts: list = []
        out.rows += (row(step, values) for step, values in parse_console_line(text, cuts))
        if cuts:
            out.problems.append((cuts, line))
    return out


def _unwrap(text: bytes) -> bytes:
    """`:np.float64(x)` → `:x` (split and join the regex's groups)."""
    return b"".join(_NP_WRAP_BYTES.split(text))


def _add(batch: list[dict], rows: list[dict]) -> bool:
    """Append parsed rows; a row with an empty key is no metric line."""
    rows += [d for d in batch if "" not in d] if any(map(operator.contains, batch, repeat(""))) else batch
    return True


def _lines(found: list[bytes], era: ValueEra, out: BlockRows) -> None:
    text = _era_normalized(b"\n".join(found), found, era)
    unsafe = any(c in text for c in _UNSAFE)
    joined = text.replace(b" - ", b',\t"')
    if not unsafe and b" " not in joined and _bulk_text(joined, out.rows):
        return  # the common case: one orjson call for the block
    # Some line is not ours (a space or an unsafe byte left over) or orjson stopped: parse the
    # good lines in runs, the others one by one.
    lines = joined.replace(b":", b'":').split(b"\n")
    a, n, failures = 0, len(lines), [0]
    while a < n:
        b = next((i for i in range(a, n) if b" " in lines[i] or unsafe and any(c in found[i] for c in _UNSAFE)), n)
        before = (era.wrapped, era.bools)
        done = _bulk(lines, found, a, b, era, out, failures)
        if (era.wrapped, era.bools) != before:  # a line showed the log's value era: redo the rest
            return _lines(found[done:], era, out) if done < n else None
        if b < n:
            _one(found[b], era, out)
        a = b + 1


def _era_normalized(text: bytes, found: list[bytes], era: ValueEra) -> bytes:
    """`np.float64(x)` → x, True/False → 1/0 when the era says so and the block's sample shows them."""
    if era.wrapped or era.bools:
        sample = (found[0], found[len(found) // 2], found[-1])
        if era.wrapped and any(b"np." in f for f in sample):
            text = _unwrap(text)
        if era.bools and any(b":True" in f or b":False" in f for f in sample):
            text = text.replace(b":True", b":1").replace(b":False", b":0")
    return text


def _bulk_text(text: bytes, rows: list[dict]) -> bool:
    """All lines of a block at once; False when orjson stops somewhere."""
    try:
        batch = orjson.loads(b"".join((b"[", _JSON_OPEN, text.replace(b":", b'":').replace(b"\n", _JSON_JOIN), b"}]")))
    except orjson.JSONDecodeError:
        return False
    return _add(batch, rows)


def _bulk(lines: list[bytes], found: list[bytes], a: int, b: int, era: ValueEra, out: BlockRows,
          failures: list[int]) -> int:
    """Lines [a, b) in one orjson call; where it stops, the bad line (or the one before it, whose
    key string ran on) goes one by one and the rest is tried again (after _BISECT_STOPS stops in a
    block, line by line). Returns where it stopped early (the value era changed), else b."""
    while a < b:
        if failures[0] > _BISECT_STOPS:
            for i in range(a, b):
                _one(found[i], era, out)
            return b
        try:
            batch = orjson.loads(b"[" + _JSON_OPEN + _JSON_JOIN.join(lines[a:b]) + b"}]")
        except orjson.JSONDecodeError as e:
            failures[0] += 1
            bad = min(b - 1, a + max(e.lineno, 1) - 1)
            if bad - 1 > a:
                _bulk(lines, found, a, bad - 1, era, out, failures)
            before = (era.wrapped, era.bools)
            for i in range(max(a, bad - 1), bad + 1):
                _one(found[i], era, out)
            a = bad + 1
            if (era.wrapped, era.bools) != before:
                return a
            continue
        _add(batch, out.rows)
        return b
    return b


def _one(found: bytes, era: ValueEra, out: BlockRows) -> None:
    text = found.translate(_JSON_SAFE)
    if not era.wrapped and b":np." in text:
        era.wrapped = True
    if not era.bools and (b":True" in text or b":False" in text):
        era.bools = True
    d = _normalized(text)
    if d is not None and "" not in d:
        _add([d], out.rows)
    else:
        _exact(found, out)


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


def _exact(found: bytes, out: BlockRows) -> None:
    """The grammar's reading of a candidate (`N - rest of the physical line`)."""
    try:
        text = found.decode("utf-8")
    except UnicodeDecodeError:
        text = found.decode("utf-8", "replace")
        out.problems.append((None, found))
    head, _, more = text.partition("\r")
    cuts: list = []
    parsed = parse_console_line("step:" + head, cuts)  # the guard held on the raw bytes
    if more:
        parsed += parse_console_line(more, cuts)
    out.rows += (row(step, values) for step, values in parsed)
    if cuts:
        out.problems.append((cuts, found))
