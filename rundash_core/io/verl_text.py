"""What a verl console log says besides metric lines: the resolved config print, and the summary
discovery needs from the ends of the file.

The trainer pprints its resolved config once at start-up as a (usually multi-line, Ray-prefixed)
Python dict; spec 4 "Resolved config": find the line whose body starts with `{'actor_rollout_ref'`
(PPO) or `{'data'` (SFT), keep the following lines of the same source (other actors interleave)
until the braces balance outside string literals, and `ast.literal_eval` the result (bare
`inf`/`nan` become floats). Discovery reads only the head (the config, the SFT step count, the
start time) and the last 64 KiB (last step, tqdm total, the final-validation print) of each log.
"""
from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass, field

from .files import read_range, read_tail
from .verl_grammar import PROGRESS, SFT_STEPS, clean_piece, parse_console_line

CONFIG_STARTS = ("{'actor_rollout_ref'", "{'data'")
CONFIG_MAX_BYTES = 4 << 20  # a resolved config print is tens of KB; stop looking after this
HEAD_BYTES = 8 << 20
TAIL_BYTES = (64 << 10, 1 << 20)
_TIMESTAMP = re.compile(rb"(?<!\d)(20\d\d-[01]\d-[0-3]\d)[ T]([0-2]\d:[0-5]\d:[0-5]\d)")
_FILE_LOGGER = re.compile(rb"Creating file logger at ([^\r\n]+)")


@dataclass
class ConfigPrint:
    value: dict | None
    error: str | None = None
    offset: int | None = None  # byte offset of its first line


class _Literals(ast.NodeTransformer):
    """pprint writes float('inf') and float('nan') as bare names; literal_eval wants constants."""

    def visit_Name(self, node: ast.Name):
        if node.id in ("inf", "nan"):
            return ast.copy_location(ast.Constant(float(node.id)), node)
        return node


def literal(text: str):
    tree = _Literals().visit(ast.parse(text.strip(), mode="eval"))
    return ast.literal_eval(tree)


def _depth_change(text: str, state: list) -> int:
    """Brace balance of one line outside string literals; `state` carries an open quote."""
    depth, i, quote = 0, 0, state[0]
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        i += 1
    state[0] = quote
    return depth


def config_print(data: bytes, base: int = 0) -> ConfigPrint | None:
    """The first resolved-config print in `data` (bytes of whole lines starting at file offset
    `base`); None when there is none, a ConfigPrint with `error` when it cannot be read."""
    pos = min((p for s in CONFIG_STARTS if (p := data.find(s.encode())) >= 0), default=-1)
    while pos >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        found = _collect(data, start)
        if found is not None:
            value, error = found
            return ConfigPrint(value, error, base + start)
        nxt = [p for s in CONFIG_STARTS if (p := data.find(s.encode(), data.find(b"\n", pos) + 1)) >= 0]
        pos = min(nxt) if nxt and data.find(b"\n", pos) >= 0 else -1
    return None


def _collect(data: bytes, start: int):
    lines = data[start: start + CONFIG_MAX_BYTES].split(b"\n")
    source, body = clean_piece(lines[0].decode("utf-8", "replace").rstrip("\r"))
    if not body.startswith(CONFIG_STARTS):
        return None
    state, parts = [None], [body]
    depth = _depth_change(body, state)
    for raw in lines[1:]:
        if depth <= 0:
            break
        src, text = clean_piece(raw.decode("utf-8", "replace").rstrip("\r"))
        if src != source:
            continue  # another actor's output, interleaved
        parts.append(text)
        depth += _depth_change(text, state)
    if depth > 0:
        return None, "resolved config print is cut off (braces never balance)"
    try:
        value = literal("\n".join(parts))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        return None, f"resolved config print cannot be read ({type(e).__name__}: {e})"
    if not isinstance(value, dict):
        return None, "resolved config print is not a dict"
    return value, None


def config_at(path: str, offset: int) -> ConfigPrint | None:
    return config_print(read_range(path, offset, offset + CONFIG_MAX_BYTES), offset)


@dataclass
class HeadSummary:
    config: ConfigPrint | None = None
    sft_total: int | None = None
    progress_total: int | None = None
    started: float | None = None  # the first wall-clock stamp printed (local time)
    file_logger: str | None = None


def head_summary(path: str, head: bytes | None = None) -> HeadSummary:
    """From the first lines of a log (config print, SFT step count, tqdm total, start time): the
    first MiB, or up to 8 MiB when the config print is not in it (or runs past it). `head`: the
    file's first bytes when already read (used when it holds the first MiB or the whole file)."""
    data = head[: 1 << 20] if head is not None else read_range(path, 0, 1 << 20)
    config = config_print(data[: data.rfind(b"\n") + 1])
    if len(data) == 1 << 20 and (config is None or config.value is None):
        data = read_range(path, 0, HEAD_BYTES)
        config = config_print(data[: data.rfind(b"\n") + 1] if len(data) == HEAD_BYTES else data)
    out = HeadSummary(config=config)
    if (m := SFT_STEPS.search(data)) is not None:
        out.sft_total = int(m.group(1))
    if (m := PROGRESS.search(data)) is not None:
        out.progress_total = int(m.group(1))
    if (m := _TIMESTAMP.search(data)) is not None:
        try:
            out.started = time.mktime(time.strptime(b" ".join(m.groups()).decode(), "%Y-%m-%d %H:%M:%S"))
        except (ValueError, OverflowError):
            pass
    if (m := _FILE_LOGGER.search(data)) is not None:
        out.file_logger = clean_piece(m.group(1).decode("utf-8", "replace"))[1].strip() or None
    return out


@dataclass
class TailSummary:
    last_step: int | None = None
    progress_total: int | None = None
    final_validation: bool = False
    keys: list[str] = field(default_factory=list)  # of the metric lines in the window


def tail_summary(path: str, tail: tuple[bytes, int] | None = None) -> TailSummary:
    """From the last 64 KiB of a log (1 MiB when that holds no metric line): the last step, the
    last tqdm total, whether the final validation was printed. `tail`: (the file's last bytes,
    their offset) when already read; used where it covers the window."""
    out = TailSummary()
    for nbytes in TAIL_BYTES:
        if tail is not None and (len(tail[0]) >= nbytes or tail[1] == 0):
            data, start = tail[0][-nbytes:], tail[1] + max(len(tail[0]) - nbytes, 0)
        else:
            data, start = read_tail(path, nbytes)
        if start:
            data = data[data.find(b"\n") + 1:]  # the first line is cut
        data = data[: data.rfind(b"\n") + 1]  # a partial last line is not read yet
        out.final_validation = b"Final validation metrics" in data
        totals = PROGRESS.findall(data)
        out.progress_total = int(totals[-1]) if totals else None
        keys: dict[str, None] = {}
        for line in data.split(b"\n"):
            if b"step:" in line:
                for step, values in parse_console_line(line.decode("utf-8", "replace")):
                    out.last_step = step
                    keys.update(dict.fromkeys(values))
        out.keys = list(keys)
        if out.last_step is not None or start == 0:
            break
    return out
