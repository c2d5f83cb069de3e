"""Reading log files by byte ranges: the last N lines, older pages, appended lines, merged by time.

A log can be many GB (vLLM's `inference.log`); it is never read whole. A tail read walks back from
the end (or from `before`, the first offset shown) in blocks that double from 256 KB to 4 MB until
it holds enough lines; with a filter it stops after SCAN_BYTES per file, and says where it stopped
(`frame.attrs["older"]`), so "load older" continues from there. A follow read (`after`) reads only
the bytes appended since the offsets it is given. A torn last line (a writer mid-line) is left out
until its newline comes or the file has been still for `bytetail.SETTLE_S`.

A filter picks its lines of a block in one scan (`logblocks`). Lines are parsed by `logtext`; a
line without a level of its own (a traceback) takes that of the line before it in its file. Times
(`logmerge`): each line's own stamp, dated by the run's logs (`run_dates`), whichever files are
read together; a line without one is estimated from the evidence around it.

What a read touched is measured from outside (`benchmarks.common.counted_reads`): no counter here.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from rundash_core.io.bytetail import SETTLE_S
from rundash_core.io.files import describe_unreadable, file_id, open_file, shown_path
from rundash_core.io.files import listed_path as _listed
from rundash_core.io.holes import content_end
from rundash_core.logs import blocks as logblocks
from rundash_core.logs import line as logtext
from rundash_core.logs.merge import assign_times, merge, run_dates
from rundash_core.run import Problem
from rundash_core.safety.gate import could_continue_secret
from rundash_core.safety.redact import redact_text
from rundash_core.safety.user_regex import NOTHING, compile_user_pattern

BLOCK = 256 << 10
MAX_BLOCK = 4 << 20
SCAN_BYTES = 32 << 20  # per file per request when a filter hides lines
CONTEXT_LINES = 50  # parsed before the lines shown: where a continuation line's level comes from
FOLLOW_BYTES = 8 << 20  # more appended than this since the last look: show the tail instead
ROUTER_SUFFIX = "#router"  # a listed virtual entry: the router lines of a single-node inference.log


@dataclass(frozen=True)
class LogSpec:
    """One listed log to read: its listed path (a virtual `…#router` entry too), the real file,
    its component, and which lines of it: all, the engine's only (router lines hidden) or the
    router's only."""

    path: str
    real: str
    component: str
    only: str | None = None  # None | "engine" | "router"


@dataclass(frozen=True)
class Filters:
    pattern: object | None = None  # a UserPattern on the text without colour
    levels: frozenset | None = None
    actors: frozenset | None = None

    @property
    def active(self) -> bool:
        return self.pattern is not None or self.levels is not None or self.actors is not None

    def keeps(self, line: logtext.LogLine, level: str) -> bool:
        if self.levels is not None and level not in self.levels:
            return False
        if self.actors is not None and line.actor not in self.actors:
            return False
        # a line is found by what is shown of it: secrets hidden (no probing a key by regex), and a line
        # that may be part of a secret spanning lines is not found alone (`gate.could_continue_secret`)
        return self.pattern is None or self.pattern.search(line.plain) and self.pattern.search(
            redact_text(line.plain)) and not could_continue_secret(line.plain)


@dataclass
class Window:
    """What was read of one file: its lines (offset, parsed) in file order, the byte range."""

    spec: LogSpec
    start: int
    end: int
    lines: list = field(default_factory=list)
    times: list = field(default_factory=list)  # epoch seconds (NaN when unknown), per kept line
    levels: list = field(default_factory=list)
    problem: str | None = None
    mtime: float = 0.0
    version: tuple | None = None  # (dev, ino, mtime_ns) of the file read: a follow read tells a replaced file
    stamps: list = field(default_factory=list)  # every line's own stamp (kept or not), for dates
    steps: dict = field(default_factory=dict)  # line (index in `stamps`) → its step time (`logtext.step_seconds`)
    tied: list = field(default_factory=list)  # the lines (index in `stamps`) continuing the record before them
    kept: list = field(default_factory=list)  # index in `stamps` of each kept line
    estimated: list = field(default_factory=list)  # per kept line: its time is an estimate
    at_end: bool = False  # read up to where the file's complete lines end
    every_line: bool = True  # `stamps` hold every line read (not only those a pattern found)

    def keep_last(self, n: int) -> None:
        self.lines, self.levels, self.kept = self.lines[-n:], self.levels[-n:], self.kept[-n:]


