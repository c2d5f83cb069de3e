"""Random access into Zstandard *seekable format* files (facebook/zstd `contrib/seekable_format`,
version 0.1.0): prime-rl's sealed `.jsonl.zst` trace chunks (`docs/formats/prime-rl.md` 5.3).

The seek table (a skippable frame at the end, footer `<IBI` = frames, descriptor, 0x8F92EAB1) gives
each frame's compressed and uncompressed size; `read_line(path, offset)` reads the one JSONL line
that starts at an *uncompressed* offset by decompressing only the frame(s) that hold it (a line can
span frames). Seek tables are cached by the file's identity, decompressed frames in a small LRU.
"""
from __future__ import annotations

import bisect
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass

import zstandard

from rundash_core import cache
from rundash_core.io.files import file_id, open_file

SKIPPABLE_MAGIC = 0x184D2A5E
SEEKABLE_MAGIC = 0x8F92EAB1
FOOTER = 9
MAX_FRAMES = 1 << 20  # frames of one sealed chunk (1M frames of 4 MiB are 4 TB of text)
MAX_FRAME_BYTES = 256 << 20  # one frame, compressed or not: reads stay bounded whatever the table says
FRAME_CACHE = 8  # decompressed frames kept (prime-rl writes frames of 4 MiB of text)
MAX_LINE_FRAMES = 4096  # a line spanning more frames than this is refused (corrupt table)


class SeekableError(ValueError):
    """The file is not a valid seekable zstd file (the message says why)."""


@dataclass(frozen=True)
class SeekTable:
    c_starts: tuple[int, ...]      # compressed offset of each frame
    d_starts: tuple[int, ...]      # uncompressed offset of each frame's first byte
    c_sizes: tuple[int, ...]
    d_sizes: tuple[int, ...]
    checksums: tuple[int, ...] | None

    @property
    def frames(self) -> int:
        return len(self.c_sizes)

    @property
    def size(self) -> int:
        """Total uncompressed size."""
        return self.d_starts[-1] + self.d_sizes[-1] if self.d_sizes else 0

    def frame_of(self, offset: int) -> int | None:
        """The frame holding uncompressed byte `offset` (empty frames skipped), or None."""
        i = bisect.bisect_right(self.d_starts, offset) - 1
        while 0 <= i < self.frames and self.d_sizes[i] == 0:
            i += 1
        if i < 0 or i >= self.frames or not (self.d_starts[i] <= offset < self.d_starts[i] + self.d_sizes[i]):
            return None
        return i


def parse_seek_table(fh, file_size: int) -> SeekTable:
    """The seek table of an open file, checked as spec 5.3 says."""
    if file_size < 17:
        raise SeekableError(f"too short for a seekable zstd file ({file_size} bytes)")
    fh.seek(file_size - FOOTER)
    n, descriptor, magic = struct.unpack("<IBI", fh.read(FOOTER))
    if magic != SEEKABLE_MAGIC:
        raise SeekableError("no seekable-format footer (last 4 bytes are not 0x8F92EAB1)")
    if descriptor & 0x7C:
        raise SeekableError(f"reserved bits set in the seek table descriptor ({descriptor:#04x})")
    entry = 12 if descriptor & 0x80 else 8
    table_size = 17 + n * entry
    if table_size > file_size:
        raise SeekableError(f"seek table of {n} frames is larger than the file")
    if n > MAX_FRAMES:  # (a sparse file can be larger than any real table)
        raise SeekableError(f"seek table of {n:,} frames: more than {MAX_FRAMES:,} (not read)")
    fh.seek(file_size - table_size)
    raw = fh.read(table_size)
    skippable, frame_size = struct.unpack_from("<II", raw, 0)
    if skippable != SKIPPABLE_MAGIC or frame_size != n * entry + 9:
        raise SeekableError("bad seek table frame header")
    fmt = "<III" if entry == 12 else "<II"
    entries = [struct.unpack_from(fmt, raw, 8 + i * entry) for i in range(n)]
    c_sizes = tuple(e[0] for e in entries)
    d_sizes = tuple(e[1] for e in entries)
    if sum(c_sizes) != file_size - table_size:
        raise SeekableError("frame sizes in the seek table do not add up to the file size")
    if any(c == 0 and d != 0 for c, d in zip(c_sizes, d_sizes)):
        raise SeekableError("a frame of compressed size 0 claims content")
    if max(c_sizes + d_sizes, default=0) > MAX_FRAME_BYTES:  # a frame is read and decompressed whole
        raise SeekableError(f"a frame larger than {MAX_FRAME_BYTES >> 20} MB (not read)")
    c_starts, d_starts, c, d = [], [], 0, 0
    for cs, ds in zip(c_sizes, d_sizes):
        c_starts.append(c)
        d_starts.append(d)
        c, d = c + cs, d + ds
    return SeekTable(tuple(c_starts), tuple(d_starts), c_sizes, d_sizes,
                     tuple(e[2] for e in entries) if entry == 12 else None)


def seek_table(path: str) -> SeekTable:
    """The file's seek table, cached by its identity (path, inode, size, mtime)."""
    fid = file_id(path)
    if fid is None:
        raise FileNotFoundError(path)

    def build():
        with open_file(path) as fh:
            return parse_seek_table(fh, fid.size)
    return cache.shared.get_or_create(("zst-seek-table", os.path.realpath(path), fid), build)


def decompress_frame(data: bytes, size: int) -> bytes:
    """One zstd frame (prime-rl's frames carry no content size: `max_output_size` is required)."""
    if size == 0:
        return b""
    return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)


_frames: OrderedDict = OrderedDict()
_frames_lock = threading.Lock()


def read_frame(path: str, table: SeekTable, i: int, fh=None) -> bytes:
    """Frame i's uncompressed bytes (from the small LRU when recently read)."""
    key = (os.path.realpath(path), table, i)
    with _frames_lock:
        if key in _frames:
            _frames.move_to_end(key)
            return _frames[key]
    own = fh is None
    fh = open_file(path) if own else fh
    try:
        fh.seek(table.c_starts[i])
        data = fh.read(table.c_sizes[i])
    finally:
        if own:
            fh.close()
    out = decompress_frame(data, table.d_sizes[i])
    with _frames_lock:
        _frames[key] = out
        while len(_frames) > FRAME_CACHE:
            _frames.popitem(last=False)
    return out


def clear_frame_cache() -> None:
    with _frames_lock:
        _frames.clear()


def read_line(path: str, offset: int) -> bytes:
    """The JSONL line (without its newline) starting at uncompressed `offset` of a seekable file,
    decompressing only the frames it spans. KeyError when the offset is past the content."""
    table = seek_table(path)
    i = table.frame_of(offset)
    if i is None:
        raise KeyError(f"{path}: offset {offset} is outside the {table.size} bytes of content")
    parts = []
    with open_file(path) as fh:
        for j in range(i, min(table.frames, i + MAX_LINE_FRAMES)):
            if table.d_sizes[j] == 0:
                continue
            data = read_frame(path, table, j, fh)
            if j == i:
                data = data[offset - table.d_starts[i]:]
            cut = data.find(b"\n")
            if cut >= 0:
                parts.append(data[:cut])
                return b"".join(parts)
            parts.append(data)
    return b"".join(parts)  # the content ends without a newline: the last line
