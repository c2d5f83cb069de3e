"""JsonlTail: incremental reading by byte offset, held-back partial lines, truncation/replacement."""
from __future__ import annotations

import json
import os

from rundash_core.io.jsonl import JsonlTail, LineProblems, parse_jsonl_bytes

from helpers import parse_row_bytes, write_lines


def rows_of(rows) -> list[dict]:
    """Parsed rows without null values (the reference parse drops them too)."""
    rows = getattr(rows, "rows", rows)
    return [{k: v for k, v in r.items() if v is not None} for r in rows]


def ref_rows(data: bytes) -> list[dict]:
    out = []
    for raw in data[: data.rfind(b"\n") + 1].split(b"\n"):
        row = parse_row_bytes(raw)
        if row is not None:
            out.append({k: v for k, v in row.items() if v is not None})
    return out




def rows(n, start=0):
    return [{"step": i, "time": 1000.0 + i, "loss/mean": i / 7, "producer": "trainer"} for i in range(start, start + n)]


def same_size_rows(n, digit):
    return [{"step": i, "time": 1000.0 + i, "v": digit + 0.25} for i in range(n)]


def test_first_poll_reads_complete_lines(tmp_path, parsed):
    p = tmp_path / "m.jsonl"
    data = write_lines(p, rows(5))
    tail = JsonlTail(p)
    res = tail.poll()
    assert res.reset and res.first_line == 1
    assert rows_of(res.rows) == ref_rows(data)
    assert (tail.offset, tail.lines, tail.pending_bytes) == (len(data), 5, 0)
    assert parsed == [data]
    assert tail.poll() is None  # nothing changed
    assert len(parsed) == 1


def test_only_appended_bytes_are_parsed(tmp_path, parsed):
    p = tmp_path / "m.jsonl"
    first = write_lines(p, rows(50))
    tail = JsonlTail(p)
    tail.poll()
    added = write_lines(p, rows(3, start=50), mode="a")
    res = tail.poll()
    assert not res.reset
    assert res.first_line == 51
    assert parsed[-1] == added  # exactly the appended bytes, nothing before them
    assert rows_of(res.rows) == ref_rows(added)
    assert (tail.offset, tail.lines) == (len(first) + len(added), 53)
    assert sum(len(b) for b in parsed) == len(first) + len(added)


def test_partial_last_line_held_back_until_newline(tmp_path, parsed):
    p = tmp_path / "m.jsonl"
    complete = write_lines(p, rows(2))
    line = json.dumps(rows(1, start=2)[0]).encode() + b"\n"
    with open(p, "ab") as fh:
        fh.write(line[:17])  # the writer is mid-line
    tail = JsonlTail(p)
    res = tail.poll()
    assert rows_of(res.rows) == ref_rows(complete)
    assert tail.pending_bytes == 17 and tail.offset == len(complete)
    assert not tail.problems.counts  # a partial line is not an error
    assert tail.poll() is None  # still mid-line, nothing new
    with open(p, "ab") as fh:
        fh.write(line[17:30])
    res = tail.poll()
    assert res is None or len(res.rows) == 0
    assert tail.pending_bytes == 30
    with open(p, "ab") as fh:
        fh.write(line[30:])
    res = tail.poll()
    assert not res.reset and res.first_line == 3
    assert rows_of(res.rows) == [rows(1, start=2)[0]]
    assert parsed[-1] == line
    assert (tail.offset, tail.pending_bytes, tail.lines) == (len(complete) + len(line), 0, 3)
    assert not tail.problems.counts


