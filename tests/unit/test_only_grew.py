"""One check says whether a followed file only grew since it was last read (`bytetail.only_grew`):
`ByteTail` (JSONL, verl logs) and the prime-rl JSON-lines cache both use it, so a file replaced,
truncated or rewritten in its last bytes is read again whole by either, and an append is not."""
from __future__ import annotations

import json
import os

from rundash_core.io.bytetail import CHECKPOINT_BYTES, ByteTail, advance_checkpoint, only_grew
from rundash_core.io.files import file_id
from rundash_core.sources.prime_rl import lines as prime_rl_lines


def _state(path):
    """What a reader keeps after reading the whole file: its id, where it ended, its last bytes."""
    data = path.read_bytes()
    return file_id(path), len(data), advance_checkpoint(b"", data)


def test_only_an_append_to_the_same_intact_file_counts_as_grown(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(b'{"i": %d}\n' % i for i in range(50)))
    fid, end, checkpoint = _state(path)
    assert len(checkpoint) == CHECKPOINT_BYTES and path.read_bytes().endswith(checkpoint)

    def grew():
        return only_grew(str(path), file_id(path), since=fid, end=end, checkpoint=checkpoint)

    assert grew()  # unchanged
    with open(path, "ab") as fh:
        fh.write(b'{"i": 50}\n')
    assert grew()  # appended
    assert not only_grew(str(path), file_id(path), since=None, end=end, checkpoint=checkpoint)  # never read
    assert only_grew(str(path), file_id(path), since=fid, end=0, checkpoint=b"")  # read nothing yet
    with open(path, "r+b") as fh:  # the last bytes read rewritten in place (same size, same inode)
        fh.seek(end - 3)
        fh.write(b"8}\n")  # was 9}
    assert not grew()
    with open(path, "r+b") as fh:
        fh.seek(end - 3)
        fh.write(checkpoint[-3:])
    assert grew()
    os.truncate(path, end - 10)  # truncated
    assert not grew()
    other = tmp_path / "b.jsonl"
    other.write_bytes(path.read_bytes()[: end - 10] + checkpoint[-10:] + b"more\n")
    os.replace(other, path)  # another file at the path, the same bytes where they were read
    assert not grew()
    fid_now = file_id(path)
    os.remove(path)  # gone between the stat and the read: not grown, no traceback
    assert not only_grew(str(path), fid_now, since=fid_now, end=end, checkpoint=checkpoint)


def test_both_readers_read_a_truncated_file_again_whole(tmp_path):
    path = tmp_path / "stream.index.jsonl"
    rows = [json.dumps({"i": i}).encode() + b"\n" for i in range(20)]
    path.write_bytes(b"".join(rows))
    seen = []

    def objects():
        return prime_rl_lines.objects(str(path), "test-only-grew", lambda off, n, row: seen.append(off) or row["i"])

    tail = ByteTail(path)
    assert objects() == list(range(20)) and tail.read_lines().lines == b"".join(rows)
    with open(path, "ab") as fh:
        fh.write(rows[0])
    seen.clear()
    new = tail.read_lines()
    assert objects() == [*range(20), 0] and len(seen) == 1  # an append: only the new line parsed
    assert not new.reset and new.lines == rows[0]
    os.truncate(path, sum(map(len, rows[:5])))  # cut back to its first 5 lines
    with open(path, "ab") as fh:  # and grown again past where it was read, with other lines
        fh.write(b"".join(rows[10:]) * 2)
    seen.clear()
    new = tail.read_lines()
    assert objects() == [*range(5), *range(10, 20), *range(10, 20)] and len(seen) == 25  # parsed again whole
    assert new.reset and new.start == 0 and new.lines == path.read_bytes()
