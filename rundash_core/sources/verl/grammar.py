"""The verl console-log grammar (`docs/formats/verl.md` sections 3-4), one line at a time.

The exact reading of a line: split tqdm `\\r` redraws, strip ANSI codes, the Ray dedup suffix and
Ray prefixes, find the metric line, split its pairs at their last colon (gluing pieces that are
not `key:value`), convert `np.float64(…)`, `nan`/`inf` and `True`/`False`. The fast reader
(`block_parse`) uses it for every line it does not take in bulk; the run card's readers use it on
the few lines they look at.
"""
from __future__ import annotations

import re

from rundash_core.logs.line import ANSI

# Spec section 4, applied to one `\r` piece of a decoded line.
REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
RAY_PREFIX = re.compile(r"^\((?:[A-Za-z_][\w:.-]*(?: [A-Za-z_][\w.-]*)? )?pid=\d+(?:, ip=[0-9.]+)?\) ?"
                        r"|^\((?:raylet|gcs_server|autoscaler[^)]*)(?:, ip=[0-9.]+)?\) ?")
METRIC_LINE = re.compile(r"(?:^|[^\w/])step:(\d+) - (.+)$")
VALUE = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)|True|False|np\.[A-Za-z]+\d*\([^()]*\))"
SEGMENT = re.compile(rf"^(?P<key>.+):(?P<value>{VALUE})$", re.S)
PLAIN_SEGMENT = re.compile(rf"^(?P<key>\S+):(?P<value>{VALUE})$")  # a whole `key:value` (no glue, no space)
NP_WRAP = re.compile(r"^np\.[A-Za-z]+\d*\((.*)\)$", re.S)
PROGRESS = re.compile(rb"Training Progress:\s+\d+%\|[^|]*\|\s*\d+/(\d+) \[")
SFT_STEPS = re.compile(rb"Number of steps/epoch \d+, number of epochs \d+, total number of steps (\d+)")


def clean_piece(piece: str) -> tuple[str, str]:
    """(source prefix, body) of one `\\r` piece: ANSI codes, the Ray dedup suffix and leading
    Ray prefixes removed, trailing whitespace trimmed (spec 4, steps 3-6)."""
    text = REPEATED.sub("", ANSI.sub("", piece))
    source = ""
    while (m := RAY_PREFIX.match(text)) is not None and m.end():
        source += m.group(0)
        text = text[m.end():]
    return source.strip(), text.rstrip()


def parse_value(text: str) -> float:
    m = NP_WRAP.match(text)
    if m:
        text = m.group(1)
    return 1.0 if text == "True" else 0.0 if text == "False" else float(text)


def parse_segments(rest: str) -> dict[str, float] | None:
    """`key:value - key:value …` by the grammar (spec 3): split at the last colon, glue pieces
    that do not end in `:<value>` onto the next; None when pieces are left over or none parse."""
    out: dict[str, float] = {}
    carry = ""
    for piece in rest.split(" - "):
        piece = carry + piece
        m = SEGMENT.match(piece)
        if m is None:
            carry = piece + " - "
            continue
        carry = ""
        out[m.group("key")] = parse_value(m.group("value"))
    return out if out and not carry else None


def read_segments(rest: str) -> tuple[dict[str, float] | None, bool]:
    """(values, cut) of `key:value - …`: the grammar's reading, None when pieces are left over (not
    a metric line: spec 4.8); `cut` when such a line began as one, with a whole `key:value`, before
    the text that broke it (another writer's output mixed into it). A cut line is not read (the
    spec's rule: a reward-manager print can hold `step:3 - x:5 - …` by accident), but the reader
    names it, so a step missing its values is not missing without a word."""
    values = parse_segments(rest)
    if values is not None:
        return values, False
    return None, PLAIN_SEGMENT.match(rest.split(" - ", 1)[0]) is not None


def parse_console_line(text: str, cuts: list | None = None) -> list[tuple[int, dict[str, float]]]:
    """The metric lines in one decoded physical line (one per tqdm `\\r` piece at most); `cuts`
    gets the step of each metric line that other output cut (`read_segments`: not read)."""
    out = []
    line = text.replace("\x00", "")
    line = line[:-1] if line.endswith("\r") else line
    for piece in line.split("\r"):
        _source, body = clean_piece(piece)
        m = METRIC_LINE.search(body)
        if m is None:
            continue
        values, cut = read_segments(m.group(2))
        if cut and cuts is not None:
            cuts.append(int(m.group(1)))
        if values:
            out.append((int(m.group(1)), values))
    return out
