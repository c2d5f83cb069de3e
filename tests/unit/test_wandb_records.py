"""The two history decoders agree: the in-place JSON fast path (`history.decode_rows`) and upb one
record at a time (`history.slow_row`, plain `HistoryRecord.FromString` + `json.loads`), on records
of every shape a writer makes: keys with quotes, backslashes, non-ASCII and control characters,
`key` instead of `nested_key`, several key parts, long values (two-byte lengths), NaN and
Infinity, strings, lists, bools, null, huge ints, a media value, the `step` field, empty records.
And the framing: records cut across blocks, padding, a corrupt chunk, a header that is not W&B's."""
from __future__ import annotations

import io
import json
import math

import pytest

from rundash_core.sources.wandb import history, records

pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")


def _record(items, *, step: int | None = None) -> bytes:
    h = pb.HistoryRecord()
    for key, value in items:
        item = h.item.add()
        if isinstance(key, tuple):
            item.nested_key.extend(key)
        elif key.startswith("key:"):
            item.key = key[4:]
        else:
            item.nested_key.append(key)
        item.value_json = json.dumps(value)
    if step is not None:
        h.step.num = step
    return h.SerializeToString()


def _raw(items) -> bytes:
    """Items whose value_json is given as text (NaN, Infinity as wandb writes them)."""
    h = pb.HistoryRecord()
    for key, text in items:
        item = h.item.add()
        item.nested_key.append(key)
        item.value_json = text
    return h.SerializeToString()


SHAPES = [
    _record([("_step", 0), ("_timestamp", 1.5e9), ("train/loss", 0.25), ("a/b", 3)]),
    _record([("quote\"key", 1.0), ("plain", 2.0)]),
    _record([("back\\slash", 1.0)]),
    _record([("héllo/₂", 1.0), ("x", -2e-9)]),
    _record([("tab\tkey", 1.0)]),
    _record([("key:old_style", 4.0), ("new_style", 5.0)]),
    _record([(("nested", "y", "z"), 2.0), ("flat", 1.0)]),
    _record([("long" * 40, 1.0), ("v", list(range(200)))]),
    _raw([("nan", "NaN"), ("inf", "Infinity"), ("ninf", "-Infinity"), ("ok", "1.5")]),
    _record([("s", "text"), ("lst", [1, 2]), ("flag", True), ("none", None), ("obj", {"k": 1})]),
    _raw([("huge", "123456789012345678901234567890"), ("ok", "1")]),
    _record([(("h", "_type"), "histogram"), (("h", "bins"), [0, 1]), (("h", "values"), [3]), ("m", 1.0)]),
    _record([("x", 1.0)], step=7),
    _record([]),
    _record([(f"k{i}", i * 0.5) for i in range(300)]),
]


def test_fast_path_equals_upb_on_every_shape():
    fast = history.decode_rows(SHAPES * 3, pb)
    slow = [history.slow_row(p, pb) for p in SHAPES * 3]
    assert len(fast) == len(slow)
    for got, want in zip(fast, slow):
        assert got.keys() == want.keys()
        for k in want:
            a, b = got[k], want[k]
            if {type(a), type(b)} <= {int, float}:  # a huge int is a float to orjson: the same float64
                assert float(a) == float(b) or math.isnan(a) and math.isnan(b), k
            else:
                assert a == b and type(a) is type(b), k
    assert fast[6] == {"nested.y.z": 2.0, "flat": 1.0} and "m" in fast[11] and not any(k.startswith("h") for k in fast[11])
    assert fast[12] == {"x": 1.0, "_step": 7}


def test_framing_across_blocks_padding_and_damage():
    payloads = [bytes([i % 251]) * n for i, n in enumerate([10, 32_740, 5, 70_000, 0, 3, 40_000, 1])]
    out = io.BytesIO()
    writer = records.Writer(out)
    for p in payloads:
        writer.write(p)
    data = out.getvalue()
    framed = records.frame(data, 0)
    assert [p for _o, p in framed.records] == payloads and framed.end == len(data) and not framed.corrupt
    for cut in (3, 7, 100, 32_768, 40_000, len(data) - 1):  # a torn copy: what is complete, and where to go on
        part = records.frame(data[:cut], 0)
        done = [p for _o, p in part.records]
        assert done == payloads[: len(done)] and not part.corrupt
        rest = records.frame(data[part.end:], part.end)  # read on from where it stopped
        assert done + [p for _o, p in rest.records] == payloads
    damaged = bytearray(data)
    damaged[32_768 + 100] ^= 1  # inside the MIDDLE chunk of the 70,000-byte record
    hurt = records.frame(bytes(damaged), 0)
    assert hurt.corrupt and payloads[3] not in [p for _o, p in hurt.records]
    assert [p for _o, p in hurt.records][-1] == payloads[-1]  # the blocks after are read
    assert records.frame(b"PK\x03\x04rest-of-a-zip", 0).not_wandb


def test_record_type_is_read_from_the_tags():
    rec = pb.Record()
    rec.num = 5
    rec.history.item.add().nested_key.append("x")
    number, lo, hi = records.record_field(rec.SerializeToString())
    assert number == records.HISTORY and pb.HistoryRecord.FromString(rec.SerializeToString()[lo:hi]) == rec.history
    rec = pb.Record()
    rec.exit.exit_code = 2
    assert records.record_field(rec.SerializeToString())[0] == records.EXIT
    assert records.record_field(b"\xff\xff\xff") == (0, 0, 0)
