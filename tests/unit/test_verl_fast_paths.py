"""verl's fast paths held equal to their plain reference versions (docs/architecture.md#fast-paths):
the metric-line block parse (`parse_metric_block`), the marker search (`find_markers`) and the hop searches (`first_needle`,
`last_step_at`, `search_back`), on every real verl / SWE-Lego-RL log in
tests/data and the demo's, and on cut, torn and odd variants of them."""
from __future__ import annotations

import math
import os
import random
from itertools import pairwise

import pytest

from rundash_core.sources.verl import ends as verl_ends
from rundash_core.sources.verl.block_parse import (
    ValueEra,
    parse_metric_block,
    parse_metric_block_reference,
)
from rundash_core.sources.verl.ends import first_needle, first_needle_reference
from rundash_core.sources.verl.metric_log import find_markers, find_markers_reference
from rundash_core.sources.verl.overview import read_overview_inputs
from rundash_core.sources.verl.steps import last_step_at, last_step_at_reference
from rundash_core.sources.verl.steps_before_tail import (
    search_back,
    search_back_reference,
)

from helpers import DATA

REAL_LOGS = sorted(p for folder in ("verl", "verl-public", "verl-resume", "verl-dumps", "lego", "lego-full", "lego-val")
                   for p in (DATA / folder).rglob("*") if p.suffix in (".log", ".out") and p.is_file())


def test_the_real_logs_are_there():
    names = {p.name for p in REAL_LOGS}
    assert len(REAL_LOGS) >= 12 and "dq_math.log" in names and "qwen3-8b-swegym-gspo-async-r1.log" in names


@pytest.fixture(scope="module")
def logs(demo_runs) -> dict[str, bytes]:
    """Every real log, and the demo's verl and SWE-Lego-RL console logs (the demo folder's top)."""
    folder, _runs = demo_runs
    demo = sorted(p for p in folder.iterdir() if p.suffix in (".log", ".out") and p.is_file())
    assert len(demo) >= 2
    return {str(p): p.read_bytes() for p in (*REAL_LOGS, *demo)}


# The block parse ----------------------------------------------------------------------------------
def _value(v):
    v = float(v)
    return "nan" if math.isnan(v) else v


def _same(got, want) -> None:
    """Rows equal value for value (NaN equal to NaN, 1 to 1.0); the same problems: the steps of the
    cut lines, the count of lines not in UTF-8."""
    assert [{k: _value(v) for k, v in r.items()} for r in got.rows] == [{k: _value(v) for k, v in r.items()} for r in want.rows]
    assert [c for c, _ in got.problems if c is not None] == [c for c, _ in want.problems if c is not None]
    assert sum(c is None for c, _ in got.problems) == sum(c is None for c, _ in want.problems)


def _pieces(data: bytes, cuts: list[int]):
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]


def _variants(data: bytes) -> dict[str, bytes]:
    ansi = data.replace(b"step:", b"\x1b[32mstep:").replace(b"\n", b"\x1b[0m\n")
    return {"as written": data, "CRLF": data.replace(b"\n", b"\r\n"), "ANSI colour": ansi,
            "no newline at EOF": data.rstrip(b"\n"), "last line torn": data[: data.rfind(b" - ") + 5]}


def test_the_block_parse_equals_the_grammar_on_every_log(logs):
    rows = 0
    for path, data in logs.items():
        for label, text in _variants(data).items():
            got, want = parse_metric_block(text, ValueEra()), parse_metric_block_reference(text)
            try:
                _same(got, want)
            except AssertionError as e:
                raise AssertionError(f"{os.path.basename(path)} ({label})") from e
            rows += len(want.rows)
    assert rows > 5 * 1000  # the logs hold metric lines (a test of empty outputs would pass too)


