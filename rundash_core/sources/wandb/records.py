"""The framing of a W&B transaction log (`run-<id>.wandb`, wandb spec 2): a LevelDB log of
protobuf `Record`s, read from a byte offset, so a growing file is read by its appended bytes.

Why a reader of our own: wandb 0.31 keeps its reader in the Go core (`wandb-core`), not in Python,
and reading the file must not start that service. The framing is small (spec 2.1): a 7-byte file
header, 32 KiB blocks, each chunk a 7-byte header (CRC-32, length, type) and its bytes; a record
longer than what is left of a block is cut into FIRST / MIDDLE / LAST chunks; fewer than 7 bytes
left at a block's end are zero padding. The CRC is checked (zlib's CRC-32 runs at GB/s: a few
per cent of a load), so a damaged block is named and skipped, never decoded as garbage (spec 2.3).

Nothing here needs the `wandb` package: it frames bytes and peeks at a record's type from its
first protobuf tags (`record_field`), so `summary` / `stats` / `telemetry` records are never
decoded on the way to the history.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from rundash_core.io.files import open_file

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)  # ident, magic, version 0 (wandb spec 2.1)
BLOCK = 32768
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_SEED = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}  # the CRC covers type + data
_CHUNK = struct.Struct("<IHB")

# Record fields (wandb_internal.proto) that are not its `record_type` oneof: num, control, uuid, _info
NOT_TYPE_FIELDS = frozenset({1, 16, 19, 200})
HISTORY, SUMMARY, CONFIG, STATS, METRIC, OUTPUT_RAW, RUN, EXIT = 2, 3, 5, 7, 12, 13, 17, 18  # the oneof's fields


@dataclass
class Framed:
    """What one read of a byte range gave: the complete records, where reading goes on, what was bad."""

    records: list[tuple[int, bytes | memoryview]] = field(default_factory=list)  # (offset of its first chunk, payload)
    end: int = 0  # everything before this offset is decided; the next read starts here
    corrupt: list[tuple[int, str]] = field(default_factory=list)  # (offset, what is wrong), each skipped
    not_wandb: str | None = None  # the file does not start with W&B's header (nothing is read)


def frame(data: bytes | memoryview, start: int) -> Framed:
    """The records of `data`, the file's bytes from offset `start` (0, or an `end` a previous call
    returned). A record still incomplete at the end of `data` is left for the next read (`end`
    stays before it); a chunk with a bad CRC, type or length is named and its block skipped
    (LevelDB's recovery: the next block starts with a chunk), and so are fragments without their
    FIRST chunk. A record in one chunk is a memoryview of `data`, a longer one its joined bytes."""
    out = Framed(end=start)
    view = memoryview(data)
    n, i = len(view), 0
    if start == 0:
        if n < CHUNK_HEADER:
            if bytes(view[:n]) != HEADER[:n]:
                out.not_wandb = f"does not start with W&B's header (:W&B, {HEADER[4:].hex()})"
            return out
        if bytes(view[:CHUNK_HEADER]) != HEADER:
            out.not_wandb = (f"does not start with W&B's header (:W&B, magic {HEADER[4:6].hex()}, version 0): "
                             f"found {bytes(view[:CHUNK_HEADER])!r}")
            return out
        i = CHUNK_HEADER
        out.end = CHUNK_HEADER
    pending: list = []
    pending_at = -1
    unpack, crc32, seed = _CHUNK.unpack_from, zlib.crc32, _SEED
    records, append = out.records, out.records.append
    while True:
        off = start + i
        left = BLOCK - off % BLOCK
        if left < CHUNK_HEADER:  # the block's zero padding
            if i + left > n:
                break
            i += left
            if not pending:
                out.end = start + i
            continue
        if i + CHUNK_HEADER > n:
            break
        crc, length, kind = unpack(view, i)
        bad = None
        if kind not in seed:
            bad = f"chunk of unknown type {kind}"
        elif length + CHUNK_HEADER > left:
            bad = f"chunk of {length:,} bytes overruns its block"
        elif i + CHUNK_HEADER + length > n:
            break  # not all written yet (or cut here)
        else:
            payload = view[i + CHUNK_HEADER: i + CHUNK_HEADER + length]
            if crc32(payload, seed[kind]) != crc:
                bad = "checksum mismatch"
        if bad is not None:
            out.corrupt.append((off, bad + ": the rest of its 32 KiB block skipped"))
            pending = []
            i += left
            out.end = start + i
            continue
        i += CHUNK_HEADER + length
        if kind == FULL:
            if pending:
                out.corrupt.append((pending_at, "record without its LAST chunk (dropped)"))
                pending = []
            append((off, payload))  # a view of `data`: no copy
        elif kind == FIRST:
            if pending:
                out.corrupt.append((pending_at, "record without its LAST chunk (dropped)"))
            pending, pending_at = [payload], off
            continue
        elif not pending:
            out.corrupt.append((off, "record piece without its FIRST chunk (dropped)"))
        elif kind == MIDDLE:
            pending.append(payload)
            continue
        else:
            pending.append(payload)
            append((pending_at, b"".join(pending)))
            pending = []
        out.end = start + i
    del records
    return out


def read_from(path: str, start: int, size: int) -> bytes:
    """The file's bytes [start, size): what a refresh frames (counted by tests through `open_file`)."""
    with open_file(path) as fh:
        fh.seek(start)
        return fh.read(max(0, size - start))


# Peeking at a record's type --------------------------------------------------------------------------
def _varint(buf, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


SUMMARY_TAG = SUMMARY << 3 | 2  # a Record that starts with its summary field (wandb-core writes no `num` first)


def record_field(payload: bytes) -> tuple[int, int, int]:
    """(field number of the record's type, start and end of that field's bytes) from the Record's
    tags, without decoding it: a history record is (2, a, b) with its `HistoryRecord` at
    payload[a:b]. (0, 0, 0) when no type field is there (a damaged record)."""
    i, n = 0, len(payload)
    if n > 2 and payload[0] == 0x12 and payload[1] < 0x80:  # the usual history record: one-byte tag and length
        return HISTORY, 2, 2 + payload[1]
    if n > 3 and payload[0] == 0x12 and payload[2] < 0x80:
        return HISTORY, 3, 3 + (payload[1] & 0x7F | payload[2] << 7)
    try:
        while i < n:
            tag, i = _varint(payload, i)
            number, wire = tag >> 3, tag & 7
            if wire == 2:
                length, i = _varint(payload, i)
                if number not in NOT_TYPE_FIELDS:
                    return number, i, i + length
                i += length
            elif wire == 0:
                _value, i = _varint(payload, i)
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            else:
                return 0, 0, 0
    except IndexError:
        pass
    return 0, 0, 0


# Writing (the demo, the benchmark, tests of torn files) -------------------------------------------
class Writer:
    """W&B's framing, written as wandb's own writer lays it out (spec 2.1): the header, then each
    record as one FULL chunk or FIRST / MIDDLE.. / LAST chunks, zero padding where fewer than 7
    bytes are left of a block. Appends to an open binary file."""

    def __init__(self, fh, *, at: int = 0):
        self.fh, self.index = fh, at
        if at == 0:
            fh.write(HEADER)
            self.index = len(HEADER)

    def _chunk(self, data: bytes, kind: int) -> None:
        self.fh.write(_CHUNK.pack(zlib.crc32(data, _SEED[kind]), len(data), kind))
        self.fh.write(data)
        self.index += CHUNK_HEADER + len(data)

    def write(self, payload: bytes) -> None:
        left = BLOCK - self.index % BLOCK
        if left < CHUNK_HEADER:
            self.fh.write(b"\0" * left)
            self.index += left
            left = BLOCK
        if len(payload) + CHUNK_HEADER <= left:
            self._chunk(payload, FULL)
            return
        room = left - CHUNK_HEADER
        self._chunk(payload[:room], FIRST)
        used = room
        while len(payload) - used > BLOCK - CHUNK_HEADER:
            self._chunk(payload[used: used + BLOCK - CHUNK_HEADER], MIDDLE)
            used += BLOCK - CHUNK_HEADER
        self._chunk(payload[used:], LAST)
