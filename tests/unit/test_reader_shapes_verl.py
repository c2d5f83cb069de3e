"""The format readers over ByteTail (`VerlLogTail`, the located-line reader) against the shapes a
writer leaves a file in; the shapes and the read spy are in `helpers/shapes.py`."""
from __future__ import annotations

import random

import pytest

import rundash_core as rd
from rundash_core.frames import line_locator
from rundash_core.io import bytetail
from rundash_core.io.jsonl import read_located_object
from rundash_core.sources.verl.metric_log import CUT_MORE, CUT_NAMED, VerlLogTail

from helpers import listed_step, write_file
from helpers.shapes import ALWAYS, NEVER, Reads, append, append_in_pieces


# VerlLogTail ------------------------------------------------------------------------------------
def verl_log(rng: random.Random, steps: int) -> bytes:
    out = [b"(TaskRunner pid=1) start \xe2\x9c\x93\n", b"noise " * (300 << 10) + b"\n"]  # a 1.8 MB line
    for s in range(1, steps + 1):
        out.append(f"(TaskRunner pid=1) step:{s} - actor/loss:{rng.random():.6f} - ré/wörd:{s * 0.5}"
                   f" - timing_s/step:{rng.randint(1, 99)}\n".encode())
        if s % 40 == 0:
            out.append(b"x\x00y bad \xff byte " * rng.randint(1, 300) + b"\r\n")
    return b"".join(out)


def merged(rows) -> dict:
    return {(r["step"], k): v for r in rows for k, v in r.items() if k != "step"}


@pytest.mark.parametrize("settle", [NEVER, ALWAYS])
def test_verl_log_appended_in_pieces_matches_one_read(tmp_path, monkeypatch, settle):
    """A console log written in random pieces, read in small blocks: the same rows (and counts) as
    one read of the whole file."""
    monkeypatch.setattr(bytetail, "SETTLE_S", settle)
    rng = random.Random(5)
    data = verl_log(rng, 300)
    path = tmp_path / "run.log"
    path.write_bytes(b"")
    reads = Reads(monkeypatch)
    tail = VerlLogTail(path, block_bytes=4096)
    rows: list[dict] = []

    def poll():
        res = tail.poll()
        if res is not None:
            rows.extend(res.rows)

    append_in_pieces(rng, path, data, poll)
    reads.new_version()
    whole = VerlLogTail(path, block_bytes=1 << 30)
    ref = whole.poll().rows
    if settle == NEVER:
        assert rows == ref
    assert merged(rows) == merged(ref) and len(ref) == 300
    assert (tail.metric_lines, tail.last_step, tail.first_step) == (whole.metric_lines, 300, 1)
    assert tail.problems.counts == whole.problems.counts


def test_verl_log_whose_last_line_is_a_validation_print_without_newline(tmp_path, monkeypatch):
    """A log that ends in a `Final validation metrics: {…}` print without its newline: read once
    still, no metric line read twice; the print read again whole when the file goes on."""
    monkeypatch.setattr(bytetail, "SETTLE_S", ALWAYS)
    path = tmp_path / "run.log"
    path.write_bytes(b"step:1 - a:1.0\nstep:2 - a:2.0\n(main_task pid=1) \"Final validation metrics: "
                     b"{'test_score/x': 0.5}\"")
    tail = VerlLogTail(path)
    rows = tail.poll().rows
    assert rows == [{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0}, {"step": 2, "val/test_score/x": 0.5}]
    assert tail.final_validation and tail.metric_lines == 2
    append(path, b"\nstep:3 - a:3.0\n")
    assert tail.poll().rows == [{"step": 3, "a": 3.0}] and tail.metric_lines == 3


def test_verl_held_metric_line_that_goes_on_is_counted_once(tmp_path, monkeypatch):
    """A block-buffered log cut mid-line and still: the partial line is read; when the rest comes,
    the line is read again whole and counted once."""
    monkeypatch.setattr(bytetail, "SETTLE_S", ALWAYS)
    path = tmp_path / "run.log"
    path.write_bytes(b"step:1 - a:1.0\nstep:2 - a:2.0 - b:0.")
    tail = VerlLogTail(path)
    assert merged(tail.poll().rows) == {(1, "a"): 1.0, (2, "a"): 2.0, (2, "b"): 0.0}
    append(path, b"25\nstep:3 - a:3.0\n")
    res = tail.poll()
    assert res.rows == [{"step": 2, "a": 2.0, "b": 0.25}, {"step": 3, "a": 3.0}] and not res.reset
    assert tail.metric_lines == 3 and tail.last_step == 3


def test_verl_held_first_metric_line_gives_the_first_keys_of_the_whole_line(tmp_path, monkeypatch):
    monkeypatch.setattr(bytetail, "SETTLE_S", ALWAYS)
    path = tmp_path / "run.log"
    path.write_bytes(b"noise\nstep:1 - a:1.0 - b:2")
    tail = VerlLogTail(path)
    tail.poll()
    assert (tail.first_step, tail.first_keys, tail.metric_lines) == (1, ("a", "b"), 1)
    append(path, b".5 - c:3.0\n")
    tail.poll()
    assert (tail.first_step, tail.first_keys, tail.metric_lines) == (1, ("a", "b", "c"), 1)


