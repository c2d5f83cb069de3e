"""The resolved-config print of a verl console log.

The trainer pprints its resolved config once at start-up as a (usually multi-line, Ray-prefixed)
Python dict; spec 4 "Resolved config": find the line whose body starts with `{'actor_rollout_ref'`
(PPO) or `{'data'` (SFT), keep the following lines of the same source (other actors interleave)
until the braces balance outside string literals, and `ast.literal_eval` the result (bare
`inf`/`nan` become floats).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .files import read_range
from .verl_grammar import clean_piece

CONFIG_STARTS = ("{'actor_rollout_ref'", "{'data'")
CONFIG_MAX_BYTES = 4 << 20  # a resolved config print is tens of KB; stop looking after this


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
