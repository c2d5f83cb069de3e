"""One event file followed as it grows: what it gave so far, read on from where its whole records
end (tensorboard spec 2.3).

A refresh re-stats the file; unchanged, it reads nothing; grown (`bytetail.only_grew`: same file,
the last bytes read intact), it reads only the appended bytes (plus a last record that was not
whole yet); replaced, truncated or rewritten, it is read again from the start and `generation`
goes up, so whoever merged its rows merges again. Damage (a header failing its checksum) stops
the reading there until the file is replaced: nothing after it can be framed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from rundash_core.io.bytetail import advance_checkpoint, only_grew
from rundash_core.io.files import FileId, describe_unreadable, file_id, read_range
from rundash_core.sources.tensorboard.events import FOOTER, HEADER, INSTALL_HINT, Decoded, decode, frame

WINDOW = 64 << 20  # bytes read per look (a longer record is read whole: its header says how long)
MAX_RECORD = 1 << 30  # a header claiming more is damage, not a record still being written


@dataclass
class Chunk:
    """The scalars of one read: step, wall time, tag code (into the file's `tags`), value."""

    steps: np.ndarray
    times: np.ndarray
    codes: np.ndarray
    values: np.ndarray


class EventFile:
    """What one event file gave so far (its scalars in chunks, one per read that found any)."""

    def __init__(self, path: str):
        self.path = path
        self._reset()

    def _reset(self) -> None:
        self.fid: FileId | None = None
        self.end = 0  # where the whole records read so far end
        self.checkpoint = b""
        self.tags: dict[str, int] = {}
        self.chunks: list[Chunk] = []
        self.texts: list[tuple[str, int, str]] = []
        self.hparams: dict = {}
        self.first_time: float | None = None
        self.last_time: float | None = None
        self.damaged: int | None = None  # offset of a header that fails its checksum
        self.undecodable = 0
        self.first_undecodable: int | None = None
        self.odd_tensors = 0
        self.bad_data = 0  # records whose data fails its checksum (skipped)
        self.first_bad_data: int | None = None
        self.pending = 0  # bytes after `end`: a last record not whole (yet)
        self.error: str | None = None  # the file cannot be read (why)
        self.generation = getattr(self, "generation", -1) + 1
        self.bytes_read = 0  # bytes read from the file since it was first read (or read again whole)

    @property
    def nbytes(self) -> int:
        return sum(c.steps.nbytes * 4 for c in self.chunks) + 64 * len(self.texts)

    def refresh(self) -> bool:
        """Read what was appended since the last look; True when something new was read."""
        fid = file_id(self.path)
        if fid is None:
            changed = self.fid is not None or self.error is None
            self._reset()
            self.error = describe_unreadable(self.path)
            return changed
        if fid == self.fid:
            return False
        if self.fid is not None and not only_grew(self.path, fid, since=self.fid, end=self.end, checkpoint=self.checkpoint):
            self._reset()
        self.fid, self.error = fid, None
        if self.damaged is not None:
            self.pending = fid.size - self.end
            return False
        try:
            self._read_on(fid.size)
        except ImportError:
            self.error = INSTALL_HINT
        except OSError:
            self.error = describe_unreadable(self.path)
        self.pending = fid.size - self.end
        return True

    def _read_on(self, size: int) -> None:
        while self.end < size and self.damaged is None:
            at = self.end
            buf = read_range(self.path, at, min(size, at + WINDOW))
            self.bytes_read += len(buf)
            framing = frame(buf)
            if framing.end == 0 and framing.damaged is None and len(buf) >= HEADER and at + len(buf) < size:
                need = int.from_bytes(buf[:8], "little") + HEADER + FOOTER  # one record longer than the window
                if need > MAX_RECORD:
                    self.damaged = at
                    break
                if at + need > size:
                    break  # not whole yet
                buf = read_range(self.path, at, at + need)
                self.bytes_read += len(buf)
                framing = frame(buf)
            if framing.bad_data:
                self.bad_data += len(framing.bad_data)
                self.first_bad_data = self.first_bad_data if self.first_bad_data is not None else at + framing.bad_data[0]
            if framing.starts:
                self._take(decode(buf, framing, self.tags, base=at))
            if framing.end:
                self.end = at + framing.end
                self.checkpoint = advance_checkpoint(self.checkpoint, buf[:framing.end])
            if framing.damaged is not None:
                self.damaged = at + framing.damaged
            if framing.end == 0 or at + len(buf) >= size:
                break  # (else: the window ended inside a record; read on from its start)

    def _take(self, d: Decoded) -> None:
        if d.steps:
            self.chunks.append(Chunk(np.array(d.steps, dtype=np.int64), np.array(d.times, dtype=np.float64),
                                     np.array(d.codes, dtype=np.int32), np.array(d.values, dtype=np.float64)))
        self.texts += d.texts
        self.hparams.update(d.hparams)
        if d.first_time is not None:
            self.first_time = d.first_time if self.first_time is None else min(self.first_time, d.first_time)
        if d.last_time is not None:
            self.last_time = d.last_time if self.last_time is None else max(self.last_time, d.last_time)
        if d.undecodable:
            self.undecodable += d.undecodable
            self.first_undecodable = self.first_undecodable if self.first_undecodable is not None else d.first_undecodable
        self.odd_tensors += d.odd_tensors

    # What is wrong with it ------------------------------------------------------------------------
    def problems(self, *, live: bool) -> list[tuple[str, int]]:
        """(what, count) for this file; a last record not whole is one only when the run is not live
        (a live writer flushes whole records later: tensorboard spec 2.3)."""
        if self.error:
            return [(self.error, 1)]
        out = []
        if self.damaged is not None:
            out.append((f"record header at byte {self.damaged:,} fails its length checksum: the file is damaged "
                        f"from there ({self.pending:,} bytes not read)", 1))
        elif self.pending and not live:
            out.append((f"last record is cut off ({self.pending:,} bytes after byte {self.end:,}): "
                        "everything before it is read", 1))
        if self.bad_data:
            out.append((f"records whose data fails its checksum (skipped; first at byte {self.first_bad_data:,})",
                        self.bad_data))
        if self.undecodable:
            out.append((f"records that are not TensorBoard events (skipped; first at byte {self.first_undecodable:,})",
                        self.undecodable))
        if self.odd_tensors:
            out.append(("scalar summaries holding more than one number (skipped)", self.odd_tensors))
        return out


def mtime_of(f: EventFile) -> float | None:
    return f.fid.mtime if f.fid is not None else None


def rel_name(root: str, path: str) -> str:
    return os.path.relpath(path, root)
