"""History records → rows of {key: value as logged} (wandb spec 3), many at a time.

Why not `HistoryRecord.FromString` and its items: upb decodes a record in ~2 µs, but every item
read through Python costs ~0.5 µs (33 items: 8× the decode). So the common shape, an item of one
key part with one-byte lengths (`0a L 12 K <key> 82 01 V <value_json>`), is turned into JSON in
place: numpy finds each item's framing bytes, checks that the item lengths add up to the record
(nothing else in a record passes that check), and overwrites the 4 + 3 framing bytes with
`  ,"` and `": `, so one orjson call reads all rows of a batch. A record that does not pass (nested
keys, long values, NaN / Infinity, the HistoryRecord's `step` field) is decoded by upb
(`slow_row`), one record at a time, with the same result.

Keys: a nested dict logged as `{"a": {"b": 1}}` is an item with key parts `a`, `b`; the W&B UI
shows it as `a.b`, so do we (spec 3.2). The parts of a media value (histogram, image: a `_type`
part beside the others) are one value, not numbers: `slow_row` leaves them out.
"""
from __future__ import annotations

import json

import numpy as np
import orjson

SENTINEL = "\x00"  # the first key of every row while parsing: no key passing the fast path holds a NUL
_OPEN = b'{"\\u0000":0'
_SEP = b'},' + _OPEN
_SP, _COMMA, _QUOTE, _COLON = ord(" "), ord(","), ord('"'), ord(":")


def decode_rows(payloads: list, pb) -> list[dict]:
    """One {key: value} dict per HistoryRecord payload (the Record's history field), in order;
    `pb` is wandb's `wandb_internal_pb2` (for the records the fast path does not take)."""
    if not payloads:
        return []
    buf = bytearray(_SEP).join([b"", *payloads, b""])  # one copy: SEP p0 SEP p1 ... SEP
    buf[:2] = b"[ "  # "}," of the first separator: the array opens
    buf[-len(_SEP):] = b"}]" + b" " * (len(_SEP) - 2)  # the last one: the array closes
    lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    starts = len(_SEP) + np.concatenate([[0], np.cumsum(lengths[:-1] + len(_SEP))])
    ok = _transform(buf, starts, lengths)
    slow = np.flatnonzero(~ok).tolist()
    for i in slow:  # blank the records the fast path could not take: an empty row for now
        buf[starts[i]: starts[i] + lengths[i]] = b" " * int(lengths[i])
    try:
        rows = orjson.loads(buf)
    except orjson.JSONDecodeError:  # a value orjson refuses (NaN, a huge int): find its rows
        rows = []
        ends = starts + lengths
        for i in range(len(payloads)):
            try:
                rows.append(orjson.loads(_OPEN + bytes(buf[int(starts[i]): int(ends[i])]) + b"}"))
            except orjson.JSONDecodeError:
                rows.append(None)
                slow.append(i)
    for i in slow:
        rows[i] = slow_row(payloads[i], pb)
    for i, row in enumerate(rows):
        if row is None or type(row) is not dict:
            rows[i] = slow_row(payloads[i], pb)
        else:
            row.pop(SENTINEL, None)
    return rows


def _transform(buf: bytearray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Overwrite the framing of every record whose items all have the common shape; which did."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    n = len(arr)
    h = np.flatnonzero(arr[:-4] == 0x0A)
    h = h[(arr[h + 1] < 0x80) & ((arr[h + 2] == 0x12) | (arr[h + 2] == 0x0A)) & (arr[h + 3] < 0x80)]
    k = arr[h + 3].astype(np.int64)
    t = h + 4 + k
    inside = t + 2 < n
    h, k, t = h[inside], k[inside], t[inside]
    v = arr[t + 2].astype(np.int64)
    good = (arr[t] == 0x82) & (arr[t + 1] == 0x01) & (v < 0x80) & (arr[h + 1].astype(np.int64) == 5 + k + v)
    h, t = h[good], t[good]
    size = arr[h + 1].astype(np.int64) + 2
    row = np.searchsorted(starts, h, side="right") - 1
    inrow = (row >= 0) & (h + size <= starts[np.maximum(row, 0)] + lengths[np.maximum(row, 0)])
    h, t, size, row = h[inrow], t[inrow], size[inrow], row[inrow]
    covered = np.bincount(row, weights=size, minlength=len(starts))
    ok = covered == lengths  # the items tile the record exactly: the shape holds throughout
    take = ok[row]
    h, t = h[take], t[take]
    arr[h] = _SP
    arr[h + 1] = _SP
    arr[h + 2] = _COMMA
    arr[h + 3] = _QUOTE
    arr[t] = _QUOTE
    arr[t + 1] = _COLON
    arr[t + 2] = _SP
    return ok


def slow_row(payload, pb) -> dict:
    """One history record through upb: key parts joined with "." (the UI's name), values parsed
    as logged (Python's json reads NaN and Infinity), media values (parts beside a `_type`) left out."""
    try:
        record = pb.HistoryRecord.FromString(bytes(payload))
    except Exception:  # noqa: BLE001 - a damaged record (DecodeError): no row
        return {}
    items = [(tuple(i.nested_key) or (i.key,), i.value_json) for i in record.item]
    media = {parts[:-1] for parts, _v in items if len(parts) > 1 and parts[-1] == "_type"}
    row = {}
    for parts, text in items:
        if media and any(parts[:j] in media for j in range(1, len(parts))):
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if type(value) is dict and value.get("_type"):
            continue  # a media value logged as one JSON object
        row[".".join(parts)] = value
    if "_step" not in row and record.HasField("step"):
        row["_step"] = record.step.num
    return row
