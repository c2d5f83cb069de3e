"""Regex search over config files: prune a JSON value to the subtrees that match.

A key that matches keeps its whole value; a scalar that matches keeps itself; containers keep only
children with a match. The count is the number of hits in what is kept (keys and scalars), as a
highlighter would show them. Secrets are hidden before the search runs, so it cannot find them.

The user's pattern runs on RE2 (`user_regex`): linear time whatever it is, so a search cannot
freeze the shared server.
"""
from __future__ import annotations

import json

from .redact import redact
from .user_regex import UserPattern, compile_user_pattern

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
    """Text to show (secrets hidden), its language and the hit count for one config file under a
    search."""
    value = redact(value)
    text, lang = render(value)
    if pattern is None:
        return text, lang, 0
    if isinstance(value, (dict, list)):
        pruned, hits = prune(value, pattern)
        return ("" if pruned is MISSING else render(pruned)[0]), lang, hits
    shown, hits = filter_text(text, pattern)
    return shown, lang, hits


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
