"""What a SWE-Lego-RL log says about its trials and validations (`swe_lego_rl`): the
`harbor_trials` paths it names and its validation markers (spec 2.3), read incrementally.

A log grows for days and is read on every page load, so the markers are kept per log (shared
cache) and a refresh scans only the complete lines appended since; a replaced or rewritten file
is read again. Kept apart from the run class so each module holds one concern.
"""
from __future__ import annotations

import os
import re
import threading

from rundash_core import cache
from rundash_core.io.bytetail import ByteTail
from rundash_core.sources.swe_lego_rl import harbor

CHUNK_BYTES = 16 << 20
_MARK = re.compile(rb"harbor_trials|test_gen_batch meta info|validate_time|val_map:")
# step numbers of at most 18 digits: a wider one is no step (it would not fit the Int64 columns)
_VAL_MAP = re.compile(rb"val_map:\s*step_(\d{1,18})\s*->\s*train_step\s*(\d{1,18})(?!\d)")
_VAL_START = re.compile(rb"test_gen_batch meta info:.*'validate':\s*True.*'global_steps':\s*(\d{1,18})(?!\d)")
_VAL_END = re.compile(rb"step:(\d{1,18})\s*-.*rollouter/validate_time")


class LogMarks(ByteTail):
    """The harbor_trials paths and validation markers of one log, read incrementally: a refresh
    scans only the complete lines appended since (a replaced or rewritten file is read again)."""

    def __init__(self, path: str):
        super().__init__(path)
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self.named: dict[str, None] = {}  # exp dirs in order of first appearance
        self.starts: dict[int, None] = {}  # folder numbers of every validation started
        self.pairs: dict[int, int] = {}  # folder number -> trainer step (first pairing wins)
        self.explicit: dict[int, int] = {}  # `val_map:` lines (always win)
        self.pending: int | None = None
        self.rollouter = False  # a `rollouter/validate_time` line was seen: fully-async training
        self._unscanned: bytes | None = None  # a last line handed out without its newline, not yet scanned

    @property
    def nbytes(self) -> int:
        return 200 + 100 * (len(self.named) + len(self.starts) + len(self.pairs) + len(self.explicit))

    def refresh(self) -> LogMarks:
        with self._lock:
            while (new := self.read_lines(CHUNK_BYTES)) is not None:
                if new.reset:
                    self._clear()
                if not new.cut:
                    break
                if self._unscanned is not None and not new.redo:
                    self._scan(self._unscanned)  # its newline came next: it was whole (a redo hands it out again)
                self._scan(new.complete)  # a held last line is scanned once it is known whole
                self._unscanned = new.lines[len(new.complete):] if new.held else None
            if self._unscanned is not None and not self._held and not self._redo_due:
                self._scan(self._unscanned)  # only its newline came since: it was whole
                self._unscanned = None
        return self

    def _scan(self, data: bytes) -> None:
        end = 0
        for m in _MARK.finditer(data):
            if m.start() < end:
                continue  # same line as the previous hit
            start = data.rfind(b"\n", 0, m.start()) + 1
            end = data.find(b"\n", m.end())
            end = len(data) if end < 0 else end
            self._line(data[start:end])

    def _line(self, line: bytes) -> None:
        self.rollouter = self.rollouter or b"rollouter/validate_time" in line
        for d in harbor.named_exp_dirs(line):
            self.named.setdefault(d, None)
        for m in _VAL_MAP.finditer(line):  # (a stitched or CR-redrawn line may hold several)
            self.explicit.setdefault(int(m.group(1)), int(m.group(2)))
        if (m := _VAL_START.search(line)) is not None:
            self.pending = int(m.group(1))
            self.starts.setdefault(self.pending, None)
        elif (m := _VAL_END.search(line)) is not None and self.pending is not None:
            self.pairs.setdefault(self.pending, int(m.group(1)))
            self.pending = None

    def train_step(self, folder: int) -> int | None:
        return self.explicit.get(folder, self.pairs.get(folder))

    def is_validation(self, folder: int) -> bool:
        return folder in self.starts or folder in self.explicit


def log_marks(path: str) -> LogMarks:
    marks = cache.shared.get_or_create(("swe-lego-rl-marks", os.path.realpath(path)), lambda: LogMarks(path))
    marks.refresh()
    cache.shared.evict()
    return marks
