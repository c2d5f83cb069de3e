"""The config of a verl console log: its resolved-config print, else its launch command.

The trainer pprints its resolved config once at start-up as a (usually multi-line, Ray-prefixed)
Python dict; spec 4 "Resolved config": find the line whose body starts with `{'actor_rollout_ref'`
(PPO) or `{'data'` (SFT), keep the following lines of the same source (other actors interleave)
until the braces balance outside string literals, and `ast.literal_eval` the result (bare
`inf`/`nan` become floats).

Real logs bend that, and a print is read as far as it goes, never dropped:

- values that are not Python literals (`<MyEnum.X: 'x'>`, `<object at 0x…>`, `torch.bfloat16`,
  `Path('…')`, `np.float64(…)`, `DictConfig(…)`/`ListConfig(…)` wrappers): wrappers and numpy
  scalars are unwrapped, paths become their string, anything else its text (a string);
- a print cut off (the braces never balance; a same-source line that is not a pprint
  continuation, indented, ends it): what parses is kept, up to its last complete item, with the
  open brackets closed (`partial`, noted in `error`, the raw text kept);
- a print nothing of which parses: its raw text (kind "raw"), noted in `error`.

Without a print (or with only part of one) the launch command in the log's head gives the
config: Hydra overrides and shell variables (`verl_overrides`, kind "overrides").
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from rundash_core.io.files import read_range
from rundash_core.sources.verl.grammar import clean_piece
from rundash_core.sources.verl.overrides import HEAD_BYTES, HeadConfig, head_config

CONFIG_STARTS = ("{'actor_rollout_ref':", "{'data':")
CONFIG_MAX_BYTES = 4 << 20  # a resolved config print is tens of KB; stop looking after this
RAW_MAX_CHARS = 256 << 10  # the raw text kept of a print that is not fully read
HEAD = -1  # `config_at`'s offset of the launch command (the overrides in the log's head)
_TRIES = 48  # cut points tried, from the end, when recovering a cut-off print


@dataclass
class ConfigPrint:
    value: dict | None
    error: str | None = None  # why it is not all there (a problem to show), else None
    offset: int | None = None  # byte offset of its first line
    kind: str = "print"  # "print" (resolved config), "raw" (unreadable print), "overrides" (launch command)
    raw: str | None = None  # the text as found in the log, when the value is not all of it
    partial: bool = False  # a print read only up to where it was cut off
    variables: dict | None = None  # "overrides": the shell variables of the log's head

    @property
    def complete(self) -> bool:
        """A resolved config read whole."""
        return self.kind == "print" and not self.partial and self.value is not None

    def files(self) -> dict[str, object]:
        """What the Config page shows of it, by name."""
        if self.kind == "overrides":
            out: dict[str, object] = {"overrides (command line)": self.value} if self.value else {}
            if self.variables:
                out["shell variables (log head)"] = self.variables
            return out
        if self.kind == "raw":
            return {"config (raw text from log)": self.raw}
        if self.partial:
            return {"config (from log, partial)": self.value, "config (raw text from log)": self.raw}
        return {"config (from log)": self.value}


class _Literals(ast.NodeTransformer):
    """pprint writes float('inf') and float('nan') as bare names; literal_eval wants constants."""

    def visit_Name(self, node: ast.Name):
        if node.id in ("inf", "nan"):
            return ast.copy_location(ast.Constant(float(node.id)), node)
        return node


def literal(text: str):
    tree = _Literals().visit(ast.parse(text.strip(), mode="eval"))
    return ast.literal_eval(tree)


_PARSE_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)


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
    `base`); None when there is none. One that cannot be read whole is read as far as it parses
    (`partial`), else kept as raw text (kind "raw"), with `error` saying so."""
    pos = min((p for s in CONFIG_STARTS if (p := data.find(s.encode())) >= 0), default=-1)
    while pos >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        found = _collect(data, start)
        if found is not None:
            found.offset = base + start
            return found
        nxt = [p for s in CONFIG_STARTS if (p := data.find(s.encode(), data.find(b"\n", pos) + 1)) >= 0]
        pos = min(nxt) if nxt and data.find(b"\n", pos) >= 0 else -1
    return None


