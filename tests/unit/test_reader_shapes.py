"""The incremental readers against every shape a writer can leave a file in.

Each test drives `ByteTail` (and `JsonlTail`, `MetricStore` on top of it; `VerlLogTail` and the
located-line reader: `test_reader_shapes_verl.py`) through appends, settles, truncations and
replacements, and compares what a consumer built from the reads with a plain reading of the final
file (`data.split(b"\\n")`): no line lost, none duplicated, none cut,
resets reported, no exception; and every byte read once per version of the file (only the
checkpoint, at most CHECKPOINT_BYTES, is read again to check the file was not rewritten).
"""
from __future__ import annotations

import json
import os
import random

import pytest

from rundash_core.io import bytetail
from rundash_core.io.bytetail import CHECKPOINT_BYTES, ByteTail
from rundash_core.io.jsonl import JsonlTail
from rundash_core.metrics.store import MetricStore

from helpers.shapes import ALWAYS, NEVER, Reads, append, append_in_pieces


class Follower:
    """What a consumer builds from a ByteTail: its lines, rebuilt on reset, a redone line replaced."""

    def __init__(self, tail: ByteTail, max_bytes: int | None = None):
        self.tail, self.max_bytes = tail, max_bytes
        self.lines: list[bytes] = []
        self.resets = 0
        self.handed = 0  # bytes handed out (a line handed out again counts again)

    def poll(self) -> None:
        while (new := self.tail.read_lines(self.max_bytes)) is not None:
            if new.reset:
                self.lines.clear()
                self.resets += 1
            if new.redo:
                self.lines.pop()
            chunk = new.lines
            self.handed += len(chunk)
            parts = chunk.split(b"\n")
            if not chunk or chunk.endswith(b"\n"):
                parts.pop()
            self.lines += parts
            if not new.cut:
                break
        if self.tail.error is None:  # None means "read to the end", never "more later"
            assert self.tail.offset + self.tail.pending_bytes == os.stat(self.tail.path).st_size


def expected(data: bytes, *, settled: bool) -> list[bytes]:
    """The lines of a file: complete ones, plus a last one without newline once the file is still."""
    parts = data.split(b"\n")
    last = parts.pop()
    return parts + [last] if settled and last.strip() else parts


FRAGMENTS = [b"plain ascii ", "héllo wörld ✓ 🚀 ".encode(), b"\x00nul\x00 ", b"bad \xff\xfe utf8 ",
             b'{"json": [1, 2]} ', b"x" * 150]


def random_lines(rng: random.Random, n: int) -> bytes:
    out = []
    for _ in range(n):
        line = b"".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 6)))
        out.append(line + rng.choice([b"\n", b"\n", b"\r\n", b" \n"]))
    return b"".join(out)


@pytest.mark.parametrize("settle", [NEVER, ALWAYS])
@pytest.mark.parametrize("max_bytes", [None, 256])
def test_random_appends_give_every_line_once(tmp_path, monkeypatch, settle, max_bytes):
    """Appends that split lines, UTF-8 characters and CR-LF pairs; with ALWAYS every partial last
    line is handed out at once and then goes on (handed out again whole, flagged `redo`)."""
    monkeypatch.setattr(bytetail, "SETTLE_S", settle)
    rng = random.Random(1234 + (max_bytes or 0) + int(settle))
    path = tmp_path / "f.log"
    path.write_bytes(b"")
    reads = Reads(monkeypatch)
    follow = Follower(ByteTail(path), max_bytes)
    data = random_lines(rng, 300)

    def check():
        follow.poll()
        assert follow.lines == expected(path.read_bytes(), settled=settle == ALWAYS)

    splits = append_in_pieces(rng, path, data, check)
    assert min(splits.values()) > 0, splits  # the shapes this test is about did occur
    assert follow.resets == 1 and follow.tail.error is None
    assert reads.total <= len(data) + CHECKPOINT_BYTES * 2 * len(follow.lines)


def test_a_long_line_written_in_pieces_is_read_once(tmp_path, monkeypatch):
    """A 3 MB line (longer than any block) written a piece at a time, polled in between: its bytes
    are read once, not again at every poll."""
    path = tmp_path / "f.log"
    path.write_bytes(b"first\n")
    reads = Reads(monkeypatch)
    follow = Follower(ByteTail(path), 64 << 10)
    follow.poll()
    long = b"y" * (3 << 20)
    polls = 0
    for at in range(0, len(long), 100 << 10):
        append(path, long[at: at + (100 << 10)])
        follow.poll()
        polls += 1
        assert follow.lines == [b"first"] and follow.tail.pending_bytes == min(at + (100 << 10), len(long))
    append(path, b"\nlast\n")
    follow.poll()
    assert follow.lines == [b"first", long, b"last"]
    assert reads.total <= path.stat().st_size + CHECKPOINT_BYTES * (polls + 2)


