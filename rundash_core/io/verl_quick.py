"""The fast path of a verl log's discovery digest: the same fields `LogEnds` + `quick_head` +
`quick_tail` give (`verl_summary._digest`), from the fewest reads and byte searches, for the
common log only. Anything unusual — a marker not in the bytes read, a config print without its
trainer section, a file logger to look up, a final-validation print that may sit before the
window, too many hops — answers None ("not sure") and the caller takes the exact path.

Why the same answer: every field is the first (or last) occurrence of the same needle in the same
range as the exact path, found in fewer bytes only when the range read holds it; the exact path's
"bytes seen" (`LogEnds.head_len`) is never smaller than the lower bound used here (16 KiB or the
whole small file, and the config print's end), so a match found within that bound is its match too.

Search speeds that shaped it (CPython 3.11, 16 KiB of log text): `bytes.find` of a long needle
4-8 µs, `rfind` of one with a rare first byte ~2 µs, `find` of a single rare byte (memchr) 0.2 µs,
a regex alternation 50 µs; a pread of 16 KiB 0.6 µs, of 64-128 KiB ~4 µs.
"""
from __future__ import annotations

import os

from .verl_ends import (_CONFIG_STARTS, _EXPERIMENT, _FINAL, _PARTIAL, _PATH, _STAMP, _TOTAL, CONFIG_WINDOW,
                        FINAL_BEFORE, FIRST_BYTES, HEAD_BYTES, QuickHead, QuickTail, _last_step_at, _str_value,
                        tail_progress_total, tail_val_keys)
from .verl_grammar import PROGRESS, SFT_STEPS

MORE_HEAD = 128 << 10  # a config print not in the first read is looked for this far (then: not sure)
_HOPS = 64  # `{` hops before the config print (more: not sure)
_HARBOR = b"harbor_trials"
_TRAINER = b"'trainer': {"
_PROGRESS_AT = b"Training Progress:"
_SFT_AT = b"Number of steps/epoch"


def _first(data: bytes, prefix: bytes, full: bytes, lo: int, hi: int) -> int:
    """`data.find(full, lo, hi)` by a search for `prefix` (a prefix of `full` without the space
    that makes `bytes.find` crawl through the indented config print: 3x faster)."""
    while (at := data.find(prefix, lo, hi)) >= 0 and not data.startswith(full, at, hi):
        lo = at + 1
    return at


def _match(pattern, data: bytes, prefix: bytes, lo: int, hi: int):
    """`verl_ends._at`: `pattern` matched at the first `prefix` (of its literal start) where it matches."""
    while (at := data.find(prefix, lo, hi)) >= 0:
        if (m := pattern.match(data, at, hi)) is not None:
            return m
        lo = at + 1
    return None


def _head_fields(data: bytes, pos: int, stop: int, trainer: int) -> QuickHead:
    """`verl_ends.quick_head(data, pos, stop, trainer)` for a config print whose end `stop` was
    found: the same searches, each by a space-free prefix of its needle."""
    rl = data.startswith(_CONFIG_STARTS[0], pos)
    exp = _str_value(_match(_EXPERIMENT, data, b"'experiment_name'", trainer, stop))
    m = _match(_TOTAL, data, b"'total_training_steps'", trainer, stop)
    total = int(m.group(1)) if m is not None and m.group(1) != b"None" else None
    at = _first(data, b"'logger'", b"'logger': [", trainer, stop)
    close = data.find(b"]", at, stop) if at >= 0 else -1
    logger = close < 0 or data.find(b"'file'", at, close) >= 0
    model = _first(data, b"'model'", b"'model': {", pos, stop)
    if rl:
        path = _match(_PATH, data, b"'path'", model, stop) if model >= 0 else None
        models = [_str_value(path)]
        critic = _first(data, b"'critic'", b"'critic': {", path.end() if path is not None else max(model, pos), stop)
        cmodel = _first(data, b"'model'", b"'model': {", critic, stop) if critic >= 0 else -1
        models.append(_str_value(_match(_PATH, data, b"'path'", cmodel, stop)) if cmodel >= 0 else None)
    else:
        models = [_str_value(_match(_PARTIAL, data, b"'partial_pretrain'", model, stop)) if model >= 0 else None,
                  _str_value(_match(_PATH, data, b"'path'", model, stop)) if model >= 0 else None]
    return QuickHead(exp, total, tuple(models), "rl" if rl else "sft", logger, stop)


def _first_hop(data: bytes, needle: bytes, lo: int, hi: int, tries: int = 16) -> int:
    """`data.find(needle, lo, hi)` by memchr hops to its first byte (rare in logs: `T`, `N`), a
    plain search after `tries` misses (`rfind` first: faster when it is not there)."""
    byte = needle[:1]
    for _ in range(tries):
        at = data.find(byte, lo, hi)
        if at < 0 or data.startswith(needle, at, hi):
            return at
        lo = at + 1
    return data.find(needle, lo, hi) if data.rfind(needle, lo, hi) >= 0 else -1


