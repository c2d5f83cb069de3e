"""prime-rl traces (`docs/formats/prime-rl.md` section 5): episodes listed from
`monitors/file/traces/stream.index.jsonl`, one record read at a time from its chunk.

Listing reads only the index files (`stream.index.jsonl` and the annotation indexes
`annotations/<producer>.index.jsonl`), never the streams. Per episode:

- `sample_id` = `<line>-<first 8 id chars>` (the index's `line` is the 1-based position in the whole
  stream and continues across relaunches, so ids are unique and stable);
- `trainer_step` = min `ship.step` over the `effective` annotations of its traces (spec 5.6 "step
  membership"), NA when not shipped (yet);
- `step` = `trainer_step` when shipped; else the batch being collected when it arrived: one past
  the step of the latest ship event at or before its arrival time (0 before the first); an
  episode without times takes the step of the row before it;
- `advantage` = the newest `info.advantage` its annotations carry, else the index's;
- `locator` = `<traces>/stream/NNNNN.jsonl:<offset>:<length>` (offset in the chunk's *uncompressed*
  content; length from the next row of the same chunk, 0 when unknown). `episode()` opens the plain
  chunk when there, else the sealed `.jsonl.zst` through its seek table (one frame, or the few the
  line spans): a chunk sealed between listing and reading is found again.

Records are mapped to `frames.Episode`; annotations are folded in (orch, then trainer, each in
index order: the newest wins): `info` deep-merged into `trace.info`, full-length branch streams cut
to each node's masked positions (compact). `Episode.tokens` has one row per token of every node,
compact streams spread back to full length (NaN off the mask).
"""
from __future__ import annotations

import bisect
import os
import re

import orjson
import pandas as pd

from rundash_core import cache, episode_ids, frames
from rundash_core.io import zst_seekable
from rundash_core.io.files import file_id, shown_path
from rundash_core.io.jsondepth import DEEP_MARK, is_too_deep, loads_shallow
from rundash_core.io.jsonl import dict_or_empty, list_or_empty
from rundash_core.numbers import finite_float
from rundash_core.run import Problem, RunError
from rundash_core.sources.prime_rl.episode import _int, to_episode
from rundash_core.sources.prime_rl.lines import TornRecord, read_record_line
from rundash_core.sources.prime_rl.lines import objects as _objects

TRACES = ("monitors", "file", "traces")
PRODUCER_ORDER = ("orch", "trainer")  # folding order across producers (ship facts, then trainer values)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


# Files -----------------------------------------------------------------------------------------------
def traces_dir(run_path: str) -> str:
    return os.path.join(run_path, *TRACES)


def chunk_path(folder: str, chunk: int) -> str:
    """The plain name of chunk n; `read_record` falls back to its sealed `.zst`."""
    return os.path.join(folder, f"{chunk:05d}.jsonl")


def _rows(path: str) -> list[dict]:
    """Complete JSON-object rows of an index file."""
    return _objects(path, "prime-rl-index", lambda _off, _n, row: row)


# Annotations ------------------------------------------------------------------------------------------
def annotation_producers(folder: str) -> list[str]:
    ann = os.path.join(folder, "annotations")
    try:
        names = [n[:-len(".index.jsonl")] for n in os.listdir(ann) if n.endswith(".index.jsonl")]
    except OSError:
        return []
    return sorted(names, key=lambda p: (PRODUCER_ORDER.index(p) if p in PRODUCER_ORDER else 9, p))


def annotation_index(folder: str) -> dict[str, list[tuple[str, dict]]]:
    """trace id → [(producer, index row)] in folding order, cached until an index file changes."""
    producers = annotation_producers(folder)
    stamp = tuple((p, file_id(os.path.join(folder, "annotations", f"{p}.index.jsonl"))) for p in producers)
    return cache.shared.current(("prime-rl-annotation-index", os.path.realpath(folder)), stamp,
                                lambda: _annotation_index(folder, producers), size=lambda v: 200 * len(v) + 64)