@pytest.mark.parametrize("settle", [NEVER, ALWAYS])
def test_a_partial_line_too_long_to_keep_is_read_again_once(tmp_path, monkeypatch, settle):
    """A partial line longer than KEEP_BYTES is not kept in memory between looks: it is read again
    once, whole, when its newline comes, or when it goes on after being handed out (so a byte is
    read again only as part of a line handed out)."""
    monkeypatch.setattr(bytetail, "SETTLE_S", settle)
    monkeypatch.setattr(bytetail, "KEEP_BYTES", 1000)
    rng = random.Random(11)
    data = b"".join(random_lines(rng, 20) + b"L" * rng.randint(1001, 9000) + b"\n" for _ in range(10))
    path = tmp_path / "f.log"
    path.write_bytes(b"")
    follow = Follower(ByteTail(path), 512)

    def check():
        follow.poll()
        assert follow.lines == expected(path.read_bytes(), settled=settle == ALWAYS)
        rest = path.read_bytes().rpartition(b"\n")[2]  # the partial last line
        assert follow.tail.pending_bytes == (0 if settle == ALWAYS and rest.strip() else len(rest))

    append_in_pieces(rng, path, data, check)
    assert len(data) < follow.tail.reads <= len(data) + follow.handed
    if settle == NEVER:
        assert follow.handed == len(data) and follow.tail.reads <= 2 * len(data)


@pytest.mark.parametrize("max_bytes", [4096, 1 << 20])
def test_lines_longer_than_a_block_in_a_whole_file(tmp_path, monkeypatch, max_bytes):
    """Several-MB lines among short ones, read block by block: the tail of a block is not read twice."""
    rng = random.Random(7)
    lines = [b"z" * rng.choice([10, 3000, 5000, (2 << 20) + 17]) for _ in range(12)] + [b"w" * (5 << 20)]
    rng.shuffle(lines)
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "f.log"
    path.write_bytes(data)
    reads = Reads(monkeypatch)
    follow = Follower(ByteTail(path), max_bytes)
    follow.poll()
    assert follow.lines == lines
    assert reads.total - reads.again == len(data) and reads.again <= CHECKPOINT_BYTES * (len(lines) + 2)
    assert follow.tail.reads == len(data)  # the tail's own count


def test_a_settled_last_line_then_its_newline_then_more(tmp_path, monkeypatch):
    """A finished file's last line (no newline) is read once still; a late newline adds no empty
    line; a line that goes on is handed out again whole, flagged `redo`."""
    path = tmp_path / "f.log"
    path.write_bytes(b"a\nb")
    tail = ByteTail(path)
    follow = Follower(tail)
    monkeypatch.setattr(bytetail, "SETTLE_S", NEVER)
    follow.poll()
    assert follow.lines == [b"a"] and tail.pending_bytes == 1
    monkeypatch.setattr(bytetail, "SETTLE_S", ALWAYS)
    follow.poll()
    assert follow.lines == [b"a", b"b"] and tail.pending_bytes == 0
    append(path, b"\nc\n")
    follow.poll()
    assert follow.lines == [b"a", b"b", b"c"]
    append(path, b"d")
    follow.poll()
    append(path, b"e\nf")
    new = tail.read_lines()
    assert new.redo and new.held and new.lines == b"de\nf"
    assert tail.read_lines() is None


def test_jsonl_line_numbers_and_problems_survive_settles(tmp_path, monkeypatch):
    """JsonlTail with every partial line handed out at once (ALWAYS): line numbers stay
    those of the file, and a cut line's "truncated JSON" problem goes when the line is whole."""
    monkeypatch.setattr(bytetail, "SETTLE_S", ALWAYS)
    rng = random.Random(99)
    rows = [{"step": i, "v": i / 3, "s": "é✓" * rng.randint(0, 40)} for i in range(200)]
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows)
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"")
    tail = JsonlTail(path)
    got: dict[int, dict] = {}

    def poll():
        res = tail.poll()
        if res is not None:
            if res.reset:
                got.clear()
            for i, row in enumerate(res.rows):
                got[res.parsed.line_of(i)] = row

    append_in_pieces(rng, path, data, poll)
    assert got == {i + 1: r for i, r in enumerate(rows)}
    assert tail.lines == len(rows) and tail.problems.counts == {}