def quick_parts(fd: int, size: int):
    """(names_trials, QuickHead, QuickTail, stamp bytes, head progress total, SFT step count) of the
    log open at `fd` of `size` bytes, as `verl_summary._digest` reads them; None when not sure
    (the caller then runs the exact path)."""
    if size <= 2 * FIRST_BYTES:
        head = os.pread(fd, size, 0)
        if len(head) != size:
            return None
        tail, tail_start = head, 0
    else:
        head = os.pread(fd, FIRST_BYTES, 0)
        tail_start = size - FIRST_BYTES
        tail = os.pread(fd, FIRST_BYTES, tail_start)
        if len(head) != FIRST_BYTES or len(tail) != FIRST_BYTES:
            return None
    base = len(head)  # the exact path sees at least this much of the head
    # SWE-Lego trial dirs named in the first or last 16 KiB: the exact path decides (rare)
    if head.rfind(_HARBOR, 0, FIRST_BYTES) >= 0 or tail.rfind(_HARBOR, max(len(tail) - FIRST_BYTES, 0)) >= 0:
        return None

    # The config print: its start (the first `{'actor_rollout_ref'` / `{'data'`, by `{` hops), its
    # `'trainer': {` and its end (the first `}\n` after that) within CONFIG_WINDOW of the start.
    lo, hops, pos = 0, 0, -1
    while True:
        hi = len(head)
        while (at := head.find(b"{", lo, hi)) >= 0:
            if head.startswith(_CONFIG_STARTS, at, hi):
                pos = at
                break
            hops += 1
            if hops > _HOPS:
                return None
            lo = at + 1
        if pos >= 0:
            break
        if hi >= size or hi >= MORE_HEAD:
            return None  # no config print (file logger) or a far one: the exact path
        lo = max(hi - 20, 0)
        head = os.pread(fd, min(size, MORE_HEAD), 0)  # not `+=`: a 128 KiB concatenation costs 50 µs
        if len(head) < min(size, MORE_HEAD):
            return None
    wmax = min(pos + CONFIG_WINDOW, size)
    while True:
        hi = min(len(head), wmax)
        trainer = _first(head, b"'trainer'", _TRAINER, pos, hi)
        end = head.find(b"}\n", trainer, hi) if trainer >= 0 else -1
        if end >= 0:
            break
        if hi >= wmax:
            return None
        head = os.pread(fd, wmax, 0)
        if len(head) < wmax:
            return None
    end += 1
    qh = _head_fields(head, pos, end, trainer)
    if qh.file_logger:  # `Creating file logger at` to look up: the exact path
        return None
    seen = max(base, end)  # the exact path's head length is at least this

    # The first wall-clock stamp, within what the exact path sees for sure
    stamp, lo, hi = None, 0, min(seen, len(head))
    while (m := _STAMP.search(head, lo, hi)) is not None:
        if m.start() == 0 or not head[m.start() - 1:m.start()].isdigit():
            stamp = m.group()
            break
        lo = m.start() + 1
    if stamp is None:
        return None

    # The tail: the last step in the last 16 KiB (else: not sure), the markers in the same window
    lo = tail.find(b"\n") + 1 if tail_start > 0 else 0
    hi = tail.rfind(b"\n") + 1
    step, at = _last_step_at(tail, lo, hi)
    if step is None and tail_start > 0:
        return None
    has_total = qh.total_steps is not None and qh.total_steps > 0
    total = None if has_total else tail_progress_total(tail, lo, hi)
    keys = tail_val_keys(tail, lo, hi)
    final = tail.rfind(_FINAL, lo, hi) >= 0  # no occurrence can run past `hi` (a line end)
    if not final and at >= 0 and at - lo < FINAL_BEFORE and tail_start > 0:
        return None  # the print may sit before the window: the exact path looks there
    qt = QuickTail(step, total, final, keys)

    progress = sft = None
    if not (has_total or total):  # the head's tqdm total (RL) or SFT step count
        top = min(max(HEAD_BYTES, end), size)
        if len(head) < top:
            head = os.pread(fd, top, 0)
            if len(head) < top:
                return None
        literal, pattern = (_PROGRESS_AT, PROGRESS) if qh.flavor == "rl" else (_SFT_AT, SFT_STEPS)
        at = _first_hop(head, literal, 0, top)
        if at >= 0:
            m = pattern.match(head, at, max(seen, at + len(literal)))
            if m is None:
                return None
            if qh.flavor == "rl":
                progress = int(m.group(1))
            else:
                sft = int(m.group(1))
    return False, qh, qt, stamp, progress, sft