def _annotation_index(folder: str, producers: list[str]) -> dict[str, list[tuple[str, dict]]]:
    out: dict[str, list[tuple[str, dict]]] = {}
    for producer in producers:
        for row in _rows(os.path.join(folder, "annotations", f"{producer}.index.jsonl")):
            tid = row.get("trace_id")
            if isinstance(tid, str):
                out.setdefault(tid, []).append((producer, row))
    return out


def _ship_facts(folder: str) -> tuple[dict[str, int], dict[str, float], list[tuple[float, int]]]:
    """From the annotation indexes, in folding order: trace id → min ship step of its `effective`
    annotations, trace id → the newest advantage, and the sorted (ship time, ship step) events."""
    ship_of, advantage_of, ships = {}, {}, set()
    for producer in annotation_producers(folder):
        for row in _rows(os.path.join(folder, "annotations", f"{producer}.index.jsonl")):
            tid, info = row.get("trace_id"), row.get("info")
            if not isinstance(tid, str) or not isinstance(info, dict):
                continue
            if (s := _ship_step(info)) is not None:
                ship_of[tid] = min(s, ship_of.get(tid, s))
                if (t := finite_float(info["ship"].get("time"))) is not None:
                    ships.add((t, s))
            if (a := finite_float(info.get("advantage"))) is not None:
                advantage_of[tid] = a
    return ship_of, advantage_of, sorted(ships)


def _ship_step(info) -> int | None:
    if isinstance(info, dict) and info.get("effective"):
        ship = info.get("ship")
        return _int(ship.get("step")) if isinstance(ship, dict) else None
    return None


# Listing ----------------------------------------------------------------------------------------------
def list_samples(run_path: str) -> pd.DataFrame:
    """`frames.SAMPLES` rows from the index files (module docstring), cached until one changes."""
    return _listing(run_path)[1].copy()


def _listing(run_path: str) -> tuple[tuple, pd.DataFrame]:
    """(the index files' stamp, the cached listing itself: not to be changed)."""
    folder = traces_dir(run_path)
    stamp = (file_id(os.path.join(folder, "stream.index.jsonl")),
             *((p, file_id(os.path.join(folder, "annotations", f"{p}.index.jsonl")))
               for p in annotation_producers(folder)))
    return stamp, cache.shared.current(("prime-rl-samples", os.path.realpath(folder)), stamp,
                                       lambda: _list_samples(folder))


def sample_row(run_path: str, ident: str, run_id: str = "") -> dict:
    """One listed sample's row, by its sample id or episode id (`episode_ids`): a cached id →
    position map of the stream listing (no copy or scan of a 70k-row frame per episode); the other
    layouts are small: searched. KeyError (run and id named) when no one sample matches."""
    if file_id(os.path.join(traces_dir(run_path), "stream.index.jsonl")) is None:
        return episode_ids.row(samples(run_path), ident, run_id or os.path.basename(run_path))
    stamp, frame = _listing(run_path)
    where = cache.shared.current(("prime-rl-sample-positions", os.path.realpath(run_path)), stamp,
                                 lambda: episode_ids.positions(frame), size=lambda v: 120 * len(v) + 64)
    i = where.get(ident)
    if i is None:
        episode_ids.find(frame, ident, run_id or os.path.basename(run_path))  # (raises: no such sample, or several)
    return episode_ids.plain(frame.iloc[i].to_dict())


