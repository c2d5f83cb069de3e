"""One log line, understood: its level, its time, its Ray actor, its text with and without colour.

The formats (prime-rl spec 3.2-3.3, verl spec 4): loguru records `HH:MM:SS   LEVEL message` with
ANSI colours; JSON records `{"timestamp", "level", "message", ...}`; vLLM's stdlib logging
`[(<Proc> pid=N) ]LEVEL MM-DD HH:MM:SS [file.py:N] message`; glog / absl records (torch.distributed,
c10d, JAX) `Lmmdd HH:MM:SS.uuuuuu thread file:N] message` with L one of I W E F; plain `YYYY-MM-DD HH:MM:SS LEVEL`
lines (env servers, Ray's C++ `[2025-06-19 16:30:39,118 E …]`); Ray actor prefixes
`(TaskRunner pid=N, ip=…)` in front of anything; torchrun tee prefixes `[default0]:`.

A line that matches no record shape (a traceback, tqdm, NCCL) has no level and no time of its own:
the reader gives it those of the record before it in its file (a continuation line).
"""
from __future__ import annotations

import datetime as dt
import re

import orjson

# THE terminal escape pattern (every module strips escapes with it): a CSI sequence (colours, cursor
# moves), an OSC one (window title, hyperlink; to BEL/ST, or the line end when unterminated), any other
# two-byte ESC sequence, a lone ESC. Run text must neither colour nor move a terminal, nor show `\x1b[`.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
ANSI_BYTES = re.compile(ANSI.pattern.encode())  # the same, for byte blocks
TORCHRUN_PREFIX = re.compile(r"^\[[A-Za-z_]*\d+\]:")
RAY_PREFIX = re.compile(r"^\((?:(?P<name>[A-Za-z_][\w:.-]*)(?: (?P<name2>[A-Za-z_][\w.-]*))? )?pid=\d+(?:, ip=[0-9.]+)?\) ?")
RAY_DAEMON = re.compile(r"^\((?P<name>raylet|gcs_server|autoscaler[^),]*)(?:, ip=[0-9.]+)?\) ?")
RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")

LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")
UNKNOWN = "unknown"  # a line before any record of its file: no level known
_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL", "E": "ERROR", "W": "WARNING", "I": "INFO", "D": "DEBUG",
            "F": "CRITICAL"}
_LEVEL_WORD = "TRACE|DEBUG|INFO|SUCCESS|WARNING|WARN|ERROR|CRITICAL|FATAL"

