"""The ends of a verl console log, for discovery: the first and last bytes in one open and at most
two reads (`read_ends`), and targeted byte searches over them (`quick_head`, `quick_tail`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

HEAD_BYTES = 1 << 20  # what the head summary reads (and SWE-Lego's 256 KiB probe within it)
TAIL_BYTES = 256 << 10  # SWE-Lego's tail probe; the tail summary's 64 KiB window within it


@dataclass
class LogEnds:
    """The first and last bytes of one log, read once (a file of up to head + tail bytes is read
    whole and both are slices of it)."""

    head: bytes
    tail: bytes
    tail_start: int
    size: int


def read_ends(path: str, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> LogEnds:
    """One open, at most two reads. Raises OSError like open()."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size <= head + tail:
            data = os.pread(fd, size, 0)
            return LogEnds(data[:head], data[max(len(data) - tail, 0):], max(len(data) - tail, 0), len(data))
        first = os.pread(fd, head, 0)
        return LogEnds(first, os.pread(fd, tail, size - tail), size - tail, size)
    finally:
        os.close(fd)


# Quick reads for the runs list: targeted byte searches, no config or metric-line parse ----------
PROBE_BYTES = 256 << 10  # the head and tail bytes discovery reads (SWE-Lego's probes)
WINDOW_BYTES = 64 << 10  # the tail window the last step is searched in
_STEP_AT = re.compile(rb"step:(\d+) - ")
_STR = rb"'((?:[^'\\\n]|\\.)*)'"
_EXPERIMENT = re.compile(rb"'experiment_name': " + _STR)
_TOTAL = re.compile(rb"'total_training_steps': (-?\d+|None)")
_PATH = re.compile(rb"'path': (?:" + _STR + rb"|None)")
_PARTIAL = re.compile(rb"'partial_pretrain': (?:" + _STR + rb"|None)")
_VAL_KEY = re.compile(rb"(val(?:-core/|-aux/|/test_score/)[^\s:']+):")
_PROGRESS = re.compile(rb"Training Progress:\s+\d+%\|[^|]*\|\s*\d+/(\d+) \[")
_CONFIG_STARTS = (b"{'actor_rollout_ref'", b"{'data'")


@dataclass(frozen=True)
class QuickHead:
    experiment: str | None = None
    total_steps: int | None = None
    models: tuple = ()  # candidate model paths in config_model's order (None: absent)
    flavor: str = "rl"


def _find(pattern, data: bytes, start: int, end: int = -1):
    m = pattern.search(data, start, len(data) if end < 0 else end)
    return m


def _str_value(m) -> str | None:
    if m is None or m.group(1) is None:
        return None
    return m.group(1).decode("utf-8", "replace")


CONFIG_WINDOW = 64 << 10  # the config print is searched for its sections within this much of its start


def config_start(data: bytes) -> int:
    """Where the first config print starts in `data` (-1: none); `{'data'` is searched only before
    the first `{'actor_rollout_ref'`."""
    rl = data.find(_CONFIG_STARTS[0])
    sft = data.find(_CONFIG_STARTS[1], 0, len(data) if rl < 0 else rl)
    return sft if sft >= 0 else rl


def _config_end(data: bytes, pos: int) -> int:
    """The end of the config print at `pos`: its `trainer` section is the last (pprint sorts keys),
    so the end is the first line ending in `}` (not `},`) after `'trainer': {` within the window;
    -1 when that is not found there (then the searches run over all of `data`, as before)."""
    window = min(pos + CONFIG_WINDOW, len(data))
    trainer = data.find(b"'trainer': {", pos, window)
    if trainer < 0:
        return -1
    end = data.find(b"}\n", trainer, window)
    return -1 if end < 0 else end + 1


def quick_head(data: bytes) -> QuickHead:
    """The fields the runs list shows from the first config print in `data`, by targeted byte
    searches (pprint sorts keys: `trainer` is the last top-level section) within the config print
    (found within `CONFIG_WINDOW` of its start; else over all of `data`)."""
    pos = config_start(data)
    if pos < 0:
        return QuickHead()
    rl = data.startswith(_CONFIG_STARTS[0], pos)
    end = _config_end(data, pos)
    if end < 0:
        end = len(data)
    trainer = data.find(b"'trainer': {", pos, end)
    exp = total = None
    if trainer >= 0:
        exp = _str_value(_find(_EXPERIMENT, data, trainer, end))
        m = _find(_TOTAL, data, trainer, end)
        total = int(m.group(1)) if m is not None and m.group(1) != b"None" else None
    models: list = []
    if rl:
        model = data.find(b"'model': {", pos, end)
        models.append(_str_value(_find(_PATH, data, model, end)) if model >= 0 else None)
        critic = data.find(b"'critic': {", pos, end)
        cmodel = data.find(b"'model': {", critic, end) if critic >= 0 else -1
        models.append(_str_value(_find(_PATH, data, cmodel, end)) if cmodel >= 0 else None)
    else:
        model = data.find(b"'model': {", pos, end)
        models += [_str_value(_find(_PARTIAL, data, model, end)) if model >= 0 else None,
                   _str_value(_find(_PATH, data, model, end)) if model >= 0 else None]
    return QuickHead(exp, total, tuple(models), "rl" if rl else "sft")


@dataclass(frozen=True)
class QuickTail:
    last_step: int | None = None
    progress_total: int | None = None
    final_validation: bool = False
    keys: tuple = ()


def _window(data: bytes, cut: bool) -> bytes:
    if cut:
        data = data[data.find(b"\n") + 1:]  # the first line is cut
    return data[: data.rfind(b"\n") + 1]  # a partial last line is not read yet


def _last_step(data: bytes) -> int | None:
    end = len(data)
    while (pos := data.rfind(b"step:", 0, end)) >= 0:
        m = _STEP_AT.match(data, pos)
        if m is not None and (pos == 0 or not (data[pos - 1:pos].isalnum() or data[pos - 1:pos] in b"_/")):
            return int(m.group(1))
        end = pos
    return None


def _val_keys(data: bytes) -> list[bytes]:
    return [m.group(1) for m in _VAL_KEY.finditer(data)
            if m.start() == 0 or not (data[m.start() - 1:m.start()].isalnum() or data[m.start() - 1] in b"_/'")]


def quick_tail(path: str, tail: bytes, tail_start: int) -> QuickTail:
    """The last step (a backwards search for the last `step:N - `), the last tqdm total, the
    final-validation marker and the validation keys of the last 64 KiB (1 MiB when that holds no
    metric line)."""
    for nbytes in (WINDOW_BYTES, 1 << 20):
        if len(tail) >= nbytes or tail_start == 0:
            data, start = tail[-nbytes:], tail_start + max(len(tail) - nbytes, 0)
        else:
            fd = os.open(path, os.O_RDONLY)
            try:
                start = max(os.fstat(fd).st_size - nbytes, 0)
                data = os.pread(fd, nbytes, start)
            finally:
                os.close(fd)
        data = _window(data, start > 0)
        step = _last_step(data)
        if step is not None or start == 0:
            break
    p = data.rfind(b"Training Progress:")
    m = _PROGRESS.match(data, p) if p >= 0 else None
    if m is None and p >= 0:
        m = ([None] + list(_PROGRESS.finditer(data)))[-1]
    keys = tuple(dict.fromkeys(k.decode("utf-8", "replace") for k in 
                      _val_keys(data))) if b"val" in data else ()
    return QuickTail(step, int(m.group(1)) if m else None, b"Final validation metrics" in data, keys)