def _list_samples(folder: str) -> pd.DataFrame:
    index = _rows(os.path.join(folder, "stream.index.jsonl"))
    if not index:
        return frames.empty(frames.SAMPLES)
    ship_of, advantage_of, ships = _ship_facts(folder)
    ship_times = [t for t, _s in ships]
    stream = os.path.join(folder, "stream")
    out, prev_step, seen, plains = [], 0, set(), {}
    for k, row in enumerate(index):
        line, offset = _int(row.get("line")), _int(row.get("offset"))
        if line is None or offset is None or line in seen:
            continue
        seen.add(line)
        chunk = _int(row.get("chunk"))
        if (plain := plains.get(chunk)) is None:
            plain = plains[chunk] = (chunk_path(stream, chunk) if chunk is not None
                                     else os.path.join(folder, "stream.jsonl"))
        nxt = index[k + 1] if k + 1 < len(index) else None
        length = (nxt["offset"] - offset if nxt is not None and nxt.get("chunk") == row.get("chunk")
                  and _int(nxt.get("offset")) is not None and nxt["offset"] > offset else 0)
        tids = [t for t in list_or_empty(row.get("trace_ids")) if isinstance(t, str)]
        shipped = [s for t in tids if (s := ship_of.get(t)) is not None]
        advantage = next((a for t in reversed(tids) if (a := advantage_of.get(t)) is not None),
                         finite_float(row.get("advantage")))
        trainer_step = min(shipped) if shipped else None
        step = trainer_step
        if step is None:
            when = finite_float(row.get("arrival")) or finite_float(row.get("dispatch"))
            if when is not None:
                i = bisect.bisect_right(ship_times, when) - 1
                step = ships[i][1] + 1 if i >= 0 else 0
            else:
                step = prev_step
        prev_step = step
        eid = row.get("id") if isinstance(row.get("id"), str) else ""
        n_err = _int(row.get("num_errors")) or 0
        kind = row.get("kind")
        out.append({
            "sample_id": f"{line}-{_UNSAFE.sub('', eid)[:8]}".rstrip("-"), "episode_id": eid or None,
            "split": kind if kind in ("train", "eval") else "eval",
            "step": step, "trainer_step": trainer_step, "group_id": row.get("group"), "env": row.get("env"),
            "reward": finite_float(row.get("reward")), "advantage": advantage,
            "ok": row.get("ok") if isinstance(row.get("ok"), bool) else None,
            "error": f"{n_err} error{'s' if n_err > 1 else ''}" if n_err else None,
            "status": row.get("stop_condition"),
            "truncated": row.get("truncated") if isinstance(row.get("truncated"), bool) else None,
            "input_tokens": _int(row.get("input_tokens")), "output_tokens": _int(row.get("output_tokens")),
            "turns": _int(row.get("turns")), "duration_s": finite_float(row.get("duration")),
            "arrival": finite_float(row.get("arrival")),
            "locator": frames.line_locator(plain, offset, length),
        })
    return frames.typed_rows(out, frames.SAMPLES)


# Older layout: rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl (spec 5.8) ------------------
_STEP_DIR = re.compile(r"^step_(\d{1,15})$")  # (a longer number overflows the Int64 step column)
TRUNCATING = {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "compaction_failed"}


def rollout_files(run_path: str) -> dict[tuple[int, str], dict[str, str]]:
    """(step, kind) -> {"all"|"effective": path} of the older layout."""
    root, out = os.path.join(run_path, "rollouts"), {}
    for name in _listdir(root):
        if (m := _STEP_DIR.match(name)) is None:
            continue
        for kind in ("train", "eval"):
            for subset in ("all", "effective"):
                path = os.path.join(root, name, kind, subset, "traces.jsonl")
                if file_id(path) is not None:
                    out.setdefault((int(m.group(1)), kind), {})[subset] = path
    return dict(sorted(out.items()))


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def index_row(rec: dict) -> dict:
    """The index-row scalars (spec 5.4) of an Episode record (or of an older Trace-per-line)."""
    traces = [t for t in list_or_empty(rec.get("traces") if "traces" in rec else [rec]) if isinstance(t, dict)]
    info0 = traces[0].get("info") if traces and isinstance(traces[0].get("info"), dict) else {}
    rewards = [sum((finite_float(r.get("score")) or 0.0) * (finite_float(r.get("weight")) or 1.0)
                   for r in t["rewards"].values() if isinstance(r, dict))
               for t in traces if isinstance(t.get("rewards"), dict)
               and any(isinstance(r, dict) and finite_float(r.get("score")) is not None
                       for r in t["rewards"].values())]
    advs = [a for t in traces if (a := finite_float(dict_or_empty(t.get("info")).get("advantage"))) is not None]
    nodes = [n for t in traces for n in list_or_empty(t.get("nodes")) if isinstance(n, dict)]
    stop = traces[-1].get("stop_condition") if traces else None
    calls = [c for c in list_or_empty(traces[-1].get("calls"))
             if isinstance(c, dict) and not c.get("error")] if traces else []
    timing = traces[0].get("timing") if traces and isinstance(traces[0].get("timing"), dict) else {}
    dispatch = finite_float(dict_or_empty(info0.get("dispatch")).get("time"))
    arrival = finite_float(dict_or_empty(info0.get("arrival")).get("time"))
    env, group = dict_or_empty(rec.get("env")), rec.get("group")
    phases = sum(e - s for v in timing.values() if isinstance(v, dict)
                 and (s := finite_float(v.get("start"))) is not None
                 and (e := finite_float(v.get("end"))) is not None)

    def count(key: str) -> int | None:  # the episode's, else the sum over its traces
        return _int(rec[key] if key in rec else sum(_int(t.get(key)) or 0 for t in traces))  # (sums: Int64 too)
    return {
        "id": rec.get("id") or info0.get("episode_id"),
        "env": env.get("name") or env.get("id") or rec.get("env_name") or info0.get("env_name"),
        "group": group.get("id") if isinstance(group, dict) else rec.get("group_id") or info0.get("group_id"),
        "ok": rec.get("ok"), "num_errors": len(list_or_empty(rec.get("errors"))),
        "reward": sum(rewards) / len(rewards) if rewards else None,
        "advantage": sum(advs) / len(advs) if advs else None,
        "input_tokens": count("num_input_tokens"), "output_tokens": count("num_output_tokens"),
        "turns": sum(1 for n in nodes if dict_or_empty(n.get("message")).get("role") == "assistant"),
        "stop_condition": stop if isinstance(stop, str) else None,
        "truncated": (isinstance(stop, str) and stop in TRUNCATING) or bool(calls and calls[-1].get("finish_reason") == "length"),
        "duration": arrival - dispatch if arrival is not None and dispatch is not None else phases or None,
    }


