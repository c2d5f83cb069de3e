"""TensorBoard event files read from a byte offset: the TFRecord framing (tensorboard spec 2) and
the `Event` records it holds, decoded with tensorboardX's message classes (tensorboard spec 3).

Why this shape: a refresh hands over only the bytes appended since the last read, so framing stops
at the first record that is not whole (a writer mid-flush: read when the rest arrives) and says
where the complete records end. Every record's length checksum is checked (vectorised over the
headers, tensorboard spec 2.2): a header that fails it is damage, and nothing after it can be framed.
The data checksum is checked too for records up to DATA_CRC_MAX bytes (every scalar's: vectorised
per record length, about 15% of a cold load), so stale or flipped bytes behind an intact header
(a crash on a file system that extends files before their data lands) never become a wrong number
on a chart; such a record is skipped and counted, as is one whose bytes do not decode.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

HEADER = 12  # uint64 length + uint32 masked crc32c of the length
FOOTER = 4  # uint32 masked crc32c of the data
DATA_CRC_MAX = 512  # records up to this long get their data checksum checked (scalars are ~40-120 bytes)
INSTALL_HINT = "reading TensorBoard event files needs the tensorboardX package: pip install tensorboardX"
HPARAMS_TAG = "_hparams_/session_start_info"
TEXT_SUFFIX = "/text_summary"  # tensorboardX's add_text appends it to the tag


def is_event_file_name(name: str) -> bool:
    """TensorBoard's own rule (`io_wrapper.IsTensorFlowEventsFile`): the name holds "tfevents"."""
    return "tfevents" in name and not name.startswith(".")


def event_class():
    """tensorboardX's `Event` message class (ImportError when tensorboardX is missing)."""
    from tensorboardX.proto.event_pb2 import Event

    return Event


# crc32c (Castagnoli), masked as TFRecord masks it ---------------------------------------------------
def _table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0x82F63B78), t >> 1).astype(np.uint32)
    return t


CRC_TABLE = _table()
_PY_TABLE = CRC_TABLE.tolist()


