"""The values of a Harbor trial's files: verifier/reward.txt, exception.txt's last line, and the
JSON files (result.json, agent/trajectory.json) loaded without losing a whole file to one odd
value (orjson first, then a lenient stdlib read of what writers really leave: Python's json writes
NaN/Infinity, agent output brings bad UTF-8, raw control bytes and lone surrogate escapes, named as
a problem), with the numbers, times and token counts in them as values the frames can hold (else
None, with why).
"""
from __future__ import annotations

import json
import math
import re

import orjson
import pandas as pd

from rundash_core.io.configs import dig
from rundash_core.io.files import FileId, read_range, read_tail
from rundash_core.numbers import finite_float

MAX_JSON_BYTES = 64 << 20
TOKEN_KEYS = ("n_input_tokens", "n_output_tokens", "n_cache_tokens")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::(.*))?$")
_SURROGATE = re.compile("[\ud800-\udfff]")


def load_json_object(path: str, fid: FileId, name: str = "result.json") -> tuple[dict | None, str | None]:
    """A JSON object file of a trial (result.json, agent/trajectory.json); problems say `name`."""
    if fid.size > MAX_JSON_BYTES:
        return None, f"{name} larger than {MAX_JSON_BYTES >> 20} MiB: not read"
    try:
        data = read_range(path, 0, fid.size)
    except OSError as e:
        return None, f"{name} cannot be read ({e.strerror or e})"
    if not data.strip():
        return None, f"{name} is empty (still being written?)"
    problem = None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            obj = _lenient_json(data)
            problem = f"{name} is not strict JSON (bad UTF-8, control bytes or NaN): read leniently"
        except (ValueError, RecursionError):
            return None, f"{name} is not valid JSON"
    if not isinstance(obj, dict):
        return None, f"{name} is not a JSON object"
    return obj, problem


def _lenient_json(data: bytes):
    """What orjson refuses but writers leave (Python's json writes NaN/Infinity; agent output
    brings bad UTF-8, raw control bytes, lone surrogate escapes): read by the stdlib with bad
    bytes and lone surrogates as U+FFFD, so one odd value does not lose the whole file."""
    text = data.decode("utf-8", "replace")
    obj = json.loads(text, strict=False)
    if "\\u" in text:  # a lone surrogate escape would break every later encode
        dumped = json.dumps(obj, ensure_ascii=False)
        if _SURROGATE.search(dumped):
            obj = json.loads(_SURROGATE.sub("\ufffd", dumped), strict=False)
    return obj


def integer(v) -> int | None:
    """An int that fits the frames' Int64 columns (a 2**64 token count would break the frame)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63) else None


def iso_time(v) -> int | None:
    """ns since the epoch (exact) of an ISO time; None for anything else, or a time pandas cannot
    hold in ns (before 1677, after 2262: a year-9999 `started_at` is no time)."""
    if not isinstance(v, str) or not v[:1].isdigit():  # ("now", "today": pandas words, no logged time)
        return None
    try:
        t = pd.Timestamp(v)
        return None if t is pd.NaT else (t.tz_localize("UTC") if t.tzinfo is None else t).value
    except (ValueError, TypeError, OverflowError):
        return None


def tokens(agent_result) -> list[int | None]:
    """n_input/n_output/n_cache tokens: the AgentContext totals, else the sum over model_usage."""
    out = [integer(dig(agent_result, k)) for k in TOKEN_KEYS]
    usage = dig(agent_result, "model_usage")
    if isinstance(usage, dict) and usage:
        for i, k in enumerate(TOKEN_KEYS):
            parts = [integer(dig(u, k)) for u in usage.values()]
            if out[i] is None and parts and None not in parts:
                out[i] = integer(sum(parts))
    return out


_CHECKED = {("verifier_result", "rewards", "reward"): finite_float, ("started_at",): iso_time, ("finished_at",): iso_time,
            **{("agent_result", k): integer for k in TOKEN_KEYS}}


def unusable(result: dict | None) -> str | None:
    """The result.json values that are there but cannot be used (a NaN or string reward, a token
    count past 64 bits, a time that is no time): their cells are empty, and this says why."""
    bad = [f"{'.'.join(keys)} is {str(v)[:40]!r}" for keys, parse in _CHECKED.items()
           if (v := dig(result, *keys)) is not None and parse(v) is None]
    return f"result.json {', '.join(bad)}: not used" if bad else None


def reward_txt(path: str) -> tuple[float | None, str | None]:
    try:
        text = read_range(path, 0, 256).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None, None
    except OSError as e:
        return None, f"verifier/reward.txt cannot be read ({e.strerror or e})"
    try:
        value = float(text)
    except ValueError:
        return None, f"verifier/reward.txt is not a number ({text[:40]!r})"
    return (value, None) if math.isfinite(value) else (None, f"verifier/reward.txt is {text[:40]!r}: no reward")


def exception_txt(path: str) -> tuple[str | None, str | None]:
    """(type, message) from the last line of the traceback in exception.txt (`pkg.Type: message`)."""
    try:
        data, _start = read_tail(path, 64 << 10)
    except OSError as e:
        return "unknown", f"exception.txt cannot be read ({e.strerror or e})"
    lines = [ln.strip() for ln in data.replace(b"\x00", b"").decode("utf-8", "replace").splitlines() if ln.strip()]
    if not lines:
        return "unknown", ""
    m = _EXC_LINE.match(lines[-1])
    if m is None:
        return "unknown", lines[-1][:500]
    return m.group(1).rsplit(".", 1)[-1], (m.group(2) or "").strip()
