"""Hiding secrets (API keys, tokens, passwords) in configs and free text: ONE rule for every page.

Configs are untrusted, shared text. The dashboard shows HIDDEN (`[hidden]`) in place of a secret on
every page, in the Compare diff and group-by choices, CSV downloads, `run.config()`/`run.configs()`
and text given to AI analysis. API (there is no "reveal"):
    redact(value)        a copy of a parsed config (dicts/lists/scalars) with secrets hidden; a str is
                         free text (redact_text). The argument is not changed.
    redact_text(text)    free text (command lines, TOML/YAML/JSON text, logs) with secrets hidden.
    is_secret_name(name) whether a key, flag, env var, header or dotted path names a secret.

Which NAMES and value shapes are secret: `rundash_core.safety.secret_shapes` (its docstring has the rules);
this module finds them in text and hides them; how far a value of several lines reaches (YAML blocks,
TOML tables, brackets): `secret_blocks`; the text as a reader sees it (ANSI, escapes, shell quotes),
which is what is scanned: `reader_view`.

Under a secret name the whole value is hidden: a scalar becomes HIDDEN, a list or dict keeps its
shape with every leaf hidden (`secrets: {a: 1}` -> `{a: HIDDEN}`); None, "" and booleans stay (they
carry no secret and show that nothing is set).

VALUES are hidden by shape anywhere (issuers' shapes: `secret_shapes.VALUE_SHAPE`), the token after
`Bearer`, PEM `PRIVATE KEY` blocks, the
password of `scheme://user:password@host`; a 40-hex string (W&B key) as a whole value or line (not
under or after a commit/sha/hash name) or near a secret name or wandb/login/aws on its line; a
40-character AWS-style secret near such words. In TEXT, what follows a secret name is hidden: flags
(`--token X`, `--token=X`, `--openai-api-key X`), assignments (`HF_TOKEN=X`, `api_key = "X"`,
`"password": "X"`, `password: X`), headers (`Authorization: Bearer X`), whole TOML tables
(`[secrets]`), YAML blocks, JSON/TOML arrays and tables; prose (`the password is X`), name/value
pairs (`{"key": "Authorization", "value": X}`, k8s `- name: API_KEY` / `value: X`, also in parsed
configs, and args lists `["--api-key", X]`), tab/table/full-width separators, command-line
passwords (`sshpass -p X`, `mysql -pX`). ANSI colour codes are looked through. A hidden block of
lines stays as many lines (each line's content becomes HIDDEN), so callers may split it again.

Linear time: one scan for literal words (key, tok, pass, auth, sk-, ...) over a lower-cased copy
finds candidates; each is examined by anchored, possessive patterns over bounded windows, and the
scan resumes after what it consumed (no region is scanned more than a bounded number of times).
"""
from __future__ import annotations

import re

from rundash_core.safety import reader_view
from rundash_core.safety.secret_blocks import bracket_end, toml_table, yaml_block
from rundash_core.safety.secret_shapes import (  # noqa: F401 (API)
    AMBIGUOUS,
    CMD_PASSWORD,
    HEX40,
    PEM_BEGIN,
    PEM_END,
    PLAIN,
    SECRET,
    SHAPE_PREFIXES,
    VALUE_SHAPE,
    aws_shaped,
    is_commitish_name,
    is_secret_name,
    literal_trie,
    looks_credential,
    name_kind,
    name_words,
)

HIDDEN = "[hidden]"