def specs_for(listing: pd.DataFrame, paths: list[str]) -> list[LogSpec]:
    """The listed logs named by `paths` (a path the run does not list is refused: ValueError)."""
    rows = {p: (c, i) for i, (p, c) in enumerate(zip(listing["path"], listing["component"]))}
    unknown = [p for p in paths if p not in rows]
    if unknown:
        raise ValueError(f"not a log of this run: {', '.join(map(str, unknown[:3]))}")
    out = []
    for p in dict.fromkeys(paths):
        component = rows[p][0]
        if p.endswith(ROUTER_SUFFIX) and component == "router":
            out.append(LogSpec(p, _listed(p[: -len(ROUTER_SUFFIX)]), component, "router"))
        else:
            engine = component == "inference" and p + ROUTER_SUFFIX in rows
            out.append(LogSpec(p, _listed(p), component, "engine" if engine else None))
    return out


def read_log(listing: pd.DataFrame, paths: list[str], *, tail: int = 1000, before=None, after=None, seen=None,
             pattern: str | None = None, levels=None, actors=None) -> pd.DataFrame:
    """`Run.read_log` over a run's `logs()` listing; see `read_specs`."""
    return read_specs(specs_for(listing, list(paths)), tail=tail, before=before, after=after, seen=seen,
                      pattern=pattern, levels=levels, actors=actors, listing=listing)


def read_specs(specs: list[LogSpec], *, tail: int = 1000, before=None, after=None, seen=None,
               pattern: str | None = None, levels=None, actors=None, scan_bytes: int = SCAN_BYTES,
               listing: pd.DataFrame | None = None) -> pd.DataFrame:
    """The last `tail` lines of the given logs merged by time (`frames.LOG_LINES`).

    `before`: an offset (or {path: offset}) to page older lines, ending there; `after`:
    {path: offset} to read only what was appended since, and `seen` (the `versions` of that read)
    to tell a file replaced or rewritten in place since, even at the same size. `pattern` (RE2,
    case-insensitive) is searched in the text without colour; `levels` and `actors` keep lines of
    those only. `frame.attrs`: `older` {path: offset to pass as `before` next}, `ends` {path:
    offset to pass as `after` next}, `versions` {path: version to pass as `seen` next},
    `problems` (Problems of unreadable files), `reset` (a followed file shrank or was
    replaced: the frame is a fresh tail), `error` (an invalid pattern). `listing`: the run's
    logs, whose dated lines date the files read (`logmerge.run_dates`; default: those read)."""
    compiled, error = compile_user_pattern(pattern or "")
    filters = Filters(NOTHING if error else compiled, frozenset(levels) if levels else None,
                      frozenset(actors) if actors is not None else None)
    before_at = _per_path(before, specs)
    after_at = _per_path(after, specs) if after is not None else {}
    windows, reset = [], False
    for spec in specs:
        if spec.path in after_at:
            w, was_reset = _appended(spec, after_at[spec.path], (seen or {}).get(spec.path), tail, filters,
                                     scan_bytes)
            reset |= was_reset
        else:
            w = _tail(spec, before_at.get(spec.path), tail, filters, scan_bytes)
        windows.append(w)
    at_end = {w.spec.real: w for w in windows if w.at_end}
    assign_times(windows, None if listing is None else run_dates(listing, specs, at_end, real_path))
    frame, older = merge(windows, tail)
    frame.attrs.update(older=older, ends={w.spec.path: w.end for w in windows}, reset=reset, error=error,
                       versions={w.spec.path: w.version for w in windows if w.version is not None},
                       problems=[Problem(w.spec.real, w.problem) for w in windows if w.problem])
    return frame


def _per_path(value, specs: list[LogSpec]) -> dict:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {k: int(v) for k, v in value.items() if v is not None}
    return {s.path: int(value) for s in specs}


# Reading ------------------------------------------------------------------------------------------
def _read(fh, start: int, end: int) -> bytes:
    fh.seek(start)
    return fh.read(max(0, end - start))


def _complete_end(fh, size: int, mtime: float) -> int:
    """Where the complete lines end: EOF, or before a torn last line still being written."""
    if size == 0 or time.time() - mtime >= SETTLE_S:
        return size
    last = _read(fh, size - 1, size)
    if last == b"\n":
        return size
    data = _read(fh, max(0, size - BLOCK), size)
    cut = data.rfind(b"\n")
    return size if cut < 0 else size - len(data) + cut + 1


