"""Hiding secrets (API keys, tokens, passwords) in config values before they are shown.

Configs are untrusted, shared text: a launch command or a resolved config may carry a key. The
dashboard shows `[hidden]` in its place, for keys whose name says "secret" and for values that
look like a known credential format, wherever they are.
"""
from __future__ import annotations

import re

HIDDEN = "[hidden]"
SECRET_KEY = re.compile(
    r"(^|[_\-.])(api_?key|apikey|secret|secret_?key|password|passwd|token|access_?token|auth_?token|"
    r"hf_?token|credentials?|private_?key)$", re.IGNORECASE)
SECRET_VALUE = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"xox[abpr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16})")
# `--api-key X`, `--wandb.api_key=X`, `OPENAI_API_KEY=X`, `"token": "X"` in text files
SECRET_ASSIGN = re.compile(
    r"(?P<name>[\w.\-]*(?:api[_\-]?key|secret|password|passwd|token)[\"']?)(?P<sep>\s*[=:]\s*|\s+)"
    r"(?P<q>[\"']?)(?P<value>[^\s\"',}]+)", re.IGNORECASE)


def redact(value):
    """A copy of a parsed config (dict/list/scalars) or text with secrets replaced."""
    if isinstance(value, dict):
        return {k: (HIDDEN if _secret_name(k) and v not in (None, "") and not isinstance(v, (dict, list))
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_text(text: str) -> str:
    text = SECRET_VALUE.sub(HIDDEN, text)
    return SECRET_ASSIGN.sub(lambda m: m.group("name") + m.group("sep") + m.group("q") + HIDDEN
                             if not m.group("name").lower().rstrip("\"'").endswith("tokens") else m.group(0), text)


def _secret_name(key) -> bool:
    return isinstance(key, str) and bool(SECRET_KEY.search(key))