def test_the_block_parse_equals_the_grammar_in_torn_blocks(logs):
    """Blocks cut anywhere (inside a line, inside a value, right after `step:`): each piece read by
    both, the fast one keeping its value era from block to block as the log tail does."""
    rng = random.Random(25)
    for path, data in logs.items():
        if b"step:" not in data:
            continue
        at = data.find(b"step:", len(data) // 3)
        cuts = [rng.randrange(len(data)) for _ in range(6)] + [at + 3, at + 5, data.find(b":", at + 5) + 2]
        era = ValueEra()
        for piece in _pieces(data, [c for c in cuts if 0 < c < len(data)]):
            try:
                _same(parse_metric_block(piece, era), parse_metric_block_reference(piece))
            except AssertionError as e:
                raise AssertionError(f"{os.path.basename(path)}: a piece of {len(piece)} bytes") from e


ODD_LINES = [
    b"(TaskRunner pid=1) step:1 - a:1.0 - b:np.float64(2.5) - c:nan - d:-inf - e:True\n",
    b"step:2 - a:1.5 - b:2.(WorkerDict pid=9) INFO llm_engine.py:123 - Avg throughput: 5.0 tokens/s\n",
    b"step:3 - a:2.0 - b:2.\rTraining Progress:  10%|#  | 3/30 [00:10<01:30, 3.0s/it]\n",
    b"step:4 - a:1\rstep:5 - a:2\r\n",
    b"x/step:6 - a:1\nfoo_step:7 - a:1\n[response] step:8 - not a metric line\n",
    b"step:9 - key with space:1.0 - k\"q:2 - t\tab:3 - [x]:4 - {y}:5 - back\\slash:6\n",
    b"step:10 - a:\xff\xfe1.0 - b:2\n",
    b"\x1b[36m(TaskRunner pid=1)\x1b[0m \x1b[1;32mstep:11 - a:1.0\x1b[0m [repeated 2x across cluster]\n",
    b"step:12 - a:1e-3 - b:.5 - c:+7 - d:np.int64(3) - a:9\n",
    b"step:13 - a:1.0",  # no newline at the end
]


def test_the_block_parse_equals_the_grammar_on_odd_lines():
    for i in range(len(ODD_LINES)):
        block = b"".join(ODD_LINES[i:] + ODD_LINES[:i])
        _same(parse_metric_block(block, ValueEra()), parse_metric_block_reference(block))
    got = parse_metric_block(b"".join(ODD_LINES), ValueEra())
    assert [r["step"] for r in got.rows] == [1, 3, 4, 5, 9, 10, 11, 12, 13]  # (2: cut; 6-8: no metric lines)
    assert [c for c, _ in got.problems if c is not None] == [[2]] and sum(c is None for c, _ in got.problems) == 1


def test_the_marker_search_equals_plain_regexes(logs):
    """Config prints and validation pprints (which split a block before its parse)."""
    rng = random.Random(6)
    found = 0
    for path, data in logs.items():
        for cut in (len(data), *(rng.randrange(len(data) + 1) for _ in range(4))):
            got = find_markers(data, cut)
            assert got == find_markers_reference(data, cut), (os.path.basename(path), cut)
            found += len(got)
    assert found > 20


# The hop searches ---------------------------------------------------------------------------------
def _windows(data: bytes, rng: random.Random, n: int = 12) -> list[tuple[int, int]]:
    out = [(0, len(data)), (0, min(len(data), 16 << 10)), (max(len(data) - (16 << 10), 0), len(data))]
    for _ in range(n):
        lo = rng.randrange(len(data) + 1)
        out.append((lo, rng.randrange(lo, len(data) + 1)))
    return out


def test_the_needle_hops_equal_plain_finds(logs):
    rng = random.Random(7)
    final = (b"Final validation metrics",)
    for path, data in logs.items():
        for lo, hi in _windows(data, rng):
            for needles, hop in ((verl_ends._CONFIG_STARTS, b"{"), (final, b"F")):  # (F: any rare byte)
                for tries in (0, 1, 8, 64):
                    assert (first_needle(data, needles, lo, hi, hop, tries)
                            == first_needle_reference(data, needles, lo, hi)), (os.path.basename(path), lo, hi, needles, tries)
    head = logs[str(DATA / "verl" / "dq_math.log")]
    assert first_needle(head, verl_ends._CONFIG_STARTS, 0, len(head), b"{") > 0  # found, not only -1 == -1


def test_the_backwards_step_hops_equal_the_regex(logs):
    rng = random.Random(9)
    found = 0
    for path, data in logs.items():
        for lo, hi in _windows(data, rng):
            got = last_step_at(data, lo, hi)
            assert got == last_step_at_reference(data, lo, hi), (os.path.basename(path), lo, hi)
            found += got[0] is not None
    assert found > 50


@pytest.mark.parametrize("block", [1 << 20, 4096, 300])
def test_the_search_back_equals_one_whole_read(tmp_path, block, logs):
    """Block by block backwards (a block boundary inside lines) = one read of the whole range."""
    rng = random.Random(block)
    found = 0
    for path, data in logs.items():
        starts = [0] + [i + 1 for i in range(len(data)) if data[i] == 10][:: max(len(data) // 4000, 1)]
        with open(path, "rb") as fh:
            fd = fh.fileno()
            for _ in range(6):
                lo, hi = sorted(rng.sample(starts, 2)) if len(starts) > 1 else (0, 0)
                for whole in (True, False):
                    got = search_back(fd, lo, hi, lo_is_line_start=whole, block=block)
                    assert got == search_back_reference(fd, lo, hi, lo_is_line_start=whole), (os.path.basename(path), lo, hi)
                    found += got[0] is not None
    assert found > 20


# What the ends read -------------------------------------------------------------------------------
def test_the_overview_reads_a_small_multiple_of_its_windows(monkeypatch, logs):
    """The searches see what was read, and read on only where a field is not found: per log, the
    bytes read stay within a small multiple of the windows (head: the config print's window; tail:
    16 KiB, widened when the last step is not there), never the whole of a big log."""
    read = []
    real = os.pread
    monkeypatch.setattr(verl_ends.os, "pread", lambda fd, n, at: (read.append(n), real(fd, n, at))[1])
    for path, data in logs.items():
        read.clear()
        assert read_overview_inputs(path) is not None
        bound = min(2 * len(data), 2 * (verl_ends.CONFIG_BYTES + verl_ends.CONFIG_WINDOW) + verl_ends.TAIL_STEPS[-1])
        assert sum(read) <= bound, os.path.basename(path)
        if len(data) > 256 << 10:
            assert sum(read) < len(data) / 2, os.path.basename(path)