def _hide(value):
    """Every leaf of a value under a secret name (None, "" and booleans carry nothing and stay)."""
    if value is None or isinstance(value, bool) or (isinstance(value, str) and not value):
        return value
    if isinstance(value, dict):
        return {_key(k): _hide(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_hide(v) for v in value]
    return HIDDEN


def _names_next(prev) -> bool:
    return isinstance(prev, str) and prev.startswith("-") and "=" not in prev and name_kind(prev) == SECRET


def _key(k):
    return redact_text(k) if isinstance(k, str) else k


def redact(value):
    """A copy of a parsed config (dict/list/scalars) or text with secrets replaced by HIDDEN. A
    value nested too deeply to check is hidden whole (never shown unchecked)."""
    try:
        return _redact(value, None, False)
    except RecursionError:
        return f"{HIDDEN} (nested too deeply to check for secrets)"


def _pair_keys(d: dict):
    """(label key, value key) of a name/value pair naming a secret (`{"name": "API_KEY", "value": X}`,
    `{"key": "Authorization", "value": X}`), else (None, None)."""
    vk = "value" if "value" in d else "Value" if "Value" in d else None
    for k, v in d.items() if vk is not None else ():
        if isinstance(k, str) and k.lower() in _LABELS and isinstance(v, str) and name_kind(v) == SECRET:
            return k, vk
    return None, None


_LABELS = ("name", "key", "header", "field")


def _redact(value, name, aws: bool):
    if isinstance(value, dict):
        out, (label, vk) = {}, _pair_keys(value)
        for k, v in value.items():
            kind = name_kind(k) if isinstance(k, str) else PLAIN
            nk = _key(k)
            if nk in out:  # two keys whose names were hidden
                nk = f"{nk} #{len(out)}"
            if label is not None and k in (label, vk):
                out[nk] = v if k == label else _hide(v)
                continue
            out[nk] = _hide(v) if kind == SECRET else _redact(v, k, aws or "aws" in name_words(str(k)))
        return out
    if isinstance(value, (list, tuple)):  # an args list: `["--api-key", X]` hides X
        flags = [i + 1 for i, v in enumerate(value) if type(v) is str and v[:1] == "-" and _names_next(v)]
        out = [_redact(v, name, aws) for v in value]
        for i in flags:
            if i < len(out):
                out[i] = _hide(value[i])
        return out
    if isinstance(value, str):
        if name is not None and name_kind(name) == AMBIGUOUS and looks_credential(value):
            return HIDDEN
        if HEX40.fullmatch(value):  # a W&B key, unless the name says it is a commit or a digest
            commitish = name is not None and is_commitish_name(name)
            return value if commitish else HIDDEN
        if aws and aws_shaped(value):
            return HIDDEN
        return redact_text(value)
    return value


# text -----------------------------------------------------------------------------------------------
# One scan of the lower-cased text finds candidates: a word that may make a name secret, a known value
# prefix, or a word that makes a line secret-ish; each match runs on to the end of its name. (A flat
# alternation of literals: `re` then skips positions whose character starts none of them.)
_CTX_WORDS = ("wandb", "login", "aws", "akia", "asia")
_CJK = ("密码", "密钥", "令牌")  # password, secret key, token (Chinese model outputs and logs)
_SPECIAL_FIRST = frozenset(w[0] for w in ("-", *_CTX_WORDS, *SHAPE_PREFIXES))

_CAND = re.compile(literal_trie({"-----begin", *SHAPE_PREFIXES, *_CTX_WORDS, *_CJK, "key", "tok", "secret", "pass", "pwd",
                          "cred", "auth", "cookie", "session"}) + r"[a-z0-9_.\-]*+")
_B64CH = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/")
_RUN = re.compile(r"[a-z0-9_.\-]*+")  # a name, backwards in the reversed lower-cased text
_NAMECH = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_SEP = re.compile(r"[\"']?\]?[ \t]*+(?:(?P<eq>=)(?!=)|(?P<colon>[:：])(?!//|:))[ \t]*+|(?P<tab>\t++)|"
                  r"(?P<cell>[ \t]*+\|[ \t]*+)(?=[^\s|])")  # `name<TAB>value`, a Markdown table's `| name | value |`
_FLAG_SEP = re.compile(r"[ \t]*+=[ \t]*+|(?:[ \t]|\\\r?\n)++(?=[^\s=\\-])")
_PROSE = re.compile(r"[ \t]++(?:is|was|to|(?:is|was)[ \t]++set[ \t]++to)[ \t]++[\"'`]?(?P<v>[^\s\"'`]{6,200}+)")
_PAIR_LABEL = re.compile(r"(?i:name|key|header|field)[\"']?[ \t]*+[:=][ \t]*+[\"']?\Z")
_PAIR_VALUE = re.compile(r"(?<![\w-])(?i:value)(?=[\"']?[ \t]*+[:=])")
_IDENT = re.compile(r"[A-Za-z_][\w.\-]{0,63}")
_QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.)*+\"?|'[^'\n]*+'?")
_BARE_EQ = re.compile(r"[^\s\"',;&}\])]*+")
_BARE_COLON = re.compile(r"[^\n\"'}\],]*+")
_BARE_CELL = re.compile(r"[^\n\t|\"'}\],]*+")
_CRED_VALUE = re.compile(r"[\"']?(?P<v>[A-Za-z0-9_\-+/.]{16,512}+={0,2})[\"']?(?![A-Za-z0-9_\-+/=.])")
_CTX_RUN = re.compile(r"(?<![A-Za-z0-9/+])(?:[0-9a-fA-F]{40}|[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")
_HEX_LINE = re.compile(r"\n[ \t\"']*+(?P<v>[0-9a-fA-F]{40})[ \t\"',\r]*+(?=\n|\Z)")  # a line that is only a hex key
_HEX_FIRST = re.compile(_HEX_LINE.pattern[2:])
_URL_CREDENTIAL = re.compile(r"://[^\s/:@'\"]*+:(?P<v>[^\s/@'\"]++)@")  # scheme://user:password@host
_COMMIT_BEFORE = re.compile(r"(?i:commit|sha|hash|revision|digest|checksum)[^\n]*+\Z")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_EMPTY = frozenset(("", "null", "none", "true", "false", "~", '""', "''"))
_WINDOW = 256  # how far around a secret-ish word its "line" context reaches