_LOGURU = re.compile(rf"^(\d\d):(\d\d):(\d\d) +({_LEVEL_WORD}) ")
_VLLM = re.compile(rf"^({_LEVEL_WORD}) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
GLOG_RECORD = r"([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.\d{6} +\d+ [^\]\s]+:\d+\]"  # level, month, day, h, m, s
_GLOG = re.compile("^" + GLOG_RECORD)
_ISO = re.compile(r"^\[?(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?")
_RAY_CPP_LEVEL = re.compile(r" ([EWID]) \d+ \d+\]")  # `[2025-06-19 16:30:39,118 E 679234 679666] logging.cc`
_WORD_LEVEL = re.compile(rf"\b({_LEVEL_WORD})\b")
_STEP_TIME = re.compile(r"\bstep:\d+ - .*?\btiming_s/step:(?:np\.float64\()?(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)")
_ROUTER = re.compile(r"^[\[(]?\s*(?:vllm[-_]|sglang[-_])?router\b|\b(?:vllm|sglang)_router\b", re.I)


class Stamp:
    """The time a line says, as far as it says it: a full time (`when`: tz-aware when the line had
    an offset, else local wall time), or a local time of day with the date unknown (loguru), or
    month-day plus time of day (vLLM, year unknown)."""

    __slots__ = ("when", "time_of_day", "month_day")

    def __init__(self, when: dt.datetime | None = None, time_of_day: int | None = None,
                 month_day: tuple[int, int] | None = None):
        self.when, self.time_of_day, self.month_day = when, time_of_day, month_day


class LogLine:
    """One physical line: `text` as shown (ANSI kept, torchrun prefix cut), `plain` without ANSI,
    its own level and time (None for a continuation line), its Ray actor and whether it is a
    router's line (single-node prime-rl logs the router inside inference.log). A slotted class,
    not a dataclass: thousands are made per read."""

    __slots__ = ("text", "plain", "level", "stamp", "actor", "router")

    def __init__(self, text: str, plain: str, level: str | None, stamp: Stamp | None, actor: str, router: bool):
        self.text, self.plain, self.level, self.stamp, self.actor, self.router = text, plain, level, stamp, actor, router


def decode(raw: bytes) -> str:
    """Bytes of one line as text: NUL bytes dropped, bad UTF-8 replaced, a CR-LF's CR and tqdm's
    earlier carriage-return redraws cut (what a terminal would show last)."""
    text = raw.replace(b"\x00", b"").decode("utf-8", "replace").rstrip("\r\n")
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return text


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


def ray_actor(plain: str) -> tuple[str, str]:
    """(actor name, rest of the line): `(TaskRunner pid=1) x` → ("TaskRunner", "x"); "" when the
    line has no Ray prefix. Nested prefixes are cut repeatedly; the first names the actor."""
    actor, rest = "", plain
    for _ in range(4):
        m = rest[:1] == "(" and (RAY_PREFIX.match(rest) or RAY_DAEMON.match(rest))
        if not m:
            break
        if not actor:
            groups = m.groupdict()
            actor = groups.get("name2") or groups.get("name") or "pid"
        rest = rest[m.end():]
    return actor, rest


def norm_level(word: str) -> str:
    word = word.upper()
    return _ALIASES.get(word, word)


def plain_text(raw: bytes) -> str:
    """The text of a line without colour and torchrun prefix (what a filter searches), cheaply."""
    text = decode(raw) if b"\x00" in raw or b"\r" in raw else raw.decode("utf-8", "replace")
    if text[:1] == "[" and (m := TORCHRUN_PREFIX.match(text)):
        text = text[m.end():]
    return ANSI.sub("", text) if "\x1b" in text else text


def parse(raw: bytes) -> LogLine:
    """One line of any of the formats above (each pattern tried only where its first character
    fits: most lines cost one or two regex calls)."""
    text = decode(raw) if b"\x00" in raw or b"\r" in raw else raw.decode("utf-8", "replace")
    if text[:1] == "[" and (m := TORCHRUN_PREFIX.match(text)):
        text = text[m.end():]
    plain = ANSI.sub("", text) if "\x1b" in text else text
    first = plain[:1]
    if first == "{" and (record := _json_record(plain)) is not None:
        return record
    actor, body = ray_actor(plain) if first == "(" else ("", plain)
    level, stamp = _level_and_stamp(body)
    if actor and body.endswith("cluster]"):
        body = RAY_REPEATED.sub("", body)
    head = body[:120]
    router = ("outer" in head and bool(_ROUTER.search(head))) or ("outer" in actor and "router" in actor.lower())
    return LogLine(text, plain, level, stamp, actor, router)


def _level_and_stamp(body: str) -> tuple[str | None, Stamp | None]:
    first = body[:1]
    if first.isdigit():
        if body[2:3] == ":" and (m := _LOGURU.match(body)):
            h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3))
            return norm_level(m.group(4)), Stamp(time_of_day=h * 3600 + mi * 60 + s)
        if m := _ISO.match(body):
            return _iso_level(body, m)
    elif first == "[" and body[1:2].isdigit() and (m := _ISO.match(body)):
        return _iso_level(body, m)
    elif first in "IWEF" and body[1:2].isdigit() and (m := _GLOG.match(body)):
        return _month_day_record(m)
    elif first.isupper() and (m := _VLLM.match(body)):
        return _month_day_record(m)
    lm = _WORD_LEVEL.search(body, 0, 24)  # `INFO:name:msg`, `(pid) WARNING …`: a level near the start
    return (norm_level(lm.group(1)) if lm else None), None


