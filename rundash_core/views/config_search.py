"""Regex search over config files: prune a JSON value to the subtrees that match.

A key that matches keeps its whole value; a scalar that matches keeps itself; containers keep only
children with a match. The count is the number of hits in what is kept (keys and scalars), as a
highlighter would show them. The values come from `Run.configs()`, through the one gate: secrets are
hidden before the search runs, so it cannot find them.

The user's pattern runs on RE2 (`user_regex`): linear time whatever it is, so a search cannot
freeze the shared server.
"""
from __future__ import annotations

import json

from rundash_core.safety.user_regex import MAX_INPUT_CHARS, UserPattern, compile_user_pattern

MISSING = object()


def compile_search(text: str) -> tuple[UserPattern | None, str | None]:
    """(pattern, None), or (None, why the regex cannot be used). Empty text means no search. The
    search is case-insensitive."""
    return compile_user_pattern(text, ignore_case=True)


def _scalar_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def count_hits(value, pattern: UserPattern) -> int:
    if isinstance(value, dict):
        return sum(bool(pattern.search(str(k))) + count_hits(v, pattern) for k, v in value.items())
    if isinstance(value, list):
        return sum(count_hits(v, pattern) for v in value)
    return 1 if pattern.search(_scalar_text(value)) else 0


def prune(value, pattern: UserPattern):
    """(pruned value or MISSING, hit count)."""
    if isinstance(value, dict):
        out, hits = {}, 0
        for k, v in value.items():
            if pattern.search(str(k)):
                out[k] = v
                hits += 1 + count_hits(v, pattern)
            else:
                sub, n = prune(v, pattern)
                if n:
                    out[k] = sub
                    hits += n
        return (out, hits) if hits else (MISSING, 0)
    if isinstance(value, list):
        kept = [prune(v, pattern) for v in value]
        hits = sum(n for _, n in kept)
        return ([v for v, n in kept if n], hits) if hits else (MISSING, 0)
    return (value, 1) if pattern.search(_scalar_text(value)) else (MISSING, 0)


def filter_text(text: str, pattern: UserPattern) -> tuple[str, int]:
    """Lines of a text file that match, and the number of hits."""
    lines = [line for line in text.splitlines() if pattern.search(line)]
    return "\n".join(lines), sum(pattern.count(line) for line in lines)


def render(value) -> tuple[str, str]:
    """(text, language) for showing a config value with highlighting."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2, ensure_ascii=False), "json"
    return ("" if value is None else str(value)), "text"


def search_config(value, pattern: UserPattern | None) -> tuple[str, str, int]:
    """Text to show, its language and the hit count for one config file (a gated `Run.configs()`
    value: secrets already hidden) under a search."""
    text, lang = render(value)
    if pattern is None:
        return text, lang, 0
    if isinstance(value, (dict, list)):
        pruned, hits = prune(value, pattern)
        return ("" if pruned is MISSING else render(pruned)[0]), lang, hits
    shown, hits = filter_text(text, pattern)
    return shown, lang, hits


MAX_LINE = 4_000  # characters of one line shown; a longer line is cut around its matches
CONTEXT = 300  # characters kept either side of a match in a cut line
MAX_MATCHES = 200  # matches shown per file (each with its context)
MAX_HIGHLIGHT = 200_000  # characters of a file syntax-highlighted; a longer one is shown plain


def _cut_line(line: str, spans: list[tuple[int, int]]) -> str:
    """A long line as CONTEXT characters around each match (windows merged), or its start."""
    if not spans:
        return line[:MAX_LINE] + " …"
    parts, end = [], 0
    for a, b in spans:
        lo, hi = max(a - CONTEXT, end), min(b + CONTEXT, len(line))
        if lo < hi:
            parts.append(("… " if lo > end or (lo > 0 and not parts) else "") + line[lo:hi])
            end = hi
    return "".join(parts) + (" …" if end < len(line) else "")


def within_budget(text: str, pattern: UserPattern | None) -> tuple[str, list[str]]:
    """`text` cut to what a browser tab can show at once, and notes saying plainly what was cut:
    a 1.2 MB one-line config under a search would otherwise be sent and highlighted whole (the
    tab hangs for minutes). A line over MAX_LINE keeps CONTEXT characters around each match (or
    its first MAX_LINE); at most MAX_MATCHES matches are shown per file."""
    out, cuts, shown, total, more = [], [], 0, 0, ""
    for number, line in enumerate(text.split("\n"), 1):
        spans = pattern.spans(line) if pattern is not None else []  # (those in its first MAX_INPUT_CHARS)
        total += pattern.count(line) if spans else 0
        more = "+" if spans and len(line) > MAX_INPUT_CHARS else more  # a search reads a line's first MAX_INPUT_CHARS
        if spans and shown >= MAX_MATCHES:
            continue
        spans = spans[:MAX_MATCHES - shown]
        shown += len(spans)
        if len(line) > MAX_LINE:
            cuts.append(f"line {number} cut to {CONTEXT} characters around each match of its {len(line):,}"
                        if spans else f"line {number} cut at {MAX_LINE:,} of its {len(line):,} characters")
            line = _cut_line(line, spans)
        out.append(line)
    notes = [f"showing {shown:,} of {total:,}{more} matches"] if total > shown else []
    notes += cuts[:3] + ([f"{len(cuts) - 3} more lines cut"] if len(cuts) > 3 else [])
    return "\n".join(out), notes


def shown_config(name: str, value, pattern: UserPattern | None) -> tuple[str, str, int, list[str]]:
    """What the Config page shows for one file of `Run.configs()`: text (within the budget), its
    highlighting language ("text" past MAX_HIGHLIGHT characters), the hit count and the notes
    saying what was cut."""
    text, lang, hits = search_config(value, pattern)
    text, notes = within_budget(text, pattern)
    lang = lang if lang == "json" else language_for(name)
    if len(text) > MAX_HIGHLIGHT:
        lang = "text"
        notes.append(f"shown without highlighting ({len(text):,} characters)")
    return text, lang, hits, notes


def language_for(name: str) -> str:
    if name.endswith(".json"):
        return "json"
    if name.endswith(".toml"):
        return "toml"
    if name.endswith(".txt") or name.endswith(".sh"):
        return "bash"
    return "text"


MAIN_CONFIGS = ("rl.json", "orchestrator.json", "sft.json", "eval.json", "command.txt")


def opens_by_default(name: str, n_files: int) -> bool:
    """Show the files a researcher reads first (or the only ones there are) expanded."""
    return n_files <= 2 or name.endswith(MAIN_CONFIGS)