def redact_text(text: str) -> str:
    """Free text (command lines, TOML/YAML/JSON text, logs) with secrets replaced by HIDDEN; each hidden
    line stays a line (the text keeps its newlines). ANSI colour codes are looked through."""
    if not isinstance(text, str):
        text = str(text)
    views, seen = [], text  # scanned once, as it is read: escapes read up to 3 levels deep (a tool
    while len(views) < 3 and reader_view.might_differ(seen) and (v := reader_view.read(seen)):  # call's
        views.append(v)  # JSON arguments inside a JSON record inside a log line)
        seen = v.text
    spans = _spans(seen)
    for v in reversed(views):
        spans = v.back(spans)
    return _apply(text, spans)


def _spans(text: str) -> list[tuple[int, int]]:
    low = text.lower()
    if len(low) != len(text):  # a few characters lower-case to two (e.g. U+0130)
        low = _NON_ASCII.sub("?", text).lower()
    spans = _Spans()
    n, pos, ctx_until, rev = len(text), 0, 0, None
    while (m := _CAND.search(low, pos)) is not None:
        (p, end), floor = m.span(), pos
        pos, word = end, low[p:end]
        what = None if word[0] not in _SPECIAL_FIRST else "pem" if word[0] == "-" else "ctx" if word.startswith(
            _CTX_WORDS) else "shape" if word.startswith(SHAPE_PREFIXES) else None
        if what == "pem":
            if (b := PEM_BEGIN.match(text, p)) is not None:
                e, q = None, text.find("-----END ", b.end())
                while q >= 0 and (e := PEM_END.match(text, q)) is None:
                    q = text.find("-----END ", q + 1)
                spans.append((b.end(), q if e else n))  # (each line of the body hidden, see _apply)
                pos = e.end() if e else n
            continue
        if what and (p == 0 or not text[p - 1].isalnum()) and (s := VALUE_SHAPE.match(text, p)) is not None:
            spans.append(s.span("v") if s.group("v") else s.span("b"))
            pos = max(end, s.end())
            if what == "ctx" and p >= ctx_until - _WINDOW // 2:
                ctx_until = _context(text, p, ctx_until, spans)
            continue
        start = p
        if p > floor and low[p - 1] in _NAMECH:  # the name starts before the word (at most 128 back)
            if rev is None:
                rev = low[::-1]
            start = p - (_RUN.match(rev, n - p, n - floor if p - floor < 128 else n - p + 128).end() - (n - p))
        kind = name_kind(text[start:end]) if end - start <= 256 and not _is_file_name(text, start, end) else PLAIN
        if word[0] in "密令":
            kind = SECRET
        if kind == SECRET and start > 4 and ("=" in text[start - 4:start] or ":" in text[start - 4:start]) and \
                _PAIR_LABEL.search(text, max(0, start - 24), start):  # `"name": "API_KEY", "value": X`
            pos = max(pos, _pair(text, end, spans) or end)
        elif kind != PLAIN:
            pos = _value(text, start, end, kind, spans)
        # a secret name without a value of its own (`wandb login KEY`, `password KEY`) or wandb/aws: look
        # for a 40-character key on its line
        if ((kind == SECRET and pos == end) or what == "ctx") and p >= ctx_until - _WINDOW // 2:
            ctx_until = _context(text, p, ctx_until, spans)
    if (h := _HEX_FIRST.match(text)) is not None:
        spans.append(h.span("v"))
    spans.extend(u.span("v") for u in _URL_CREDENTIAL.finditer(text))
    spans.extend(c.span("v") for c in CMD_PASSWORD.finditer(text) if not c.group("v").isdigit())
    spans.extend(h.span("v") for h in _HEX_LINE.finditer(text)  # a hex alone on its line, but not after `commit:`
                 if not _COMMIT_BEFORE.search(text, max(0, h.start() - 40), h.start()))
    return spans


