"""One Relax rollout file (`docs/formats/relax.md`): its rows read chunk by chunk, the
per-sample scalars kept (no text), and the per-step metrics derived from them (the names are listed
in `relax`'s module docstring). Never raises: what is wrong with a row is counted as a problem.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import orjson
import pandas as pd

from rundash_core.io.files import open_file
from rundash_core.io.holes import line_end, nul_run_fd, run_text, size_text
from rundash_core.io.jsonl import LineProblems, parse_jsonl_bytes
from rundash_core.numbers import finite_float

PRODUCERS = {"train": "rollout", "eval": "eval"}
STATUSES = ("completed", "truncated", "aborted", "failed", "pending")
UNREADABLE = "cannot be read"
CHUNK_BYTES = 16 << 20  # files are read in pieces so a huge file never sits in memory whole
MAX_ROW_BYTES = 64 << 20  # one rollout row (prompt, response, scalars); a longer line is skipped
FILE_COLUMNS = ("sample_id", "split", "step", "sample_index", "group_index", "dataset", "reward", "status",
                "response_length", "total_length", "prompt_length", "agent_turns", "offset", "length")
_INT_COLUMNS = ("sample_index", "group_index", "response_length", "total_length", "prompt_length", "agent_turns")


@dataclass
class StepFile:
    """One parsed rollout file: its per-step metrics and per-sample scalars (no text)."""

    split: str
    step: int
    metrics: dict[str, float]
    samples: pd.DataFrame
    problems: list[tuple[str, int, int]]  # (what, count, first line)
    datasets: list[str]
    model: str | None


INT64_MAX = (1 << 63) - 1  # a bigger integer in a row is garbage: int64 columns cannot hold it


def _integer(v) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (math.inf, -math.inf):
        return None
    return int(v) if v == int(v) and -INT64_MAX <= v <= INT64_MAX else None


def _reward(value) -> tuple[float | None, str | None]:
    """The training reward of a row and, when it is left out for a reason that is a problem, why.
    A null reward is data (an aborted or pending sample is not scored): counted by its status."""
    if value is None:
        return None, None
    if isinstance(value, dict):
        score = finite_float(value.get("score"), bools=True)  # Relax counts a bool reward as 1/0
        return (score, None) if score is not None else (
            None, "object reward without a numeric 'score': left out of reward stats")
    number = finite_float(value, bools=True)
    if isinstance(value, float) and math.isinf(value):  # `Infinity` from json.dumps: would make every stat inf/NaN
        return None, "reward is infinite: left out of reward stats"
    return (number, None) if number is not None else (None, "reward not a number: left out of reward stats")


def _sample(row: dict, split: str, step: int, line: int, problems: LineProblems) -> tuple:
    """(sample_index or None, dataset, reward, status, line, *ints) of one row."""
    reward, why = _reward(row.get("reward"))
    if why:
        problems.add(why, line)
    status = row.get("status")
    if status not in STATUSES:
        problems.add("status missing or not a Relax status (counted as 'unknown')", line)
        status = "unknown"
    ints = {k: _integer(row.get(k)) for k in _INT_COLUMNS}
    for k in ("response_length", "total_length"):
        if ints[k] is None:
            problems.add(f"{k} missing or not an integer: left out of length stats", line)
    if ints["prompt_length"] is None and None not in (ints["total_length"], ints["response_length"]):
        ints["prompt_length"] = max(ints["total_length"] - ints["response_length"], 0)  # older rows
    if _integer(row.get("rollout_id")) != step:
        problems.add("rollout_id differs from the file name (the file name's step is used)", line)
    dataset = None
    if split == "eval":
        dataset = row.get("dataset")
        if not isinstance(dataset, str) or not dataset:
            problems.add("eval row without 'dataset' (grouped as 'default')", line)
            dataset = "default"
    return (ints["sample_index"], dataset, reward, status, line, *(ints[k] for k in _INT_COLUMNS))


def _line_starts(chunk: bytes) -> np.ndarray:
    """Offsets in `chunk` (whole lines) where each line starts, plus its end."""
    return np.r_[0, np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + 1]


def _rows(path: str, size: int, problems: LineProblems):
    """(line number, byte offset, length, row) of every JSON object among the first `size` bytes,
    chunk by chunk. A last line without its newline is kept when it parses (else: the file is
    still being written). A run of NUL bytes (a sparse hole, a crash's zeros) ends the line before
    it and is skipped unread; a line over MAX_ROW_BYTES is skipped; both are problems."""
    carry, line, base, at = b"", 1, 0, 0  # base: the file offset of `carry`; at: of the next read
    with open_file(path) as fh:
        fd = fh.fileno()
        while at < size:
            piece = os.pread(fd, min(CHUNK_BYTES, size - at), at)
            if not piece:
                break
            run = nul_run_fd(fd, piece, at, size)
            data = carry + (piece if run is None else piece[:run[0] - at])
            at += len(piece)
            cut = data.rfind(b"\n") + 1
            if run is not None and data[cut:].strip():
                data, cut = data + b"\n", len(data) + 1  # the line before the run ends there
            carry = data[cut:]
            parsed = parse_jsonl_bytes(data[:cut], problems, first_line=line)
            starts = _line_starts(data[:cut])
            for i, r in enumerate(parsed.rows):
                k = parsed.line_of(i) - line
                yield parsed.line_of(i), base + int(starts[k]), int(starts[k + 1] - starts[k] - 1), r
            line += parsed.nlines
            base += cut
            if run is not None:
                problems.add(run_text(run), line)
                carry, base, at = b"", run[1], run[1]
            elif len(carry) > MAX_ROW_BYTES:  # a line too long to be a row: skipped to its newline
                end, newline, _cr = line_end(path, at, size)
                if not newline and end == size:
                    break
                problems.add(f"a line longer than {size_text(MAX_ROW_BYTES)} (skipped)", line)
                line, carry, base, at = line + newline, b"", end, end
    if carry.strip():
        try:
            row = orjson.loads(carry)
        except orjson.JSONDecodeError:
            row = None
        if isinstance(row, dict):
            yield line, base, len(carry), row
        else:
            problems.add("incomplete last line (still being written, or the writer stopped)", line)


def parse_step_file(path: str, size: int, split: str, step: int) -> StepFile:
    """Read one rollout file up to `size` bytes; never raises. A file that cannot be read gives
    no metrics (rather than a step of zero samples)."""
    problems = LineProblems()
    records, model = [], None
    try:
        for line, offset, length, row in _rows(path, size, problems):
            records.append((*_sample(row, split, step, line, problems), offset, length))
            if model is None and isinstance(row.get("model"), str):
                model = row["model"]
    except OSError as e:
        problems.add(f"{UNREADABLE} ({e.strerror.lower() if e.strerror else e})", 0)
        records = []
    if size == 0:
        problems.add("empty file: no samples", 0)
    frame = samples_frame(records, path, split, step)
    read = not any(w.startswith(UNREADABLE) for w in problems.counts)
    metrics = step_metrics(frame, PRODUCERS[split]) if read else {}
    for dataset, rows in frame.groupby("dataset", sort=False) if split == "eval" else ():
        m = step_metrics(rows, f"eval/{dataset}")
        metrics.update({k: m[k] for k in (f"eval/{dataset}/{n}" for n in (
            "samples", "reward/mean", "reward/std", "reward/count", "response_length/mean")) if k in m})
    return StepFile(split, step, metrics, frame, [(w, n, ln) for w, n, ln in problems.items()],
                    list(dict.fromkeys(frame["dataset"].dropna())), model)


def samples_frame(records: list[tuple], path: str, split: str, step: int) -> pd.DataFrame:
    """The file's rows (FILE_COLUMNS). sample_id: `<split>-<step>-<sample_index>`, or
    `<split>-<step>-L<line>` for a row without a sample_index or one that repeats it."""
    cols = list(zip(*records)) if records else [()] * (7 + len(_INT_COLUMNS))
    index, dataset, reward, status, line, *ints, offset, length = cols
    counts = {}
    for i in index:
        counts[i] = counts.get(i, 0) + 1
    sample_id = [f"{split}-{step}-{i}" if i is not None and counts[i] == 1 else f"{split}-{step}-L{n}"
                 for i, n in zip(index, line)]
    frame = pd.DataFrame({
        "sample_id": pd.array(sample_id, dtype="str"), "split": pd.array([split] * len(records), dtype="str"),
        "step": pd.array([step] * len(records), dtype="Int64"),
        **{k: pd.array(v, dtype="Int64") for k, v in zip(_INT_COLUMNS[:2], ints[:2])},
        "dataset": pd.array(dataset, dtype="str"), "reward": np.array(reward, dtype=float),
        "status": pd.array(status, dtype="str"),
        **{k: pd.array(v, dtype="Int64") for k, v in zip(_INT_COLUMNS[2:], ints[2:])},
        "offset": np.array(offset, dtype="int64"), "length": np.array(length, dtype="int64"),
    })
    return frame[list(FILE_COLUMNS)]


def step_metrics(samples: pd.DataFrame, prefix: str) -> dict[str, float]:
    """The per-step metrics of some samples (names in `relax`'s module docstring); empty stats are
    left out."""
    out = {f"{prefix}/samples": float(len(samples))}
    rewards = samples["reward"].dropna().to_numpy()
    if len(rewards):
        out.update({f"{prefix}/reward/mean": rewards.mean(), f"{prefix}/reward/std": rewards.std(),
                    f"{prefix}/reward/min": rewards.min(), f"{prefix}/reward/max": rewards.max()})
    out[f"{prefix}/reward/count"] = float(len(rewards))
    for col in ("response_length", "total_length"):
        values = samples[col].dropna().to_numpy(dtype=float)
        if len(values):
            out.update({f"{prefix}/{col}/mean": values.mean(), f"{prefix}/{col}/max": values.max()})
    if len(samples):
        shares = samples["status"].value_counts(normalize=True)
        out.update({f"{prefix}/status/{s}": float(shares.get(s, 0.0)) for s in (*STATUSES, "unknown")})
    if prefix == "rollout":
        groups = samples.dropna(subset=["group_index", "reward"]).groupby("group_index")["reward"]
        spread = groups.agg(["count", "min", "max"])
        spread = spread[spread["count"] >= 2]
        if len(spread):
            out["rollout/groups/zero_variance"] = float((spread["min"] == spread["max"]).mean())
    return {k: float(v) for k, v in out.items()}