def _scan(path: str) -> list[dict]:
    """{offset, length, **index_row(record)} per complete line of a rollouts file."""
    return _objects(path, "prime-rl-rollouts", lambda off, n, rec: {"offset": off, "length": n, **index_row(rec)})


def list_rollouts(run_path: str) -> pd.DataFrame:
    """One row per line of `all/` (else `effective/`) per step and kind; an episode with a copy in
    `effective/` is read there (it carries `info.advantage` and node advantages) and has
    `trainer_step` = its step."""
    out = []
    for (step, kind), files in rollout_files(run_path).items():
        eff = {r["id"]: r for r in _scan(files["effective"])} if "effective" in files else {}
        base = files.get("all") or files["effective"]
        for k, row in enumerate(_scan(base)):
            copy = eff.get(row["id"]) if row["id"] is not None else None
            path, at = (files["effective"], copy) if copy is not None else (base, row)
            n_err = row["num_errors"]
            out.append({
                "sample_id": f"{step}-{kind}-{k}", "episode_id": row["id"], "split": kind, "step": step,
                "trainer_step": step if copy is not None or base == files.get("effective") else None,
                "group_id": row["group"], "env": row["env"], "reward": row["reward"], "advantage": at["advantage"],
                "ok": row["ok"] if isinstance(row["ok"], bool) else None,
                "error": f"{n_err} error{'s' if n_err > 1 else ''}" if n_err else None,
                "status": row["stop_condition"], "truncated": row["truncated"], "input_tokens": row["input_tokens"],
                "output_tokens": row["output_tokens"], "turns": row["turns"], "duration_s": row["duration"],
                "locator": frames.line_locator(path, at["offset"], at["length"])})
    return frames.typed(out, frames.SAMPLES)


def samples(run_path: str) -> pd.DataFrame:
    """The episodes of the newest layout present (spec 9's traces checklist); without a stream
    index, those of the older layouts and of a verifiers eval run's `traces.jsonl` (spec 5.8,
    `prime_rl_variants`)."""
    from rundash_core.sources.prime_rl.variants import eval_samples, legacy_samples

    folder = traces_dir(run_path)
    if file_id(os.path.join(folder, "stream.index.jsonl")) is not None:
        return list_samples(run_path)
    parts = [f for f in (list_rollouts(run_path), legacy_samples(run_path), eval_samples(run_path)) if len(f)]
    return frames.typed(pd.concat(parts, ignore_index=True), frames.SAMPLES) if parts else frames.empty(frames.SAMPLES)