class _Spans(list):
    """The hidden (start, end) spans, where the last value hidden to its line's end stops, and where the
    last YAML block and TOML table hidden end."""
    eol = block = table = -1


_TOKEN = re.compile(r"[^\s]*+")


def _pair(text: str, end: int, spans: list) -> int | None:
    """A secret name given as the label of a name/value pair (`{"key": "Authorization", "value": X}`,
    k8s `- name: API_KEY` / `value: X`): hide the `value` that follows within a few lines (None: none)."""
    m = _PAIR_VALUE.search(text, end, end + 256)
    return _value(text, m.start(), m.end(), SECRET, spans) if m else None


_FILE_SUFFIX = re.compile(r"\.(?:py|pyi|pyx|json|jsonl|toml|ya?ml|txt|log|md|sh|cfg|ini|js|ts|rs|go|cc?|h|cpp|java)\Z")


def _is_file_name(text: str, start: int, end: int) -> bool:
    """A path component or a file name (`/testbed/requests/sessions.py:914:` in a traceback or a tool
    result), not a setting: what follows its colon is a line number or a listing, not a secret."""
    return (start > 0 and text[start - 1] in "/\\") or _FILE_SUFFIX.search(text, start, end) is not None


def _context(text: str, p: int, done: int, spans: list) -> int:
    """Hide 40-hex and AWS-style 40-character runs on the line around a secret-ish word at p (within
    _WINDOW characters, from `done` on); returns where this scan stopped."""
    lo, le = max(0, p - _WINDOW), text.find("\n", p, p + _WINDOW)
    a, b = max(text.rfind("\n", lo, p) + 1 or lo, done), (le if le >= 0 else min(len(text), p + _WINDOW))
    stop = min(len(text), b + 64)
    while b < stop and text[b] in _B64CH:  # do not cut a run at the window's end
        b += 1
    for r in _CTX_RUN.finditer(text, a, b):
        if not r.group().strip("0123456789abcdefABCDEF") or aws_shaped(r.group()):
            spans.append(r.span())
    return b


