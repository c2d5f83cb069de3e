"""An independent reading of verl console logs, written from the format notes (verl.md sections
3, 4, 6), not from rundash's code: decode each line, split tqdm `\\r` redraws, strip ANSI codes,
the Ray dedup suffix and Ray prefixes, search the metric-line regex, split the pairs at their last
colon (gluing pieces that are not `key:value`), merge per step with the last value winning. The
verl tests hold rundash's reader equal to it on every sample log."""
from __future__ import annotations

import math
import re

from helpers import DATA

VERL = DATA / "verl"
DQ = VERL / "dq_math.log"
EH = VERL / "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log"
SFT = VERL / "eh_gemma-2-2b-it-sft-0.411.log"

R_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
R_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
R_PREFIXES = [re.compile(r"^\((?:[A-Za-z_][\w:.-]*(?: [A-Za-z_][\w.-]*)? )?pid=\d+(?:, ip=[0-9.]+)?\) ?"),
              re.compile(r"^\((?:raylet|gcs_server|autoscaler[^)]*)(?:, ip=[0-9.]+)?\) ?")]
R_LINE = re.compile(r"(?:^|[^\w/])step:(\d+) - (.+)$")
R_VALUE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)|True|False"
                     r"|np\.[a-z]+\d*\([^()]*\)")


def ref_value(v: str) -> float:
    if v.startswith("np."):
        v = v[v.index("(") + 1: -1]
    return {"True": 1.0, "False": 0.0}[v] if v in ("True", "False") else float(v)


def ref_pairs(rest: str) -> dict | None:
    pairs, pending = {}, None
    for piece in rest.split(" - "):
        piece = piece if pending is None else pending + " - " + piece
        key, colon, value = piece.rpartition(":")
        if colon and key and R_VALUE.fullmatch(value):
            pairs[key], pending = ref_value(value), None
        else:
            pending = piece
    return pairs if pairs and pending is None else None


def ref_lines(data: bytes) -> list[tuple[int, int, dict]]:
    """(line number, step, values) per metric line; a last line without newline is not read."""
    out = []
    text = data[: data.rfind(b"\n") + 1].decode("utf-8", "replace").replace("\x00", "")
    for no, line in enumerate(text.split("\n")[:-1], start=1):
        for piece in (line[:-1] if line.endswith("\r") else line).split("\r"):
            piece = R_REPEATED.sub("", R_ANSI.sub("", piece))
            stripped = True
            while stripped:
                stripped = False
                for rx in R_PREFIXES:
                    m = rx.match(piece)
                    if m and m.end():
                        piece, stripped = piece[m.end():], True
            m = R_LINE.search(piece.rstrip())
            if m and (pairs := ref_pairs(m.group(2))) is not None:
                out.append((no, int(m.group(1)), pairs))
    return out


def ref_merged(lines) -> dict[tuple[int, str], float]:
    merged = {}
    for _no, step, pairs in lines:
        for k, v in pairs.items():
            if not math.isnan(v):
                merged[(step, k)] = v
    return merged


def tidy_map(run) -> dict[tuple[int, str], float]:
    frame = run.metrics()
    assert frame["step"].notna().all() and set(frame["producer"].astype(str)) <= {"trainer"}
    out = {}
    for s, m, v in zip(frame["step"], frame["metric"].astype(str), frame["value"]):
        assert (int(s), m) not in out, "duplicate tidy row"
        out[(int(s), m)] = float(v)
    return out