def _month_day_record(m: re.Match) -> tuple[str, Stamp]:
    """Level and stamp of a record that says month-day and time of day, no year (vLLM, glog)."""
    mo, d, h, mi, s = (int(m.group(i)) for i in range(2, 7))
    return norm_level(m.group(1)), Stamp(time_of_day=h * 3600 + mi * 60 + s, month_day=(mo, d))


def _iso_level(body: str, m: re.Match) -> tuple[str | None, Stamp | None]:
    lm = _RAY_CPP_LEVEL.match(body, m.end()) or _WORD_LEVEL.search(body, m.end(), m.end() + 40)
    return (norm_level(lm.group(1)) if lm else None), _iso_stamp(m)


def _iso_stamp(m: re.Match) -> Stamp | None:
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or "0"
    try:
        when = dt.datetime(y, mo, d, h, mi, s, int(frac.ljust(6, "0")[:6]))
    except ValueError:
        return None
    zone = m.group(8)
    if zone:
        when = when.replace(tzinfo=dt.UTC) if zone == "Z" else _with_offset(when, zone)
    return Stamp(when=when)


def _with_offset(when: dt.datetime, zone: str) -> dt.datetime:
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]))
    return when.replace(tzinfo=dt.timezone(sign * offset))


def _json_record(plain: str) -> LogLine | None:
    """prime-rl's JSON mode (prime-rl spec 3.3): the message (and its traceback) is the text shown."""
    try:
        row = orjson.loads(plain)
    except orjson.JSONDecodeError:
        return None
    if type(row) is not dict or "level" not in row or "timestamp" not in row:
        return None
    message = str(row.get("message", row.get("desc", "")))
    if row.get("type") == "progress":
        message = f"{row.get('desc', '')} {row.get('current', '')}/{row.get('total', '')}".strip()
    if row.get("exception"):
        message += "\n" + str(row["exception"])
    m = _ISO.match(str(row.get("timestamp")))
    stamp = _iso_stamp(m) if m else None
    level = norm_level(str(row.get("level")))
    return LogLine(message, message, level if level in LEVELS else None, stamp, "", False)


def resolve_times(stamps: list, mtime: float) -> list[float]:
    """Epoch seconds per line of a file read downward, from each line's own Stamp (NaN for a line
    without one: `logmerge.estimate_times` places those): a time of day is dated by `mtime`
    (local), stepping back a day each time the clock goes backwards reading downward (counted back
    from the end); a month-day takes the mtime's year (the year before when it would be later)."""
    n = len(stamps)
    out = [float("nan")] * n
    anchor = dt.datetime.fromtimestamp(mtime)
    day = anchor.date()
    later_tod = anchor.hour * 3600 + anchor.minute * 60 + anchor.second + 60
    for i in range(n - 1, -1, -1):
        s = stamps[i]
        if s is None:
            continue
        if s.when is not None:
            out[i] = s.when.timestamp()  # naive: local wall time
        elif s.month_day is not None:
            year = anchor.year - (s.month_day > (anchor.month, anchor.day))
            try:
                out[i] = _local_seconds(dt.date(year, *s.month_day), s.time_of_day)
            except ValueError:
                pass
        else:
            if s.time_of_day > later_tod + 60:
                day -= dt.timedelta(days=1)
            later_tod = s.time_of_day
            out[i] = _local_seconds(day, s.time_of_day)
    return out


def step_seconds(plain: str) -> float | None:
    """The wall time of a step a verl / SWE-Lego metrics line reports (`step:N - … timing_s/step:X`),
    in seconds; None for any other line."""
    if "timing_s/step:" not in plain or not (m := _STEP_TIME.search(plain)):
        return None
    seconds = float(m.group(1))
    return seconds if 0 <= seconds < 1e7 else None


def _local_seconds(day: dt.date, seconds: int) -> float:
    return dt.datetime.combine(day, dt.time()).timestamp() + seconds


def levels_at_least(level: str) -> list[str]:
    """The levels a "at least WARNING" filter keeps (SUCCESS ranks between INFO and WARNING)."""
    level = norm_level(level)
    return list(LEVELS[LEVELS.index(level):]) if level in LEVELS else list(LEVELS)