def _value(text: str, start: int, end: int, kind: int, spans: list) -> int:
    """Hide what follows a secret (or ambiguous) name at text[start:end]; returns where the scan
    resumes: after a hidden value, else at the value (which is then scanned like any text)."""
    n, name = len(text), text[start:end]
    if kind == SECRET and text[start - 1:start] == "[" and text.startswith("]", end):
        alone = text[text.rfind("\n", max(0, start - 64), start) + 1:start].strip() in ("[", "[[")
        if alone or text.startswith(("]\n", "]]\n"), end):  # a line `[secrets]` / `[[api_keys]]` (or a log's)
            if not alone and end < spans.table:  # a `[secret]` value inside a table already hidden
                return end  # (walking it again from each such line would be quadratic)
            resume, spans.table = toml_table(text, end, spans, strict=not alone)
            return resume
    if kind == SECRET and (prose := _PROSE.match(text, end)) is not None:  # `the password is X`
        v = prose.group("v").rstrip(".,;:!?)")
        if any(ch.isdigit() for ch in v) and any(ch.isalpha() for ch in v) or looks_credential(v):
            spans.append((prose.start("v"), prose.start("v") + len(v)))
            return prose.end()
    flag = name.startswith("-") or (name.lower() in ("password", "passwd") and  # netrc: `password X`, not prose
                                     _netrc_value(text, end))
    sep = (_FLAG_SEP.match(text, end) if flag else None) or _SEP.match(text, end)
    if sep is None:
        return end
    colon = sep.re is _SEP and sep.lastgroup in ("colon", "tab", "cell")
    v = sep.end()
    if v >= n:
        return v
    c = text[v]
    if kind == AMBIGUOUS:  # `sort_key = X`: hide X only if it looks like a credential
        cred = _CRED_VALUE.match(text, v)
        if cred is not None and looks_credential(cred.group("v")):
            spans.append(cred.span("v"))
            return cred.end()
        return v
    if c in "[{":
        close = bracket_end(text, v)
        spans.append((v, close))
        return close
    if c in "\r\n#|>" and colon:  # a YAML block: `secrets:` / `key: |` then indented lines
        if v >= spans.block:  # (its lines are scanned as text too: a line continued after a prefix may
            spans.block = yaml_block(text, start, v, spans)  # hold a `[secrets]` table; a block inside
        return v  # a block already hidden is not walked again: linear)
    if text.startswith('"""', v) or text.startswith("'''", v):
        close = text.find(text[v:v + 3], v + 3)
        a, b = v + 3, (close if close >= 0 else n)
        resume = a  # (its lines are scanned too: the quotes that close it may open another's)
    elif c in "\"'":
        q = _QUOTED.match(text, v)
        a, b, resume = v + 1, q.end() - (q.end() - v > 1 and text[q.end() - 1] == c), q.end()
    else:
        if colon and v < spans.eol:  # inside a value already hidden to its line's end: its words are
            return v  # still scanned (`Key: OPENAI_API_KEY` names the `Value:` on the next line)
        cell = sep.re is _SEP and sep.lastgroup in ("tab", "cell")  # (one cell: not the rest of the line)
        bare = (_BARE_CELL if cell else _BARE_COLON if colon else _BARE_EQ).match(text, v)
        a, b = v, bare.end()
        while b > a and text[b - 1] in " \t\r":
            b -= 1
        resume = bare.end()
        if colon:  # hidden to the line's end, but names after its first word are still looked at, once
            resume = _TOKEN.match(text, v).end()
    value = text[a:b]
    if value.strip().lower() in _EMPTY:
        return a
    if sep.re is _SEP and sep.lastgroup in ("tab", "cell"):  # one cell: what follows it is not hidden
        b = a + len(value.split("\t")[0].split("|")[0].rstrip())
    elif colon and c not in "\"'":  # (a value hidden to its line's end)
        spans.eol = b
    if name.strip("\"'").lower() == "key" and _IDENT.fullmatch(value) and name_kind(value) != PLAIN and \
            (pair := _pair(text, b, spans)) is not None:
        return pair  # `"key": "Authorization", "value": X`: the label stays
    spans.append((a, b))
    pem = text.find("-----BEGIN ", a, b)  # a key whose lines go on past this value: hide it whole
    return resume if pem < 0 else pem


def _netrc_value(text: str, end: int) -> bool:
    w = _TOKEN.match(text, min(len(text), end + 1)).group()
    return not w.isalpha() or len(w) >= 16


def _apply(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if a < b:
            if merged and a <= merged[-1][1]:  # overlaps the previous hidden span: extend that one
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
    out, last = [], 0
    for a, b in merged:
        out.append(text[last:a])
        part = text[a:b]  # each line keeps its place: a block of lines split again has as many lines
        out.append(HIDDEN if "\n" not in part else "\n".join(HIDDEN if x.strip() else x for x in part.split("\n")))
        last = b
    out.append(text[last:])
    return "".join(out)