@pytest.mark.parametrize("block_bytes", [64, 1 << 20])
def test_verl_config_print_offsets_in_a_block_with_nul_bytes(tmp_path, block_bytes):
    """A config print after NUL bytes (a crashed writer's zero-filled gap): its offset is where its
    line starts in the file, not in the block that lost its NUL bytes."""
    config = b"(TaskRunner pid=1) {'actor_rollout_ref': {'model': {'path': 'org/m'}}, 'trainer': {}}\n"
    data = b"start\n" + b"\x00" * 5000 + b"\nnoise\x00\x00 line\n" + config + b"step:1 - a:1.0\n" + config
    path = tmp_path / "run.log"
    path.write_bytes(data)
    tail = VerlLogTail(path, block_bytes=block_bytes)
    assert tail.poll().rows == [{"step": 1, "a": 1.0}]
    first = data.index(config)
    assert tail.config_offsets == [first, data.index(config, first + 1)]
    assert tail.problems.counts == {"NUL bytes (removed)": 2}


# A metric line cut by another writer ------------------------------------------------------------
CUT_LOG = b"".join([
    b"step:1 - a/x:1.0 - b/y:2.5 - c/z:3.0\n",
    b"(TaskRunner pid=1) step:2 - a/x:1.5 - b/y:2.(WorkerDict pid=9) INFO 12-01 10:00:00 llm_engine.py:123"
    b" - Avg throughput: 5.0 tokens/s\n",
    b"53 - c/z:3.5\n",  # the rest of the cut line: no metric line
    b"step:3 - a/x:2.0 - b/y:2.\rTraining Progress:  10%|#  | 3/30 [00:10<01:30, 3.0s/it]\n",  # `2.`: a number
    b"step:4 - a/x:2.5 - b/y:1.0 - c/z:4.0\n",
    b"step:5 - b/y:7.\n",
    b"(TaskRunner pid=1) [response] I'll check it. step:6 - not a metric line\n",  # no value first: no problem
])


@pytest.mark.parametrize("block_bytes", [64, 1 << 20])
def test_a_cut_metric_line_is_not_read_and_is_a_problem(tmp_path, block_bytes):
    """Spec 4.8: a line with text left over is not a metric line (none of its values is read);
    one that began as a metric line is named, with its step and line."""
    tail = VerlLogTail(write_file(tmp_path / "cut.log", CUT_LOG), block_bytes=block_bytes)
    rows = tail.poll().rows
    assert rows == [{"step": 1, "a/x": 1.0, "b/y": 2.5, "c/z": 3.0}, {"step": 3, "a/x": 2.0, "b/y": 2.0},
                    {"step": 4, "a/x": 2.5, "b/y": 1.0, "c/z": 4.0}, {"step": 5, "b/y": 7.0}]
    got = [(what, n, line) for what, n, line in tail.problems.items()]
    assert [(w.split(" cut")[0], n, line) for w, n, line in got] == [("metric line of step 2", 1, 2)]
    assert "not read" in got[0][0]


def test_the_run_names_the_cut_lines_file_line_and_step(tmp_path):
    log = write_file(tmp_path / "cut.log", CUT_LOG)
    run = rd.open_run(log)
    tidy = run.metrics()
    assert not (tidy["step"] == 2).any() and ((tidy["step"] == 3) & (tidy["metric"].astype(str) == "b/y")).any()
    cut = [p for p in run.problems() if "cut by other output" in p.what]
    assert [(p.path, p.line, "step 2" in p.what) for p in cut] == [(str(log), 2, True)]
    assert str(log) in str(cut[0]) and "line 2" in str(cut[0])
    assert (run.overview().step, listed_step(tmp_path, "cut")) == (5, 5)


def test_many_cut_lines_are_named_then_counted(tmp_path):
    lines = [f"step:{s} - a:1.0 - b:2.other writer's text\n" for s in range(1, CUT_NAMED + 5)]
    tail = VerlLogTail(write_file(tmp_path / "many.log", "".join(lines)))
    assert tail.poll().rows == []
    counts = tail.problems.counts
    assert len(counts) == CUT_NAMED + 1 and counts[CUT_MORE] == 4
    assert tail.problems.first_line[CUT_MORE] == CUT_NAMED + 1


def test_a_held_last_line_cut_so_far_is_a_problem_until_it_goes_on(tmp_path, monkeypatch):
    """A last line still being written (`b:` so far) reads as cut while held; whole, it counts
    once and the problem is withdrawn."""
    monkeypatch.setattr(bytetail, "SETTLE_S", ALWAYS)
    path = write_file(tmp_path / "held.log", b"step:1 - a:1.0\nstep:2 - a:2.0 - b:")
    tail = VerlLogTail(path)
    assert tail.poll().rows == [{"step": 1, "a": 1.0}]
    assert [line for what, _n, line in tail.problems.items() if "step 2 cut" in what] == [2]
    append(path, b"0.25\n")
    assert tail.poll().rows == [{"step": 2, "a": 2.0, "b": 0.25}] and not tail.problems.counts


# The located-line reader ------------------------------------------------------------------------
def test_located_lines_read_like_the_tail(tmp_path):
    """A line found by its locator reads as JsonlTail reads it: NaN, NUL bytes, bad UTF-8 and a
    CR-LF end are read leniently; a range that holds no object is a KeyError naming the sample."""
    lines = [b'{"a": 1, "t": "\xc3\xa9"}', b'{"a": NaN, "b": 2}', b'{"a": 3,\x00 "b": 4}\r',
             b'{"s": "\xff"}', b"[1, 2]", b'{"cut": ']
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    located, at = [], 0
    for line in lines:
        located.append(line_locator(str(path), at, len(line)))
        at += len(line) + 1
    got = [read_located_object(loc, sample="s") for loc in located[:4]]
    assert got[0] == {"a": 1, "t": "é"} and got[1]["b"] == 2 and got[1]["a"] != got[1]["a"]
    assert got[2] == {"a": 3, "b": 4} and got[3] == {"s": "\ufffd"}
    for loc in located[4:]:
        with pytest.raises(KeyError, match="s"):
            read_located_object(loc, sample="s")