# Reading one episode ------------------------------------------------------------------------------------
def read_annotations(folder: str, trace_id: str, ann: dict) -> list[dict]:
    """The annotation records of a trace, in folding order (a record that cannot be read is skipped)."""
    out = []
    for producer, row in ann.get(trace_id, []):
        offset = _int(row.get("offset"))
        if offset is None:
            continue
        chunk = _int(row.get("chunk"))
        plain = (chunk_path(os.path.join(folder, "annotations", producer), chunk) if chunk is not None
                 else os.path.join(folder, "annotations", f"{producer}.jsonl"))
        try:
            rec = orjson.loads(read_record_line(plain, offset))
        except (OSError, KeyError, orjson.JSONDecodeError, zst_seekable.SeekableError):
            continue
        if isinstance(rec, dict) and rec.get("trace_id") == trace_id:
            out.append(rec)
    return out


def read_episode(run_path: str, run_id: str, samples: pd.DataFrame | None, sample_id: str) -> frames.Episode:
    """The episode of a listed sample, by its sample id or episode id (`samples`: the listing to
    find it in; None: `sample_row`). KeyError: no such sample; RunError naming the file: its record
    cannot be read (the file is named on Problems too)."""
    row = (episode_ids.row(samples, sample_id, run_id) if samples is not None
           else sample_row(run_path, sample_id, run_id))
    sample_id = row["sample_id"]
    if row.get("step") is not None:
        row["step"] = int(row["step"])
    plain, offset, length = frames.parse_line_locator(row["locator"])
    from rundash_core.sources.prime_rl.variants import is_legacy, legacy_episode

    if is_legacy(plain):  # a pre-Jul-9 rollout dict: shown raw
        return legacy_episode(run_id, row)
    cut = 0
    try:
        raw = read_record_line(plain, offset, length)
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            if not is_too_deep(e):
                raise
            record, cut = loads_shallow(raw)
    except OSError as e:  # (mode 000, gone, outside the roots): the file is named on Problems too
        why = (e.strerror or str(e)).lower()
        raise RunError(f"{run_id}: sample {sample_id} cannot be read: {shown_path(e.filename or plain)}: {why}") from e
    except (orjson.JSONDecodeError, zst_seekable.SeekableError) as e:
        raise RunError(f"{run_id}: sample {sample_id} cannot be read: {shown_path(plain)} at byte {offset}: {e}") from e
    except TornRecord as e:
        raise RunError(f"{run_id}: sample {sample_id} cannot be read: {shown_path(plain)}: the line at byte {offset} "
                       "is not complete (cut short, or still being written)") from e
    if not isinstance(record, dict):
        raise KeyError(f"{run_id}: sample {sample_id!r} is not an episode record")
    folder = traces_dir(run_path)
    ann = annotation_index(folder)
    anns = {t.get("id"): read_annotations(folder, t.get("id"), ann)
            for t in list_or_empty(record.get("traces")) if isinstance(t, dict) and isinstance(t.get("id"), str)}
    ep = to_episode(record, row, run_id, anns)
    if cut:
        ep.error = "; ".join(filter(None, [ep.error, f"{shown_path(plain)}: the record at {offset} is nested too deep "
                                           f"({cut} part(s) shown as {DEEP_MARK!r})"]))
        DEEP_RECORDS.setdefault(os.path.realpath(plain), set()).add(offset)
    return ep


DEEP_RECORDS: dict[str, set[int]] = {}  # chunk -> offsets of the records opened so far found too deep


def deep_record_problems(run_path: str) -> list[Problem]:
    """The chunks whose records, opened so far, were nested too deep (shown cut, `DEEP_MARK`): the
    listing reads only the index, so a record is known to be too deep once `episode()` opened it."""
    root = os.path.realpath(run_path) + os.sep
    return [Problem(shown_path(path), f"records nested too deep (shown cut; first at byte {min(offsets)})",
                    len(offsets)) for path, offsets in list(DEEP_RECORDS.items()) if path.startswith(root)]