def _collect(data: bytes, start: int) -> ConfigPrint | None:
    lines = data[start: start + CONFIG_MAX_BYTES].split(b"\n")
    source, body = clean_piece(lines[0].decode("utf-8", "replace").rstrip("\r"))
    if not body.startswith(CONFIG_STARTS):
        return None
    state, parts = [None], [body]
    depth = _depth_change(body, state)
    whole = len(lines) > 1  # the last line taken ends with a newline
    for i, raw in enumerate(lines[1:], 1):
        if depth <= 0:
            break
        src, text = clean_piece(raw.decode("utf-8", "replace").rstrip("\r"))
        if src != source:
            continue  # another actor's output, interleaved
        if not text[:1].isspace():
            break  # not a pprint continuation line: the print stopped here
        parts.append(text)
        whole = i < len(lines) - 1
        depth += _depth_change(text, state)
    return read_print("\n".join(parts), cut=depth > 0, whole=whole)


def read_print(text: str, cut: bool = False, whole: bool = True) -> ConfigPrint:
    """A config print's text (its lines joined) as a ConfigPrint: read whole, else tolerantly
    (non-literal values as text), else as far as it parses, else raw. `cut`: its braces never
    balance; `whole`: its last line is complete (not cut by the end of what was read)."""
    why = "cut off (braces never balance)" if cut else None
    if not cut:
        try:
            value = literal(text)
            if isinstance(value, dict):
                return ConfigPrint(_jsonable(value))
            why = "not a dict"
        except _PARSE_ERRORS as e:
            why = f"not readable whole ({type(e).__name__}: {_short(e)})"
    clean, truncated = tolerant(text)
    if not cut and not truncated:
        try:
            value = literal(clean)
            if isinstance(value, dict):
                return ConfigPrint(_jsonable(value))
        except _PARSE_ERRORS:
            pass
    raw = text if len(text) <= RAW_MAX_CHARS else (
        text[:RAW_MAX_CHARS] + f"\n… ({len(text) - RAW_MAX_CHARS} more characters)")
    value, lines = recover(clean, whole and not truncated)
    if value is not None:
        total = text.count("\n") + 1
        return ConfigPrint(_jsonable(value), f"resolved config print is {why}: shown as far as it parses "
                                             f"({lines} of its {total} lines), and as raw text", raw=raw, partial=True)
    return ConfigPrint({"raw config text (not parsed)": raw}, f"resolved config print is {why} and nothing of it "
                                                              f"parses: shown as raw text", kind="raw", raw=raw)


def _short(e: Exception) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return text[:120]


# Tolerant reading -------------------------------------------------------------------------------
_TOK = re.compile(r"""(?P<s>(?:[rRbBuU]|[rR][bB]|[bB][rR])?(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))"""
                  r"|(?P<n>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)"
                  r"|(?P<d>0[xXoObB][\da-fA-F_]+|(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?j?)"
                  r"|(?P<w>\s+)|(?P<o>.)", re.S)
_KEEP = {"True", "False", "None", "inf", "nan"}
_UNWRAP = {"DictConfig", "ListConfig"}  # OmegaConf containers: their content
_NUMPY = re.compile(r"^(?:np|numpy)\.[a-z_]+\d*$")
_PAIRS = {"{": "}", "[": "]", "(": ")"}


def _match(text: str, i: int) -> int | None:
    """The end of the bracketed span opening at `text[i]` (`(`/`[`/`{`, or `<` of a `<…>` repr),
    string literals skipped; None when it never closes."""
    angle, depth = text[i] == "<", 0
    for m in _TOK.finditer(text, i):
        c = m.group()
        if m.lastgroup != "o":
            continue
        if c in ("<" if angle else "([{"):
            depth += 1
        elif c in (">" if angle else ")]}"):
            depth -= 1
            if depth == 0:
                return m.end()
    return None