def test_file_without_newline_yet(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_bytes(b'{"step": 0, "ti')
    tail = JsonlTail(p)
    res = tail.poll()
    assert res is None or len(res.rows) == 0
    assert tail.offset == 0 and tail.pending_bytes == 15
    assert tail.poll() is None
    with open(p, "ab") as fh:
        fh.write(b'me": 5.0}\n')
    res = tail.poll()
    assert rows_of(res.rows) == [{"step": 0, "time": 5.0}]


def test_truncated_file_is_reread(tmp_path):
    p = tmp_path / "m.jsonl"
    write_lines(p, rows(20))
    tail = JsonlTail(p)
    tail.poll()
    ino = os.stat(p).st_ino
    data = write_lines(p, rows(4, start=100))  # same inode, smaller
    assert os.stat(p).st_ino == ino
    res = tail.poll()
    assert res.reset and res.first_line == 1
    assert rows_of(res.rows) == ref_rows(data)
    assert (tail.offset, tail.lines) == (len(data), 4)


def test_replaced_file_same_size_is_reread(tmp_path):
    p = tmp_path / "m.jsonl"
    old = write_lines(p, same_size_rows(10, 1))
    tail = JsonlTail(p)
    tail.poll()
    new = write_lines(tmp_path / "new.jsonl", same_size_rows(10, 2))
    assert len(new) == len(old)
    os.replace(tmp_path / "new.jsonl", p)  # new inode, same size
    res = tail.poll()
    assert res.reset
    assert rows_of(res.rows) == ref_rows(new)


def tail_after_ten_rows(p) -> JsonlTail:
    """A tail that has read a file of ten rows (the start of the rewrite/truncation cases)."""
    write_lines(p, rows(10))
    tail = JsonlTail(p)
    tail.poll()
    return tail


def test_replaced_file_larger_is_reread_not_appended(tmp_path):
    p = tmp_path / "m.jsonl"
    tail = tail_after_ten_rows(p)
    new = write_lines(tmp_path / "new.jsonl", rows(30, start=1000))
    os.replace(tmp_path / "new.jsonl", p)
    res = tail.poll()
    assert res.reset and rows_of(res.rows) == ref_rows(new)


def test_rewritten_in_place_same_size_is_reread(tmp_path):
    p = tmp_path / "m.jsonl"
    old = write_lines(p, same_size_rows(10, 1))
    tail = JsonlTail(p)
    tail.poll()
    new = write_lines(p, same_size_rows(10, 2))  # same inode, same size, other bytes
    assert len(new) == len(old)
    st = os.stat(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    res = tail.poll()
    assert res.reset and rows_of(res.rows) == ref_rows(new)


def test_truncated_to_empty_then_quiet_then_regrows(tmp_path, parsed):
    p = tmp_path / "m.jsonl"
    tail = tail_after_ten_rows(p)
    p.write_bytes(b"")
    res = tail.poll()
    assert res.reset and len(res.rows) == 0
    n = len(parsed)
    assert tail.poll() is None  # an empty file that stays empty is "nothing new"
    assert tail.poll() is None
    data = write_lines(p, rows(2, start=7), mode="a")
    res = tail.poll()
    assert rows_of(res.rows) == ref_rows(data)
    assert parsed[n:] == [data]
    more = write_lines(p, rows(1, start=9), mode="a")
    res = tail.poll()
    assert not res.reset and parsed[-1] == more


def test_truncated_to_partial_line_then_completed(tmp_path, parsed):
    p = tmp_path / "m.jsonl"
    tail = tail_after_ten_rows(p)
    p.write_bytes(b'{"step": 3, "time')
    res = tail.poll()
    assert res.reset and len(res.rows) == 0
    assert tail.poll() is None
    with open(p, "ab") as fh:
        fh.write(b'": 9.0}\n')
    res = tail.poll()
    assert not res.reset
    assert rows_of(res.rows) == [{"step": 3, "time": 9.0}]
    assert parsed[-1] == b'{"step": 3, "time": 9.0}\n'


def test_missing_file_then_created(tmp_path):
    p = tmp_path / "m.jsonl"
    tail = JsonlTail(p)
    assert tail.poll() is None and tail.error == "missing"
    data = write_lines(p, rows(2))
    res = tail.poll()
    assert tail.error is None and rows_of(res.rows) == ref_rows(data)


def test_directory_instead_of_file(tmp_path):
    p = tmp_path / "m.jsonl"
    p.mkdir()
    tail = JsonlTail(p)
    assert tail.poll() is None
    assert "not a regular file" in tail.error


def test_line_numbers_across_polls(tmp_path):
    p = tmp_path / "m.jsonl"
    write_lines(p, rows(3))
    tail = JsonlTail(p)
    tail.poll()
    write_lines(p, [rows(1, 3)[0], b"{garbage", rows(1, 4)[0], b"[1, 2]"], mode="a")
    res = tail.poll()
    assert res.first_line == 4
    assert [r["step"] for r in rows_of(res.rows)] == [3, 4]
    assert tail.problems.counts == {"truncated JSON line": 1, "not a JSON object": 1}
    assert tail.problems.first_line == {"truncated JSON line": 5, "not a JSON object": 7}


# parse_jsonl_bytes --------------------------------------------------------------------------------
def test_parse_counts_bad_lines_by_kind():
    good = [{"a": i, "b": i * 0.5} for i in range(6)]
    lines = [json.dumps(good[0]), '{"a": 1, "b"', json.dumps(good[1]), "hello", json.dumps(good[2]),
             "[1, 2]", "42", '"text"', json.dumps(good[3]), "null", json.dumps(good[4]), "", json.dumps(good[5])]
    buf = ("\n".join(lines) + "\n").encode()
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs, first_line=10)
    assert rows_of(parsed_) == ref_rows(buf) == good
    assert probs.counts == {"truncated JSON line": 1, "not JSON": 1, "not a JSON object": 4}
    assert probs.first_line == {"truncated JSON line": 11, "not JSON": 13, "not a JSON object": 15}


def test_line_reader_keeps_keys_missing_from_the_first_row():
    """The line-by-line path (taken because of one bad line) must not drop keys."""
    good = [{"step": None, "time": 1.0, "inference/x": 1.0}, {"step": 1, "time": 2.0, "loss/mean": 0.5},
            {"step": 1, "time": 3.0, "optim/lr": 1e-6, "producer": "trainer"}]
    buf = ("\n".join([json.dumps(good[0]), "{bad", json.dumps(good[1]), json.dumps(good[2])]) + "\n").encode()
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs)
    assert set().union(*parsed_.rows) == {"step", "time", "inference/x", "loss/mean", "optim/lr", "producer"}
    assert [parsed_.line_of(i) for i in range(3)] == [1, 3, 4]
    assert rows_of(parsed_) == ref_rows(buf) == [{k: v for k, v in r.items() if v is not None} for r in good]