def _mask(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The masked crc32c of one byte string (tensorboard spec 2.2)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _PY_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return _mask(crc ^ 0xFFFFFFFF)


def masked_crc32c_rows(rows: np.ndarray) -> np.ndarray:
    """The masked crc32c of each row of a (n, k) uint8 array: k table steps over all rows at once."""
    return masked_crc32c_at(rows.reshape(-1), np.arange(len(rows), dtype=np.int64) * rows.shape[1], rows.shape[1])


def masked_crc32c_at(data: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """The masked crc32c of the `n` bytes at each of `starts` in `data` (uint8): one table step
    per byte position over all of them at once (no (len, n) index array: memory stays O(len))."""
    crc = np.full(len(starts), 0xFFFFFFFF, dtype=np.uint32)
    at = starts.astype(np.int64, copy=True)
    for _ in range(n):
        crc = CRC_TABLE[(crc ^ data[at]) & 0xFF] ^ (crc >> 8)
        at += 1
    crc = (crc ^ np.uint32(0xFFFFFFFF)).astype(np.uint64)
    return ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF).astype(np.uint32)


def _stored_crc(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each offset."""
    b = [data[at + i].astype(np.uint32) for i in range(4)]
    return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)


def frame_record(data: bytes) -> bytes:
    """One TFRecord: what a writer puts around an event's bytes (for writers of test files)."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


# Framing ----------------------------------------------------------------------------------------------
@dataclass
class Framing:
    """Where the whole records of `buf` are: data offsets and lengths, where they end (`end`), and
    why framing stopped before the end of `buf`, if it did: `damaged` (offset of a header that
    fails its checksum) or a last record not whole yet (`end < len(buf)`, `damaged` None)."""

    starts: list[int]
    lengths: list[int]
    end: int
    damaged: int | None = None
    bad_data: list[int] = field(default_factory=list)  # header offsets of records failing their data checksum


_LENGTH = struct.Struct("<Q")


def frame(buf: bytes) -> Framing:
    """Split `buf` (starting at a record boundary) into whole records; stop at the first header
    whose length checksum fails (tensorboard spec 2.2) or at a record not yet whole."""
    unpack, n = _LENGTH.unpack_from, len(buf)
    starts, lengths, pos = [], [], 0
    while pos + HEADER <= n:
        (length,) = unpack(buf, pos)
        end = pos + HEADER + length + FOOTER
        if end > n:
            break
        starts.append(pos + HEADER)
        lengths.append(length)
        pos = end
    out = Framing(starts, lengths, pos)
    if starts:  # every framed header's checksum, at once
        heads = np.frombuffer(buf, dtype=np.uint8)
        at = np.asarray(starts, dtype=np.int64) - HEADER
        bad = np.flatnonzero(masked_crc32c_at(heads, at, 8) != _stored_crc(heads, at + 8))
        if len(bad):
            i = int(bad[0])
            del starts[i:], lengths[i:]
            out.end = out.damaged = int(at[i])
            return out
        _check_data(heads, out)
    if pos + HEADER <= n and struct.unpack_from("<I", buf, pos + 8)[0] != masked_crc32c(buf[pos:pos + 8]):
        out.damaged = pos  # a length past the end that fails its checksum: damage, not a record still coming
    return out


def _check_data(heads: np.ndarray, out: Framing) -> None:
    """Drop (and name in `bad_data`) the records up to DATA_CRC_MAX bytes whose data fails its
    checksum: all records of one length checked at once."""
    starts, lengths = np.asarray(out.starts, dtype=np.int64), np.asarray(out.lengths, dtype=np.int64)
    bad = []
    for n in np.unique(lengths[lengths <= DATA_CRC_MAX]).tolist():
        idx = np.flatnonzero(lengths == n)
        bad += idx[masked_crc32c_at(heads, starts[idx], n) != _stored_crc(heads, starts[idx] + n)].tolist()
    if bad:
        drop = set(bad)
        out.bad_data = sorted(int(starts[i]) - HEADER for i in drop)
        out.starts = [x for i, x in enumerate(out.starts) if i not in drop]
        out.lengths = [x for i, x in enumerate(out.lengths) if i not in drop]


# Decoding ---------------------------------------------------------------------------------------------
@dataclass
class Decoded:
    """What a run of records held: one entry per scalar (step, wall time, tag code into `tags`,
    value: NaN and inf as logged), the text and hparams summaries, and the earliest and latest
    wall times of any record."""

    steps: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    texts: list[tuple[str, int, str]] = field(default_factory=list)  # (tag, step, text)
    hparams: dict = field(default_factory=dict)
    first_time: float | None = None
    last_time: float | None = None
    undecodable: int = 0  # records whose bytes are not an Event
    first_undecodable: int | None = None  # file offset of the first
    odd_tensors: int = 0  # scalars-plugin tensors that are not one number (skipped)


def decode(buf: bytes, framing: Framing, tags: dict[str, int], base: int = 0) -> Decoded:
    """Decode the framed records of `buf` (at file offset `base`); new tags get the next code in
    `tags` (the file's table, shared across reads). Scalars: `simple_value`, or a tensor with the
    scalars plugin (TF2, PyTorch, newer tensorboardX: tensorboard spec 3.2)."""
    from google.protobuf.message import DecodeError

    parse, view = event_class().FromString, memoryview(buf)
    out = Decoded()
    steps, times, codes, values = out.steps, out.times, out.codes, out.values
    add_step, add_time, add_code, add_value = steps.append, times.append, codes.append, values.append
    first = last = None  # over records holding no scalar (the scalars' times are in `times`)
    for start, length in zip(framing.starts, framing.lengths):
        try:
            e = parse(view[start:start + length])
        except DecodeError:
            out.undecodable += 1
            if out.first_undecodable is None:
                out.first_undecodable = base + start - HEADER
            continue
        wall, step, scalar = e.wall_time, e.step, False
        for v in e.summary.value:
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                value = v.simple_value
            elif kind == "tensor" or kind is None:  # (hparams carry only metadata)
                value = _tensor_summary(v, step, out)
                if value is None:
                    continue
            else:
                continue
            tag = v.tag
            code = tags.get(tag)
            if code is None:
                code = tags[tag] = len(tags)
            add_step(step)
            add_time(wall)
            add_code(code)
            add_value(value)
            scalar = True
        if not scalar:
            first = wall if first is None or wall < first else first
            last = wall if last is None or wall > last else last
    if times:
        t = np.asarray(times)
        first = float(t.min()) if first is None else min(first, float(t.min()))
        last = float(t.max()) if last is None else max(last, float(t.max()))
    out.first_time, out.last_time = first, last
    return out


def _tensor_summary(v, step: int, out: Decoded) -> float | None:
    """A scalars-plugin tensor as its number; a text tensor or hparams kept on `out` (None)."""
    plugin = v.metadata.plugin_data.plugin_name
    if plugin == "scalars" and v.HasField("tensor"):
        value = tensor_number(v.tensor)
        if value is None:
            out.odd_tensors += 1
        return value
    if plugin == "text" and v.HasField("tensor"):
        tag = v.tag[: -len(TEXT_SUFFIX)] if v.tag.endswith(TEXT_SUFFIX) else v.tag
        out.texts.append((tag, step, tensor_text(v.tensor)))
    elif plugin == "hparams" and v.tag == HPARAMS_TAG:
        out.hparams.update(hparams_of(v.metadata.plugin_data.content))
    return None


# TensorProto dtypes (tensorflow/core/framework/types.proto) -> the numpy dtype of tensor_content
# and the repeated field holding the values otherwise
_DTYPES = {1: ("<f4", "float_val"), 2: ("<f8", "double_val"), 3: ("<i4", "int_val"), 4: ("u1", "int_val"),
           5: ("<i2", "int_val"), 6: ("i1", "int_val"), 9: ("<i8", "int64_val"), 10: ("?", "bool_val"),
           17: ("<u2", "int_val"), 19: ("<f2", "half_val"), 22: ("<u4", "uint32_val"), 23: ("<u8", "uint64_val"),
           14: ("bfloat16", "half_val")}


def tensor_number(t) -> float | None:
    """The one number a scalar TensorProto holds (packed in `tensor_content` or in its typed
    repeated field; half and bfloat16 as their bits in `half_val`), or None."""
    spec = _DTYPES.get(t.dtype)
    if spec is None:
        return None
    try:
        return _one_number(t, *spec)
    except (ValueError, TypeError, OverflowError):  # content of the wrong size, values out of range
        return None


def _one_number(t, dtype: str, name: str) -> float | None:
    if t.tensor_content:
        if dtype == "bfloat16":
            raw = np.frombuffer(t.tensor_content, dtype="<u2").astype(np.uint32) << 16
            vals = raw.view(np.float32)
        else:
            vals = np.frombuffer(t.tensor_content, dtype=dtype)
    else:
        field_values = list(getattr(t, name))
        if dtype == "<f2":
            vals = np.array(field_values, dtype=np.uint16).view(np.float16)
        elif dtype == "bfloat16":
            vals = (np.array(field_values, dtype=np.uint32) << 16).view(np.float32)
        else:
            vals = field_values
    if len(vals) != 1:
        return None
    return float(vals[0])


def tensor_text(t) -> str:
    """A text-plugin tensor (strings, a scalar or a table) as one text, cells tab-separated."""
    cells = [s.decode("utf-8", errors="replace") for s in t.string_val]
    dims = [d.size for d in t.tensor_shape.dim]
    if len(dims) == 2 and dims[1] > 0 and len(cells) == dims[0] * dims[1]:
        return "\n".join("\t".join(cells[i:i + dims[1]]) for i in range(0, len(cells), dims[1]))
    return "\n".join(cells)


def hparams_of(content: bytes) -> dict:
    """The hyperparameters of an hparams plugin's session start (tensorboard spec 3.4), {} when
    the content is not one."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    try:
        data = HParamsPluginData.FromString(content)
    except DecodeError:
        return {}
    if data.WhichOneof("data") != "session_start_info":
        return {}
    out = {}
    for name, value in data.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        if kind == "number_value":
            out[name] = value.number_value
        elif kind == "string_value":
            out[name] = value.string_value
        elif kind == "bool_value":
            out[name] = value.bool_value
        elif kind == "null_value" or kind is None:
            out[name] = None
        else:
            out[name] = MessageToDict(value)
    return out