def tolerant(text: str) -> tuple[str, bool]:
    """`text` with every value that is not a Python literal replaced by one: `<…>` reprs and
    other calls and names by their text (a string), `DictConfig(…)`/`ListConfig(…)` and numpy
    scalars by their content, `…Path('p')` by `'p'`. (text, truncated): when such a value never
    closes, the text stops before it."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        m = _TOK.match(text, i)
        kind, tok = m.lastgroup, m.group()
        if kind == "n" and tok not in _KEEP:
            j = i + len(tok)
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "(":
                end = _match(text, j)
                if end is None:
                    return "".join(out), True
                inner = re.sub(r"^\s*content\s*=", "", text[j + 1:end - 1])
                last = tok.rsplit(".", 1)[-1]
                if last in _UNWRAP or _NUMPY.match(tok):
                    sub, cut = tolerant(inner)
                    out.append(f"({sub})")
                elif last.endswith("Path") and (s := _TOK.fullmatch(inner.strip())) and s.lastgroup == "s":
                    out.append(inner.strip())
                else:
                    out.append(repr(re.sub(r"\s*\n\s*", " ", text[i:end])))
                i = end
                continue
            out.append(repr(tok))  # a bare name: `torch.bfloat16`, `MyEnum.X`
            i += len(tok)
            continue
        if kind == "o" and tok == "<":
            end = _match(text, i)
            if end is None:
                return "".join(out), True
            out.append(repr(re.sub(r"\s*\n\s*", " ", text[i:end])))
            i = end
            continue
        out.append(tok)
        i = m.end()
    return "".join(out), False


def recover(text: str, whole: bool) -> tuple[dict | None, int]:
    """(the dict `text` holds up to its last complete item, with its open brackets closed; the
    number of lines kept), or (None, 0). `whole`: the text's last line was read to its newline,
    so its end is a cut point too when it ends as a complete pprint line does (`,` or a closer;
    the console may have cut the line itself: `'key': Non`)."""
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (cut before, the closers then)
    closers = lambda: "".join(_PAIRS[c] for c in reversed(stack))  # noqa: E731
    ended = True
    for m in _TOK.finditer(text):
        if m.lastgroup != "o":
            continue
        c = m.group()
        if c in _PAIRS:
            stack.append(c)
        elif c in ")]}":
            if not stack or _PAIRS[stack[-1]] != c:
                ended = False
                break
            stack.pop()
            cuts.append((m.end(), closers()))
            if not stack:
                ended = False
                break
        elif c == ",":
            cuts.append((m.start(), closers()))
        elif c in "'\"":  # a string literal cut off
            ended = False
            break
    if whole and ended and text.rstrip().endswith((",", "}", "]", ")")):  # pprint ends a complete line so
        cuts.append((len(text), closers()))
    for cut, close in reversed(cuts[-_TRIES:]):
        try:
            value = literal(text[:cut].rstrip().rstrip(",") + close)
        except _PARSE_ERRORS:
            continue
        if isinstance(value, dict) and value:
            return value, text.count("\n", 0, cut) + 1
    return None, 0


def _jsonable(value):
    """A literal as JSON-able data (the Config page renders JSON): tuples and sets as lists,
    bytes, complex numbers, Ellipsis and odd keys as text."""
    if isinstance(value, dict):
        return {k if isinstance(k, (str, int, float, bool)) or k is None else repr(k): _jsonable(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [_jsonable(v) for v in sorted(value, key=repr)]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is Ellipsis:
        return "..."
    if isinstance(value, complex):
        return repr(value)
    return value


# Reading a log ----------------------------------------------------------------------------------
def config_at(path: str, offset: int) -> ConfigPrint | None:
    """The config print at `offset` of the log; `offset == HEAD`: its launch command's
    overrides (`head_config_at`)."""
    if offset == HEAD:
        return head_config_at(path)
    return config_print(read_range(path, offset, offset + CONFIG_MAX_BYTES), offset)


def head_config_at(path: str) -> ConfigPrint | None:
    """The overrides and shell variables of the launch commands in the log's first HEAD_BYTES
    (kind "overrides"); None when there are none."""
    data = read_range(path, 0, HEAD_BYTES)
    return overrides_print(head_config(data, 0, complete=len(data) < HEAD_BYTES))


def overrides_print(head: HeadConfig) -> ConfigPrint | None:
    if not head:
        return None
    return ConfigPrint(head.overrides, None, head.offset, kind="overrides", raw="\n".join(head.commands) or None,
                       variables=dict(head.variables))