def _tail(spec: LogSpec, before: int | None, want: int, filters: Filters, scan_bytes: int) -> Window:
    """The last `want` kept lines ending at `before` (default: the complete lines' end)."""
    fid = file_id(spec.real)
    if fid is None:
        return Window(spec, 0, 0, problem=describe_unreadable(spec.real))
    try:
        with open_file(spec.real) as fh:
            end = _complete_end(fh, content_end(fh.fileno(), fid.size), fid.mtime)  # (before a sparse tail)
            complete = end
            end = _line_start(fh, before) if before is not None and before < end else end
            w = _walk_back(fh, spec, end, want, filters, scan_bytes, fid.mtime)
        w.version, w.at_end = _version(fid), end == complete
        return w
    except OSError as e:
        return Window(spec, 0, 0, problem=describe_unreadable(spec.real) or str(e))


def _line_start(fh, at: int, *, limit: int | None = None) -> int:
    """The start of the line holding byte `at` (`at` itself when a line starts there); looked for
    at most `limit` bytes back (a file of NULs has no lines: then where the search stopped)."""
    pos, size = at, 1  # `at` is a line start when the byte before it is a newline: one byte read
    while pos > 0 and (limit is None or at - pos < limit):
        start = max(0, pos - size)
        data = _read(fh, start, pos)
        i = data.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos, size = start, min(max(size * 8, 4096), MAX_BLOCK)
    return pos


def _walk_back(fh, spec: LogSpec, end: int, want: int, filters: Filters, scan_bytes: int, mtime: float) -> Window:
    """Blocks back from `end` until `want` lines are kept. Without a filter lines are only split
    (counting needs no parse) and just the last ones are parsed, with a few before them for the
    level of a continuation line."""
    filtering = filters.active or spec.only is not None
    grep_only = filters.pattern is not None and filters.levels is None and spec.only is None
    pos, carry, block, chunks, kept, first = end, b"", BLOCK, [], 0, end  # pos: where the next read ends
    while pos > 0 and kept < want and end - pos < scan_bytes:
        start = max(0, pos - block)
        data = _read(fh, start, pos) + carry
        carry = b""
        if start > 0:
            cut = data.find(b"\n") + 1  # the first line began before `start`: the next block completes it
            if cut in (0, len(data)) and len(data) <= logblocks.MAX_LINE:  # no line starts in the block: read on back
                carry, pos, block = data, start, min(block * 2, MAX_BLOCK)
                continue
            if cut in (0, len(data)):  # a line longer than logblocks.MAX_LINE: its start is found, its middle not kept
                start, data = _long_line(fh, start, data, scan_bytes)
            else:
                carry, data, start = data[:cut], data[cut:], start + cut
        first, pos = start, start - len(carry)
        if grep_only:  # only lines the pattern finds are parsed
            raw = [(offset, logtext.parse(line)) for offset, line in logblocks.grep_lines(data, first, filters.pattern)]
            kept += sum(1 for _, line in raw if _may_keep(spec, line, filters))
        elif filtering:
            raw = [(offset, logtext.parse(line)) for offset, line in logblocks.split_lines(data, first)]
            kept += sum(1 for _, line in raw if _may_keep(spec, line, filters))
        else:
            raw = logblocks.split_lines(data, first)
            kept += len(raw)
        chunks.append(raw)
        block = min(block * 2, MAX_BLOCK)
    lines = [x for chunk in reversed(chunks) for x in chunk]
    if not filtering:
        context = max(0, len(lines) - want - CONTEXT_LINES)
        lines = [(offset, logtext.parse(line)) for offset, line in lines[context:]]
        first = lines[0][0] if context and lines else first
    w = Window(spec, first, end, mtime=mtime)
    _finish(w, lines, filters, inherit=not grep_only)
    w.every_line = not grep_only
    if len(w.lines) > want:  # the next older page ends at the first line kept
        w.start = w.lines[-want][0]
        w.keep_last(want)
    return w


def _long_line(fh, start: int, tail: bytes, limit: int) -> tuple[int, bytes]:
    """A line longer than `logblocks.MAX_LINE` (a dumped tensor, a batch printed whole) of which
    `tail`, from `start` to the line's end, is read: (where the line starts, looked for at most
    `limit` bytes back; the line as shown, `logblocks.shown`)."""
    line_start = _line_start(fh, start, limit=limit)
    head = _read(fh, line_start, min(start, line_start + logblocks.LONG_LINE_SHOWN))
    body = tail[:-1] if tail.endswith(b"\n") else tail
    return line_start, logblocks.shown(head + body, size=start - line_start + len(body)) + tail[len(body):]


