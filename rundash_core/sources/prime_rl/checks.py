"""Checks behind `PrimeRLRun.problems()` for what the readers pass over quietly (so the run still
shows): resolved configs that are not files or not JSON objects, log files that cannot be read,
and trace index rows whose chunk is missing, unreadable, or shorter than the row's offset (those
episodes cannot be opened, and the user should know why before clicking one)."""
from __future__ import annotations

import os

import pandas as pd

from rundash_core import cache
from rundash_core.io import zst_seekable
from rundash_core.io.configs import load_config_file
from rundash_core.io.files import describe_unreadable, file_id
from rundash_core.logs.reading import real_path
from rundash_core.run import Problem
from rundash_core.sources.prime_rl.episode import _int
from rundash_core.sources.prime_rl.traces import _listdir, _rows, annotation_producers, chunk_path, traces_dir


def config_problems(resolved: str, listed: list[str]) -> list[Problem]:
    """Top-level `resolved/*.json` that are not read (a folder, FIFO, broken link) or hold no
    object (a list, a number): the card's model, envs and max_steps ignore them."""
    out = []
    for name in _listdir(resolved):
        path = os.path.join(resolved, name)
        if not name.endswith(".json"):
            continue
        if path not in listed:
            out.append(Problem(path, f"{describe_unreadable(path)}: not read"))
            continue
        loaded = load_config_file(path)
        if loaded.error is None and not isinstance(loaded.value, dict):
            out.append(Problem(path, "not a JSON object: its settings are not used"))
    return out


def log_problems(logs: pd.DataFrame) -> list[Problem]:
    """Listed log files with no size: a broken link, a FIFO, a file gone since the listing."""
    paths = dict.fromkeys(real_path(p) for p in logs.loc[logs["size"].isna(), "path"])
    return [Problem(p, f"{describe_unreadable(p)}: its lines are not shown") for p in paths]


def chunk_problems(run_path: str) -> list[Problem]:
    """The stream and annotation indexes checked against their chunks (cached until an index
    or a chunk changes; a sealed chunk costs its seek table, not a decompression)."""
    folder = traces_dir(run_path)
    out = _index_problems(os.path.join(folder, "stream.index.jsonl"), os.path.join(folder, "stream"),
                          os.path.join(folder, "stream.jsonl"))
    ann = os.path.join(folder, "annotations")
    for producer in annotation_producers(folder):
        out += _index_problems(os.path.join(ann, f"{producer}.index.jsonl"), os.path.join(ann, producer),
                               os.path.join(ann, f"{producer}.jsonl"))
    return out


def _index_problems(index: str, chunks: str, single: str) -> list[Problem]:
    fid = file_id(index)
    if fid is None:
        return [Problem(index, f"{describe_unreadable(index)}: its episodes are not listed")] if os.path.lexists(
            index) else []
    stamp = (fid, file_id(single), tuple((n, file_id(os.path.join(chunks, n))) for n in _listdir(chunks)))
    return cache.shared.current(("prime-rl-chunk-problems", os.path.realpath(index)), stamp,
                                lambda: _check(index, chunks, single))


def _check(index: str, chunks: str, single: str) -> list[Problem]:
    offsets: dict[int | None, list[int]] = {}
    seen = set()
    for row in _rows(index):
        line, offset = _int(row.get("line")), _int(row.get("offset"))
        if offset is None or (line is not None and line in seen):
            continue
        seen.add(line)
        offsets.setdefault(_int(row.get("chunk")), []).append(offset)
    out = []
    for chunk, found in sorted(offsets.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0)):
        plain = chunk_path(chunks, chunk) if chunk is not None else single
        where, size, why = _content_size(plain)
        n = len(found)
        if why is not None:
            out.append(Problem(where or index, f"{why}: {n} indexed record{'s' * (n > 1)} in it cannot be opened"))
        elif (past := sum(1 for o in found if not 0 <= o < size)):
            out.append(Problem(where, f"index rows point outside its {size} bytes: {past} record"
                                      f"{'s' * (past > 1)} cannot be opened"))
    return out


def _content_size(plain: str) -> tuple[str | None, int | None, str | None]:
    """(the file read for a chunk, its content size, why it cannot be read): the plain chunk,
    else its sealed `.zst` through the seek table."""
    if (fid := file_id(plain)) is not None:
        return plain, fid.size, None
    if os.path.lexists(plain):
        return plain, None, describe_unreadable(plain)
    sealed = plain + ".zst"
    if file_id(sealed) is not None:
        try:
            return sealed, zst_seekable.seek_table(sealed).size, None
        except (OSError, zst_seekable.SeekableError) as e:
            return sealed, None, f"sealed chunk cannot be read ({e})"
    if os.path.lexists(sealed):
        return sealed, None, describe_unreadable(sealed)
    return None, None, f"chunk {os.path.basename(plain)}[.zst] does not exist"  # (the index is wrong)
