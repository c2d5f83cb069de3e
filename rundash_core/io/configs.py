"""Reading config files (JSON, TOML, plain text) through the shared cache.

A file that cannot be parsed is still returned as its text, with the reason, so the Config page
can show it and the run lists the problem. A file shown altered (bad UTF-8 replaced, NUL bytes
dropped) is parsed but says so too. A huge file is read only as far as it is shown.
"""
from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass

from rundash_core import cache
from rundash_core.io.files import describe_unreadable, file_id, read_range

MAX_CONFIG_BYTES = 16 << 20
MAX_SHOWN_CHARS = 1 << 20  # what is kept of a file that could not be parsed
MAX_DEPTH = 100  # a JSON nested deeper is shown as text: nothing downstream walks 1,000 levels
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")  # JSON may spell a lone half of a pair


@dataclass(frozen=True)
class ConfigFile:
    path: str
    value: object  # dict/list for parsed JSON, dict for TOML, str for text or unparseable files
    error: str | None = None  # why it could not be read or parsed


def dig(obj, *keys):
    """obj[k1][k2]…, or None as soon as a level is missing or not a dict (parsed configs and
    result files are untrusted shapes)."""
    for k in keys:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def load_config_file(path: str) -> ConfigFile:
    fid = file_id(path)
    if fid is None:
        return ConfigFile(path, None, describe_unreadable(path) if os.path.lexists(path) else "missing")
    return cache.shared.get_or_create(("config", os.path.realpath(path), fid), lambda: _parse(path))


def _parse(path: str) -> ConfigFile:
    fid = file_id(path)
    too_big = fid is not None and fid.size > MAX_CONFIG_BYTES
    try:  # one request must not read a huge file whole: only the start that is shown
        data = read_range(path, 0, MAX_SHOWN_CHARS if too_big else MAX_CONFIG_BYTES)
    except OSError as e:
        return ConfigFile(path, None, describe_unreadable(path) or str(e))
    text, altered = _decode(data)
    if too_big:
        return ConfigFile(path, text[:MAX_SHOWN_CHARS], f"larger than {MAX_CONFIG_BYTES >> 20} MiB: only its start "
                                                         "is shown, as text")
    if path.endswith(".json"):
        try:
            value = json.loads(text)
        except (RecursionError, MemoryError):
            return _as_text(path, text, "JSON nested too deeply (or too large) to parse: shown as text")
        except ValueError as e:
            return _as_text(path, text, f"invalid JSON ({e})")
        if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
            return _as_text(path, text, f"JSON nested deeper than {MAX_DEPTH} levels: shown as text")
        if _SURROGATE_ESCAPE.search(text):
            value, lone = _without_lone_surrogates(value)
            if lone:
                altered = "; ".join(filter(None, [altered, f"{lone:,} lone UTF-16 surrogate escapes shown as \ufffd"]))
        return ConfigFile(path, value, altered)
    if path.endswith(".toml"):
        try:
            tomllib.loads(text)
        except ValueError as e:  # TOMLDecodeError, or an integer of more than 4,300 digits
            return _as_text(path, text, f"invalid TOML ({e})")
        except (RecursionError, MemoryError):
            return _as_text(path, text, "TOML nested too deeply (or too large) to parse: shown as text")
    return ConfigFile(path, text, altered)


def _as_text(path: str, text: str, why: str) -> ConfigFile:
    """A file that could not be parsed: its first MAX_SHOWN_CHARS as text (a 15 MiB garbage file
    is not kept, redacted and rendered whole on every view), and why."""
    if len(text) <= MAX_SHOWN_CHARS:
        return ConfigFile(path, text, why)
    return ConfigFile(path, text[:MAX_SHOWN_CHARS], f"{why}; only its first {MAX_SHOWN_CHARS >> 20} MiB is shown")


def _decode(data: bytes) -> tuple[str, str | None]:
    """The text (bad UTF-8 as U+FFFD, NUL bytes dropped) and what was changed on the way: a
    config shown other than it is on disk must say so."""
    changed = []
    if nuls := data.count(b"\0"):
        changed.append(f"{nuls:,} NUL bytes dropped")
        data = data.replace(b"\0", b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        changed.append("bad UTF-8 bytes shown as \ufffd")
    return text, "; ".join(changed) or None


def _deeper_than(value, limit: int) -> bool:
    """Whether lists/dicts nest more than `limit` levels: level by level over the containers
    only (no recursion limit, and a 16 MiB config of numbers costs a few comprehensions)."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(limit):
        level = [c for node in level for c in (node.values() if isinstance(node, dict) else node)
                 if isinstance(c, (dict, list))]
        if not level:
            return False
    return True


def _without_lone_surrogates(value) -> tuple[object, int]:
    """(the value with lone surrogates, which no UTF-8 output can hold, as U+FFFD; how many
    strings had them). Called on values at most MAX_DEPTH deep."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value, 0
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), 1
    if isinstance(value, list):
        pairs = [_without_lone_surrogates(v) for v in value]
        return [v for v, _n in pairs], sum(n for _v, n in pairs)
    if isinstance(value, dict):
        out, count = {}, 0
        for k, v in value.items():
            (k, nk), (v, nv) = _without_lone_surrogates(k), _without_lone_surrogates(v)
            out[k], count = v, count + nk + nv
        return out, count
    return value, 0
