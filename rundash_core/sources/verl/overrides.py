"""The launch command of a verl run, from the head of its console log: Hydra overrides and shell
variables (spec 4, "noise a reader must tolerate": shell traces, free-text preambles).

Many logs print no resolved config (or one cut off), but they do show how the run was launched:

- a `set -x` trace of the launch script: `++ python3 -m verl.trainer.main_ppo a.b=1 'c.d=[x,y]' …`,
  `+ torchrun … -m verl.trainer.fsdp_sft_trainer +data.k=v …`, `++ train_files=…`;
- a markdown-like preamble: `command:` then a (```` ``` ````-fenced) command line, possibly split
  with backslash continuations, or `bash run.sh "a.b=1 c.d=2"` (overrides in one quoted argument);
- shell assignments: `export MODEL_PATH=…`, `MODEL_PATH=…`.

`head_config(data)` turns the overrides of the launch commands into one nested dict
(`a.b.c=v` → `{a: {b: {c: v}}}`, later ones win, `+`/`++` dropped) with Hydra-typed values
(int, float, bool, null, `[…]` lists, `{…}` dicts, quotes stripped, else strings), `$VAR` /
`${VAR}` / `${oc.env:VAR}` resolved from the shell variables found in the same head.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from rundash_core.sources.verl.grammar import clean_piece

HEAD_BYTES = 64 << 10  # the launch commands are looked for in this much of the log's head

# Lines worth tokenizing (two literal-led scans): a dotted `key=` (`.b=` of `a.b=`, its key checked
# back from the dot), or a line that starts with an assignment (`NAME=`, `export NAME=`, `+ NAME=`).
_DOT_EQ = re.compile(rb"\.[\w\-@.]*=")
_ASSIGN = rb"[ \t]*(?:\++[ \t]+|\$[ \t]+)?(?:export[ \t]+|declare[ \t]+-x[ \t]+)?[A-Za-z_]\w*="
_ASSIGN_LINE = re.compile(rb"\n" + _ASSIGN)
_ASSIGN_FIRST = re.compile(_ASSIGN)
_KEY_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-@")
_OVERRIDE = re.compile(r"^(?P<op>\+\+|\+|~)?(?P<key>[A-Za-z_][\w\-@/]*(?:\.[\w\-@/]+)*)=(?P<value>.*)$", re.S)
_VAR = re.compile(r"^(?P<key>[A-Za-z_]\w*)=(?P<value>.*)$", re.S)
_LAUNCHER = re.compile(r"^(?:python[\d.]*|torchrun|bash|sh|zsh|ray|deepspeed|accelerate|srun|mpirun|nohup|uv|env|"
                       r"exec|timeout|stdbuf|time|sudo|verl)$")
_STOP = {"|", "||", "&&", ";", "&", "2>&1", "|&"}
_EXPAND = re.compile(r"\$\{oc\.env:([A-Za-z_]\w*)(?:,([^}]*))?\}"  # Hydra's env resolver
                     r"|\$\{([A-Za-z_]\w*)(?::?[-=]([^}]*))?\}|\$([A-Za-z_]\w*)")
_INT = re.compile(r"^[-+]?\d[\d_]*$")
_FLOAT = re.compile(r"^[-+]?(?:(?:\d[\d_]*)?\.\d+|\d[\d_]*\.?)(?:[eE][-+]?\d+)?$|^[-+]?(?:inf|nan)$", re.I)
# Model paths in the order the run card prefers them (as `verl_ends.head_fields`).
MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "model.partial_pretrain", "model.path")
_MODEL_VAR = re.compile(r"^(?:BASE_|ACTOR_|POLICY_|HF_|PRETRAINED_|INIT_)?MODEL(?:_PATH|_NAME|_DIR|_ID)?$", re.I)


@dataclass
class HeadConfig:
    overrides: dict = field(default_factory=dict)  # nested, from the launch commands' `key=value`
    variables: dict = field(default_factory=dict)  # shell variables: NAME -> value (text)
    commands: list = field(default_factory=list)  # the launch command lines, as found
    offset: int | None = None  # byte offset of the first line used

    def __bool__(self) -> bool:
        return bool(self.overrides or self.variables)

    def get(self, dotted: str):
        node = self.overrides
        for k in dotted.split("."):
            if not isinstance(node, dict) or k not in node:
                return None
            node = node[k]
        return node

    def models(self) -> list[str]:
        """Model paths the overrides name (MODEL_KEYS order), else a `MODEL_PATH`-like variable."""
        out = [v for k in MODEL_KEYS if isinstance(v := self.get(k), str) and v and not v.startswith("$")]
        out += [v for k, v in self.variables.items() if _MODEL_VAR.match(k) and v and not v.startswith("$")]
        return out

    @property
    def sft(self) -> bool:
        return self.get("model.partial_pretrain") is not None or any("sft_trainer" in c for c in self.commands)


def _hint(data: bytes, lo: int, top: int) -> int:
    """The first offset in `data[lo:top]` of what makes a line worth tokenizing (-1: none)."""
    found = top
    if lo == 0 and _ASSIGN_FIRST.match(data, 0, top):
        return 0
    m = _ASSIGN_LINE.search(data, max(lo - 1, 0), top)
    if m is not None:
        found = m.start() + 1
    for m in _DOT_EQ.finditer(data, lo, found):
        j = m.start()
        while j > 0 and data[j - 1] in _KEY_CHARS:
            j -= 1
        k = j
        while k > 0 and j - k < 2 and data[k - 1] == 43:  # `+key=` / `++key=`
            k -= 1
        if j < m.start() and not data[j:j + 1].isdigit() and (k == 0 or data[k - 1] in b" \t'\"\n"):
            found = min(found, k)
            break
    return found if found < top else -1


def _lines(data: bytes, complete: bool):
    """(offset, bytes) of each line worth tokenizing (`_hint`), backslash continuations joined;
    the last line is dropped when `data` may end inside it (`complete` false)."""
    out, lo = [], 0
    top = len(data) if complete else data.rfind(b"\n") + 1
    while (hint := _hint(data, lo, top)) >= 0:
        start = data.rfind(b"\n", 0, hint) + 1
        while start > 1 and _continued(data, start - 1):  # the line continues the one before
            start = data.rfind(b"\n", 0, start - 1) + 1
        lines, end = [], start
        while True:
            nl = data.find(b"\n", end, top)
            stop = top if nl < 0 else nl
            line = data[end:stop].rstrip(b"\r")
            end = stop + 1
            if not line.endswith(b"\\") or nl < 0:
                lines.append(line)
                break
            lines.append(line[:-1])
        lo = end
        out.append((start, b" ".join(lines)))
    return out


def _continued(data: bytes, nl: int) -> bool:
    """The line ending at the newline `data[nl]` ends with a backslash."""
    end = nl - 1 if data[nl - 1:nl] == b"\r" else nl
    return data[end - 1:end] == b"\\"


_WORD = re.compile(r"""(?:[^\s'"\\]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.?)+""", re.S)
_PIECE = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.?)|([^'"\\]+)""", re.S)


def _split(text: str) -> list[str]:
    """Shell words (quotes removed, `#` comments dropped); an unbalanced quote is a character."""
    out = []
    for w in _WORD.finditer(text):
        word = w.group()
        if word.startswith("#"):
            break
        if "'" in word or '"' in word or "\\" in word:
            word = "".join(p[1] if p[1] is not None else re.sub(r'\\([$`"\\])', r"\1", p[2]) if p[2] is not None
                           else p[3] if p[3] is not None else p[4] for p in _PIECE.finditer(word))
        out.append(word)
    return out


def _body(line: bytes) -> str:
    text = line.decode("utf-8", "replace").replace("\x00", "")
    text = clean_piece(text.rsplit("\r", 1)[-1])[1].strip()
    return re.sub(r"^(?:\++\s+|\$\s+|>\s+)", "", text)


def head_config(data: bytes, base: int = 0, complete: bool = True) -> HeadConfig:
    """The overrides and shell variables of the launch commands in `data` (a log's head, at file
    offset `base`); empty when it has none."""
    out = HeadConfig()
    pairs: list[tuple[str, str]] = []
    for at, line in _lines(data, complete):
        text = _body(line)
        if not text or text.startswith(("#", "```")):
            continue
        tokens = _split(text)
        found = _command(tokens, out.variables)
        if found is None:
            continue
        if out.offset is None:
            out.offset = base + at
        if found:
            out.commands.append(text)
            pairs += found
    for key, value in pairs:
        _put(out.overrides, key.split("."), parse_value(expand(value, out.variables)))
    for k, v in out.variables.items():
        out.variables[k] = expand(v, out.variables)
    return out


def _command(tokens: list[str], variables: dict) -> list[tuple[str, str]] | None:
    """The (key, value) overrides of one launch command (shell assignments go to `variables`);
    None when the line is neither a command with overrides nor assignments."""
    if not tokens:
        return None
    i = 0
    if tokens[0] in ("export", "declare", "typeset", "readonly", "local"):
        i = 1
        while i < len(tokens) and tokens[i].startswith("-"):
            i += 1
        got = [m for t in tokens[i:] if (m := _VAR.match(t))]
        variables.update((m["key"], m["value"]) for m in got)
        return [] if got else None
    assigned = []
    while i < len(tokens) and (m := _VAR.match(tokens[i])):  # `NAME=v cmd …` or a bare assignment
        assigned.append(m)
        i += 1
    rest = []
    for t in tokens[i:]:
        if t in _STOP or t.startswith((">", "1>", "2>")):
            break
        parts = t.split()
        if len(parts) > 1 and all(_is_override(p) for p in parts):  # `run.sh "a.b=1 c.d=2"`
            rest += parts
        else:
            rest.append(t)
    if not rest:
        variables.update((m["key"], m["value"]) for m in assigned)
        return [] if assigned else None
    overs = [m for t in rest if (m := _is_override(t))]
    word = rest[0].rsplit("/", 1)[-1]
    launched = (_LAUNCHER.match(word) or word.endswith((".sh", ".py"))
                or any(t.startswith("verl.") for t in rest) or len(overs) == len(rest))
    if not overs or not launched:
        return None
    variables.update((m["key"], m["value"]) for m in assigned)
    return [(m["key"], m["value"]) for m in overs if m["op"] != "~"]


def _is_override(token: str):
    m = _OVERRIDE.match(token)
    return m if m is not None and ("." in m["key"] or m["op"]) else None


def _put(tree: dict, keys: list[str], value) -> None:
    node = tree
    for k in keys[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    node[keys[-1]] = value


def expand(text: str, variables: dict, depth: int = 0) -> str:
    """`$VAR`, `${VAR}`, `${VAR:-default}` and `${oc.env:VAR[,default]}` from `variables`;
    unknown ones stay as written."""
    if "$" not in text or depth > 4:
        return text

    def one(m):
        name = m.group(1) or m.group(3) or m.group(5)
        default = m.group(2) if m.group(1) else m.group(4)
        if name in variables:
            return expand(variables[name], {k: v for k, v in variables.items() if k != name}, depth + 1)
        return default if default is not None else m.group(0)

    return _EXPAND.sub(one, text)


# Hydra override values -----------------------------------------------------------------------------
def parse_value(text: str):
    """A Hydra override value: `null`, `true`/`false`, ints, floats, `[…]` lists and `{k: v}`
    dicts (nested), quoted strings without their quotes; anything else (or what does not parse)
    is the text itself."""
    text = text.strip()
    if text[:1] in "[{":
        try:
            value, end = _element(text, 0)
            if end == len(text):
                return value
        except (ValueError, IndexError):
            pass
        return text
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return _unquote(text)
    return _primitive(text)


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body) if "\\" in body else body


def _primitive(text: str):
    low = text.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _FLOAT.match(text):
        return float(text.replace("_", ""))
    return text


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _element(text: str, i: int, stops: str = ",]}"):
    """(value, end) of the element starting at `i` (spaces skipped); a bare one ends at a `stops`
    character outside `${…}`."""
    i = _skip(text, i)
    c = text[i]
    if c == "[":
        out, i = [], _skip(text, i + 1)
        if text[i] == "]":
            return out, i + 1
        while True:
            v, i = _element(text, i, ",]")
            out.append(v)
            i = _skip(text, i)
            if text[i] == "]":
                return out, i + 1
            if text[i] != ",":
                raise ValueError("list")
            i += 1
    if c == "{":
        out, i = {}, _skip(text, i + 1)
        if text[i] == "}":
            return out, i + 1
        while True:
            k, i = _element(text, i, ":")
            i = _skip(text, i)
            if text[i] != ":":
                raise ValueError("dict")
            v, i = _element(text, i + 1, ",}")
            out[str(k)] = v
            i = _skip(text, i)
            if text[i] == "}":
                return out, i + 1
            if text[i] != ",":
                raise ValueError("dict")
            i += 1
    if c in "'\"":
        j = i + 1
        while text[j] != c:
            j += 2 if text[j] == "\\" else 1
        return _unquote(text[i:j + 1]), j + 1
    j = i
    while j < len(text) and text[j] not in stops:
        j = text.index("}", j) + 1 if text.startswith("${", j) else j + 1  # an interpolation: whole
    return _primitive(text[i:j].rstrip()), j