@pytest.mark.parametrize("settle", [NEVER, ALWAYS])
def test_metric_store_follows_a_writer_in_pieces(tmp_path, monkeypatch, settle):
    """MetricStore over JsonlTail, refreshed after every piece: the same merged table and no
    problems, as one read of the final file."""
    monkeypatch.setattr(bytetail, "SETTLE_S", settle)
    rng = random.Random(3)
    rows = [{"step": i // 2, "time": 1000.0 + i, f"loss/{'ab'[i % 2]}": rng.random()} for i in range(300)]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"")
    store = MetricStore(str(path))
    append_in_pieces(rng, path, data, store.refresh)
    whole = MetricStore(str(path))
    whole.refresh()
    assert store.wide("trainer").equals(whole.wide("trainer")) and len(whole.wide("trainer")) == 150
    assert list(store.tail.problems.items()) == [] and store.tail.lines == 300


@pytest.mark.parametrize("settle", [NEVER, ALWAYS])
def test_truncated_to_zero_then_regrows(tmp_path, monkeypatch, settle):
    """Truncation (same inode) is a reset, also after a last line read without its newline."""
    monkeypatch.setattr(bytetail, "SETTLE_S", settle)
    path = tmp_path / "f.log"
    path.write_bytes(b"one\ntwo\nthree")
    reads = Reads(monkeypatch)
    follow = Follower(ByteTail(path))
    follow.poll()
    assert follow.lines == expected(path.read_bytes(), settled=settle == ALWAYS)
    path.write_bytes(b"")
    reads.new_version()
    follow.poll()
    assert follow.lines == [] and follow.resets == 2
    follow.poll()
    assert follow.resets == 2  # an empty file that stays empty is no news
    append(path, b"alpha-longer-line\n")
    follow.poll()
    append(path, b"beta\ngam")
    follow.poll()
    append(path, b"ma\n")
    follow.poll()
    assert follow.lines == [b"alpha-longer-line", b"beta", b"gamma"] and follow.resets == 2


@pytest.mark.parametrize("larger", [False, True])
def test_replaced_by_another_file(tmp_path, monkeypatch, larger):
    """os.replace by a file of the same size, or a larger one: a reset, and only the new lines."""
    path, other = tmp_path / "f.log", tmp_path / "new.log"
    path.write_bytes(b"11\n22\n33\n4")
    reads = Reads(monkeypatch)
    follow = Follower(ByteTail(path))
    follow.poll()
    other.write_bytes(b"aa\nbb\ncc\nd" + (b"\neeeeee\n" if larger else b""))
    os.replace(other, path)
    reads.new_version()
    follow.poll()
    assert follow.resets == 2
    assert follow.lines == expected(path.read_bytes(), settled=False)


@pytest.mark.parametrize("settle", [NEVER, ALWAYS])
@pytest.mark.parametrize("where", [1, 5, 20])
def test_last_bytes_rewritten_in_place(tmp_path, monkeypatch, settle, where):
    """The last bytes rewritten in place (same inode, same size, later mtime): a reset, and the
    lines are the new ones, in the complete part or in a partial last line."""
    monkeypatch.setattr(bytetail, "SETTLE_S", settle)
    path = tmp_path / "f.log"
    data = b"line one\nline two\nline three\npartial"
    path.write_bytes(data)
    reads = Reads(monkeypatch)
    follow = Follower(ByteTail(path))
    follow.poll()
    new = data[:-where] + b"#" * where
    with open(path, "r+b") as fh:
        fh.write(new)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    reads.new_version()
    follow.poll()
    assert follow.lines == expected(new, settled=settle == ALWAYS)
    if settle == ALWAYS or where > len(b"partial"):  # bytes handed out changed: the caller must know
        assert follow.resets == 2


def test_nul_bytes_and_bad_utf8(tmp_path, monkeypatch):
    """Lines with NUL bytes and bad UTF-8 come through as bytes; JsonlTail counts them as problems."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a":\x00 2}\n{"b": "\xff\xfe"}\n\x00\x00\x00\n{"a": 3}\n')
    follow = Follower(ByteTail(path), 4)
    follow.poll()
    assert follow.lines == expected(path.read_bytes(), settled=False)
    tail = JsonlTail(path)
    res = tail.poll()
    assert [r for r in res.rows] == [{"a": 1}, {"a": 2}, {"b": "\ufffd\ufffd"}, {"a": 3}]
    assert tail.problems.counts == {"NUL bytes (removed)": 2, "invalid UTF-8 (replaced)": 1}
    assert tail.problems.first_line == {"NUL bytes (removed)": 2, "invalid UTF-8 (replaced)": 3}


def test_an_empty_file(tmp_path):
    path = tmp_path / "f.log"
    path.write_bytes(b"")
    tail = ByteTail(path)
    new = tail.read_lines()
    assert new.reset and new.lines == b"" and tail.read_lines() is None and tail.error is None
    jt = JsonlTail(path)
    assert jt.poll().rows == [] and jt.poll() is None


def test_a_file_that_vanishes_and_comes_back(tmp_path, monkeypatch):
    path = tmp_path / "f.log"
    path.write_bytes(b"a\nb\n")
    reads = Reads(monkeypatch)
    follow = Follower(ByteTail(path))
    follow.poll()
    path.unlink()
    follow.poll()
    assert follow.tail.error == "missing" and follow.lines == [b"a", b"b"]  # kept until it is back
    path.write_bytes(b"c\nd\n")
    reads.new_version()
    follow.poll()
    assert follow.tail.error is None and follow.resets == 2 and follow.lines == [b"c", b"d"]


def test_a_broken_symlink(tmp_path):
    target, link = tmp_path / "target.log", tmp_path / "f.log"
    link.symlink_to(target)
    follow = Follower(ByteTail(link))
    follow.poll()
    assert follow.tail.error == "broken symlink" and follow.lines == []
    target.write_bytes(b"x\ny\n")
    follow.poll()
    assert follow.tail.error is None and follow.lines == [b"x", b"y"]
