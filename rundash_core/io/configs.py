"""Reading config files (JSON, TOML, plain text) through the shared cache.

A file that cannot be parsed is still returned as its text, with the reason, so the Config page
can show it and the run lists the problem.
"""
from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass

from .. import cache
from .files import describe_unreadable, file_id, read_text

MAX_CONFIG_BYTES = 16 << 20
MAX_SHOWN_CHARS = 1 << 20  # what is kept of a file that could not be parsed


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
    try:
        text = read_text(path, MAX_CONFIG_BYTES)
    except OSError as e:
        return ConfigFile(path, None, describe_unreadable(path) or str(e))
    fid = file_id(path)
    if fid is not None and fid.size > MAX_CONFIG_BYTES:  # one request must not read a huge file whole
        return ConfigFile(path, text[:MAX_SHOWN_CHARS], f"larger than {MAX_CONFIG_BYTES >> 20} MiB: only its start "
                                                         "is shown, as text")
    if path.endswith(".json"):
        try:
            return ConfigFile(path, json.loads(text))
        except ValueError as e:
            return ConfigFile(path, text, f"invalid JSON ({e})")
        except (RecursionError, MemoryError):
            return ConfigFile(path, text[:MAX_SHOWN_CHARS], "JSON nested too deeply (or too large) to parse: shown as text")
    if path.endswith(".toml"):
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            return ConfigFile(path, text, f"invalid TOML ({e})")
        except (RecursionError, MemoryError):
            return ConfigFile(path, text[:MAX_SHOWN_CHARS], "TOML nested too deeply (or too large) to parse: shown as text")
    return ConfigFile(path, text)