def _version(fid) -> tuple:
    return (fid.dev, fid.ino, fid.mtime_ns)


def _appended(spec: LogSpec, offset: int, seen: tuple | None, want: int, filters: Filters,
              scan_bytes: int) -> tuple[Window, bool]:
    """Lines appended since `offset`; a file now shorter than that, another file at the path, or
    one rewritten in place (`seen`: changed with nothing appended) was truncated or replaced: its
    tail is read again (reset)."""
    fid = file_id(spec.real)
    if fid is None:
        return Window(spec, offset, offset, problem=describe_unreadable(spec.real)), False
    seen = tuple(seen) if seen is not None else None
    replaced = seen is not None and (seen[:2] != _version(fid)[:2] or fid.size == offset and seen != _version(fid))
    if fid.size - offset > FOLLOW_BYTES or replaced:  # too much to show as appended (a gap), or another file
        return _tail(spec, None, want, filters, scan_bytes), True
    if fid.size == offset:
        return Window(spec, offset, offset, mtime=fid.mtime, version=_version(fid), at_end=True), False
    try:
        with open_file(spec.real) as fh:
            if fid.size < offset or offset > 0 and _read(fh, offset - 1, offset) != b"\n":
                return _tail(spec, None, want, filters, scan_bytes), True  # truncated or replaced
            data = _read(fh, offset, fid.size)
    except OSError as e:
        return Window(spec, offset, offset, problem=describe_unreadable(spec.real) or str(e)), False
    if not data.endswith(b"\n") and time.time() - fid.mtime < SETTLE_S:
        data = data[: data.rfind(b"\n") + 1]  # a torn last line waits for its newline
    w = Window(spec, offset, offset + len(data), mtime=fid.mtime, version=_version(fid), at_end=True)
    _finish(w, [(o, logtext.parse(line)) for o, line in logblocks.split_lines(data, offset)], filters)
    w.keep_last(want)
    return w, False


def _may_keep(spec: LogSpec, line: logtext.LogLine, filters: Filters) -> bool:
    """Could this line be shown (its level may come from the line before it)?"""
    if spec.only is not None and line.router != (spec.only == "router"):
        return False
    return (filters.levels is None or line.level is None or line.level in filters.levels) and (
        filters.actors is None or line.actor in filters.actors) and (
        filters.pattern is None or filters.pattern.search(line.plain))


def _finish(w: Window, lines: list, filters: Filters, *, inherit: bool = True) -> None:
    """Levels carried over continuation lines (`inherit`: `lines` are every line, not only those
    a pattern found), filters applied; each line's stamp, step time and whether it continues a
    record, for `logmerge.assign_times`."""
    w.stamps = [line.stamp for _, line in lines]
    w.steps = {i: x for i, (_, line) in enumerate(lines)
               if "timing_s/step:" in line.plain and (x := logtext.step_seconds(line.plain)) is not None}
    level, last_router, last_actor, in_record = logtext.UNKNOWN, False, "", False
    for i, (offset, line) in enumerate(lines):
        if line.level is not None:
            level, last_router, last_actor, in_record = line.level, line.router, line.actor, True
        elif line.actor != last_actor or not inherit:  # another process's output: not a continuation
            level, last_router, last_actor, in_record = logtext.UNKNOWN, False, line.actor, False
        elif in_record and line.stamp is None:
            w.tied.append(i)
        router = line.router or (line.level is None and last_router)
        if w.spec.only == "router" and not router or w.spec.only == "engine" and router:
            continue
        if filters.keeps(line, level):
            w.lines.append((offset, line))
            w.kept.append(i)
            w.levels.append(level)


def file_row(path: str, component: str, attempt: int | None, *, listed_path: str | None = None) -> dict:
    """One `frames.LOGS` row: size and time from one stat (NA for a broken link)."""
    fid = file_id(path)
    return {"component": shown_path(component), "attempt": attempt, "path": shown_path(listed_path or path),
            "size": fid.size if fid else None,
            "updated": pd.Timestamp(fid.mtime_ns, unit="ns", tz="UTC") if fid else pd.NaT}


def real_path(path: str) -> str:
    """The file behind a listed path (a virtual router entry reads its inference.log)."""
    return path[: -len(ROUTER_SUFFIX)] if path.endswith(ROUTER_SUFFIX) else path