def test_parse_bare_null_line_is_counted():
    buf = b'{"a": 1}\nnull\n{"a": 2}\n'
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs)
    assert rows_of(parsed_) == [{"a": 1}, {"a": 2}]
    assert probs.counts == {"not a JSON object": 1} and probs.first_line["not a JSON object"] == 2


def test_parse_invalid_utf8_does_not_raise():
    buf = b'{"a": 1, "p": "ok"}\n{"a": 2, "p": "x\xff\xfey"}\n{"a": 3}\n'
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs)
    assert rows_of(parsed_) == ref_rows(buf)
    assert [r["a"] for r in rows_of(parsed_)] == [1, 2, 3]
    assert probs.counts == {"invalid UTF-8 (replaced)": 1} and probs.first_line["invalid UTF-8 (replaced)"] == 2


def test_parse_nul_bytes_removed():
    buf = b'{"a": 1}\n\x00\x00\x00\x00{"a": 2}\n\x00\x00\x00\n{"a": 3}\n'
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs)
    assert rows_of(parsed_) == ref_rows(buf) == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert probs.counts == {"NUL bytes (removed)": 2} and probs.first_line["NUL bytes (removed)"] == 2


def test_parse_non_finite_tokens_counted():
    buf = b'{"a": 1.0}\n{"a": NaN}\n{"a": Infinity}\n{"a": -Infinity}\n'
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs)
    got = [r["a"] for r in parsed_.rows]
    assert got[0] == 1.0 and got[1] != got[1] and got[2:] == [float("inf"), float("-inf")]
    assert sum(probs.counts.values()) == 3 and min(probs.first_line.values()) == 2


def test_bad_lines_keep_good_rows_and_line_numbers():
    lines = [json.dumps({"step": i, "v": i * 1.5}) for i in range(40)]
    lines[13] = '{"step": 13, "v": '
    lines[31] = "\x00garbage"
    buf = ("\n".join(lines) + "\n").encode()
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs, first_line=100)
    assert rows_of(parsed_) == ref_rows(buf)
    assert [r["step"] for r in rows_of(parsed_)] == [i for i in range(40) if i not in (13, 31)]
    assert probs.first_line["truncated JSON line"] == 113
    assert probs.counts["truncated JSON line"] == 1
    assert probs.first_line["NUL bytes (removed)"] == 131
    assert [parsed_.line_of(i) for i in range(len(parsed_.rows))] == [100 + i for i in range(40) if i not in (13, 31)]


def test_parse_a_key_of_different_types():
    """A key that is text in some rows and a number in others, plus a bad line: good rows kept."""
    lines = [json.dumps({"step": i, "k": "text"}) for i in range(6)]
    lines += [json.dumps({"step": i, "k": i * 1.0}) for i in range(6, 12)]
    lines[9] = "{broken"
    buf = ("\n".join(lines) + "\n").encode()
    probs = LineProblems()
    parsed_ = parse_jsonl_bytes(buf, probs)
    assert [r["step"] for r in parsed_.rows] == [i for i in range(12) if i != 9]
    assert probs.counts["truncated JSON line"] == 1


def test_parse_empty_and_blank():
    probs = LineProblems()
    assert parse_jsonl_bytes(b"", probs).rows == []
    assert parse_jsonl_bytes(b"\n \n\n", probs).rows == []
    assert not probs.counts


def test_a_byte_order_mark_does_not_cost_the_first_row():
    """A metrics file begun by a Windows tool starts with a UTF-8 BOM: the first row is still a row,
    and no problem is made of it."""
    problems = LineProblems()
    parsed = parse_jsonl_bytes(b'\xef\xbb\xbf{"step": 1, "a": 1.0}\n{"step": 2, "a": 2.0}\n', problems)
    assert [r["step"] for r in parsed.rows] == [1, 2] and not problems.counts
