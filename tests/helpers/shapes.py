"""How a writer grows a file, for the incremental readers' tests (`test_reader_shapes*.py`): the
settle times that take a partial last line as never or at once finished, appends in random pieces
that split characters, CR-LF pairs and lines, and a spy on every byte range `ByteTail` reads."""
from __future__ import annotations

import random

from rundash_core.io import bytetail
from rundash_core.io.bytetail import CHECKPOINT_BYTES

NEVER, ALWAYS = 1e9, -1e9  # SETTLE_S values: a partial last line is never / at once taken as finished
# (ALWAYS is negative: a file whose mtime was set a little ahead is still "still")


class Reads:
    """Every byte range ByteTail reads; fails when one re-reads more than a checkpoint."""

    def __init__(self, monkeypatch):
        self.total = 0
        self.again = 0  # bytes read again (checkpoints)
        self.covered = 0  # end of what this version of the file has had read
        real = bytetail.read_range

        def spy(path, start, end=None):
            data = real(path, start, end)
            overlap = max(0, min(start + len(data), self.covered) - start)
            assert overlap <= CHECKPOINT_BYTES, f"bytes [{start}, {start + overlap}) read again"
            self.again += overlap
            self.covered = max(self.covered, start + len(data))
            self.total += len(data)
            return data

        monkeypatch.setattr(bytetail, "read_range", spy)

    def new_version(self) -> None:
        self.covered = 0


def append(path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def append_in_pieces(rng: random.Random, path, data: bytes, after_each) -> dict[str, int]:
    """Append `data` in random pieces (often 1-3 bytes), calling `after_each()` after each; counts
    the splits that fell inside a UTF-8 character, a CR-LF pair, or a line."""
    splits = {"utf8": 0, "crlf": 0, "line": 0}
    at = 0
    while at < len(data):
        size = rng.choice([1, 2, 3, rng.randint(1, 400), rng.randint(1, 4000)])
        if rng.random() < 0.2:  # end the piece inside the next CR-LF pair or UTF-8 character
            crlf, utf8 = data.find(b"\r\n", at) + 1, next((i for i in range(at + 1, min(at + 400, len(data)))
                                                          if 0x80 <= data[i] < 0xC0), 0)
            size = max(1, (crlf if rng.random() < 0.5 else utf8) - at)
        piece, at = data[at: at + size], at + size
        append(path, piece)
        if at < len(data):
            splits["utf8"] += 0x80 <= data[at] < 0xC0
            splits["crlf"] += data[at - 1: at + 1] == b"\r\n"
            splits["line"] += data[at - 1] != 0x0A
        after_each()
    return splits
