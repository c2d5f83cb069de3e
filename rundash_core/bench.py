"""Benchmarks: `python -m rundash_core.bench <subcommand>`.

Subcommands (more are expected: `discovery`, `verl`, `charts`):

- `metrics`: generate a large synthetic prime-rl run (`monitors/file/metrics.jsonl`, about 10k steps,
  a trainer and an orchestrator with ~300 keys each, time-keyed inference rows) and compare
  rundash's cold load into the tidy frame with `pandas.read_json(lines=True)` and
  `pyarrow.json.read_json` (the raw-parse reference), plus the cost of a refresh after 10 appended
  rows. Every contender runs in a fresh subprocess (`_one <contender> <path>`), so its peak RSS is
  its own. The tidy frame is checked against an independent pure-Python merge of the file.

- `_one <contender> <path>`: internal; measures one contender in this process and prints one JSON
  object on stdout.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

import numpy as np

# Synthetic prime-rl metrics ----------------------------------------------------------------------

ENVS = [
    "reverse-text", "gsm8k", "math-python", "hendrycks-math", "wordle", "sudoku", "alphabet-sort",
    "wiki-search", "code-contests", "livecodebench", "aime2024", "aime2025", "mmlu-pro", "gpqa",
    "ifeval", "tau-bench", "swe-gym", "terminal-bench", "countdown", "arc-agi", "logic-puzzles",
    "pydantic-adherence", "unscramble", "acereason-math",
]
EVAL_ENVS = ["aime2025", "gpqa"]
STATS5 = ("mean", "max", "min", "p10", "p90")
TENSOR5 = ("mean", "median", "std", "min", "max")
EPISODE_QTY = ("num_total_tokens", "num_input_tokens", "num_output_tokens", "num_turns", "num_branches")
TIMING = ("setup", "agent", "finalize", "scoring", "agent/model", "agent/harness", "total")


def _env(i: int) -> str:
    return ENVS[i] if i < len(ENVS) else f"env-{i}"


@dataclass
class Spec:
    """What to generate. Steps are 1..steps; `resume_back` steps are written twice (a resume)."""

    steps: int = 10000
    keys: int = 300  # per producer (step-keyed rows)
    seed: int = 0
    infer_every: int = 2  # one time-keyed inference row every N step positions
    periodic_every: int = 3  # one time-keyed dispatcher/... row every N step positions
    eval_every: int = 25  # one orch eval row (step-keyed) every N steps
    engines: int = 4
    resume_back: int = 3  # at 2/3 of the run, go back this many steps (0: no resume)
    start_time: float = 1758912000.0
    step_seconds: float = 30.0

    def step_sequence(self) -> list[int]:
        if self.resume_back <= 0 or self.steps < 3 * self.resume_back:
            return list(range(1, self.steps + 1))
        r = (2 * self.steps) // 3
        return list(range(1, r + 1)) + list(range(r - self.resume_back + 1, self.steps + 1))


def trainer_key_groups(n: int) -> list[list[str]]:
    """The RL trainer's 5 rows per step (perf, optim, tensor stats, time, system), ~n keys in all."""
    perf = [f"perf/{k}" for k in ("throughput", "throughput_per_gpu", "mfu", "peak_memory")]
    optim = ["optim/lr", "optim/grad_norm"]
    times = [f"time/{k}" for k in ("step", "wait_for_batch", "load_data", "broadcast_weights", "save_ckpt",
                                    "forward_backward")]
    system = [f"system/ckpt_disk_{k}" for k in ("free_gib", "used_gib", "total_gib", "free_ratio")]
    fixed = len(perf) + len(optim) + len(times) + len(system)

    def tensor_keys() -> Iterable[str]:
        yield from (f"loss/{s}" for s in TENSOR5)
        yield from (f"entropy/all/{s}" for s in ("mean", "std", "max"))
        yield from (f"mismatch_kl/all/{s}" for s in ("mean", "max"))
        yield "kl_ent_ratio/mean"
        for base in ("is_masked/all", "masked_mismatch_kl/all", "unmasked_mismatch_kl/all"):
            yield from (f"{base}/{s}" for s in ("mean", "max"))
        yield from (f"max_vio/{s}" for s in TENSOR5)
        yield from (f"routing_confidence/{s}" for s in TENSOR5)
        i = 0
        while True:
            env = _env(i)
            yield from (f"entropy/{env}/{s}" for s in ("mean", "std", "max"))
            for base in ("mismatch_kl", "masked_mismatch_kl", "unmasked_mismatch_kl", "is_masked"):
                yield from (f"{base}/{env}/{s}" for s in ("mean", "max"))
            i += 1

    want = max(n - fixed, 5)
    tensor = []
    for k in tensor_keys():
        if len(tensor) >= want:
            break
        tensor.append(k)
    return [perf, optim, tensor, times, system]


def _scope_keys(scope: str, train: bool) -> Iterable[str]:
    for subset in ("all", "effective"):
        yield from (f"{scope}/{subset}/agent/reward/{s}" for s in STATS5)
    yield f"{scope}/all/has_error/mean"
    yield f"{scope}/all/cancelled/mean"
    for subset in ("all", "effective"):
        for q in EPISODE_QTY:
            yield from (f"{scope}/{subset}/{q}/{s}" for s in STATS5)
    for subset in ("all", "effective"):
        yield f"{scope}/{subset}/agent/is_truncated/mean"
        yield f"{scope}/{subset}/agent/is_completed/mean"
        yield from (f"{scope}/{subset}/agent/timing/{t}/mean" for t in TIMING)
        yield f"{scope}/{subset}/agent/stop_condition/generation_truncated"
        yield f"{scope}/{subset}/agent/metrics/correct_answer/mean"
    yield from (f"{scope}/all/agent/solved_{w}" for w in ("none", "all", "some"))
    if train:
        yield f"{scope}/effective/agent/is_trainable/mean"
        yield f"{scope}/effective/agent/is_admitted/mean"


def orch_train_keys(n: int) -> list[str]:
    """The orchestrator's one big row per step: progress, time, off_policy, batch, episode stats."""
    keys = [f"progress/{k}" for k in ("tokens", "input_tokens", "output_tokens", "rollouts", "tasks",
                                      "total_tokens", "total_rollouts", "total_tasks")]
    keys += [f"time/{k}" for k in ("step", "pack", "save_ckpt", "wait_for_policy")]
    keys += ["off_policy/mean", "off_policy/max", "off_policy/dropped"]
    keys += [f"off_policy/{a}/{s}" for a in ("in_flight", "in_queue") for s in ("mean", "max")]

    def scoped() -> Iterable[str]:
        yield from _scope_keys("train/agg", True)
        i = 0
        while True:
            yield f"batch/{_env(i)}"
            yield from _scope_keys(f"train/{_env(i)}", True)
            i += 1

    for k in scoped():
        if len(keys) >= n:
            break
        keys.append(k)
    return keys


ORCH_ERROR_KEYS = [f"train/agg/all/agent/error/{e}" for e in ("TimeoutError", "ContextLengthExceeded", "SandboxError")]


def orch_eval_keys() -> list[str]:
    keys = []
    for env in EVAL_ENVS:
        scope = f"eval/{env}"
        keys += [f"{scope}/all/agent/avg@4", f"{scope}/effective/agent/pass@1", f"{scope}/effective/agent/pass@4",
                 f"{scope}/effective/agent/pass^4", f"{scope}/all/cancelled/mean", f"{scope}/all/has_error/mean",
                 f"{scope}/policy_version"]
        keys += [f"{scope}/all/{q}/{s}" for q in ("num_total_tokens", "num_turns") for s in STATS5]
    return keys


def inference_keys(engines: int) -> list[str]:
    keys = []
    for e in range(engines):
        keys += [f"inference/server{e}.0/{k}" for k in ("num_requests_running", "num_requests_waiting",
                                                        "kv_cache_usage_perc")]
    for k in ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting"):
        keys += [f"inference/agg/{k}/{s}" for s in ("min", "max", "sum", "mean", "median")]
    keys += ["inference/agg/generation_tokens_total:rate/sum", "inference/agg/prompt_tokens_total:rate/sum",
             "inference/agg/prefix_cache_hit_rate/pooled"]
    for phase, k in (("agg", "time_to_first_token_seconds"), ("decode", "inter_token_latency_seconds"),
                     ("prefill", "request_prefill_time_seconds")):
        keys += [f"inference/{phase}/{k}/{p}" for p in ("p50", "p90", "p99")]
    return keys


def periodic_keys() -> list[str]:
    return ["dispatcher/inflight/train", "dispatcher/inflight/eval", "dispatcher/queued/eval",
            "dispatcher/errored/train", "dispatcher/errored/eval", "dispatcher/mode",
            "dispatcher/off_policy/mean", "dispatcher/off_policy/max", "dispatcher/cancelled/train",
            "concurrency/max_inflight", "watcher/policy_version", "event_loop_lag/mean",
            "event_loop_lag/max", "event_loop_lag/p99"]


_INTEGRAL = ("num_total_tokens", "num_input_tokens", "num_output_tokens", "num_turns", "num_branches")


def _value_model(key: str) -> tuple[float, float, str]:
    """(low, high, format) of a key's values; format: float | int | intfloat | zero (mostly 0)."""
    leaf = key.rsplit("/", 1)[-1]
    if key.startswith("progress/"):
        return 1e4, 1e9, "int"
    if "/error/" in key or key.startswith(("dispatcher/inflight", "dispatcher/queued", "dispatcher/errored",
                                           "dispatcher/cancelled", "dispatcher/mode", "concurrency/",
                                           "watcher/")):
        return 0, 256, "int"
    if key.endswith("time/save_ckpt"):
        return 0, 400, "zero"
    if any(q in key for q in _INTEGRAL):
        scale = 8 if ("turns" in key or "branches" in key) else 4096
        return 1, scale, ("intfloat" if leaf in ("max", "min", "p10", "p90") else "float")
    if key == "optim/lr":
        return 1e-7, 3e-6, "float"
    if key.startswith("perf/throughput"):
        return 1e3, 3e4, "float"
    if key.startswith("time/") or "/timing/" in key:
        return 0.01, 60, "float"
    if key.startswith("system/"):
        return 1, 2048, "float"
    if key.startswith("loss/"):
        return -0.2, 0.2, "float"
    return 0, 1, "float"


class RowKind:
    """One kind of row (e.g. the trainer's optim row) and how to write many of them fast."""

    def __init__(self, name: str, keys: list[str], producer: str, step_keyed: bool, due: Callable[[int, int], bool],
                 dt: float, extras: list[str] | None = None, extra_p: float = 0.0):
        self.name, self.keys, self.producer, self.step_keyed, self.due, self.dt = name, keys, producer, step_keyed, due, dt
        self.prefix = [json.dumps(k) + ": " for k in keys]
        lo, hi, fmt = zip(*(_value_model(k) for k in keys)) if keys else ((), (), ())
        self.lo = np.array(lo, dtype=float)
        self.span = np.array(hi, dtype=float) - self.lo
        self.int_cols = [j for j, f in enumerate(fmt) if f == "int"]
        self.intfloat_cols = [j for j, f in enumerate(fmt) if f == "intfloat"]
        self.zero_cols = [(j, self.lo[j] + 0.95 * self.span[j]) for j, f in enumerate(fmt) if f == "zero"]
        self.extras = [json.dumps(k) + ": " for k in (extras or [])]
        self.extra_p = extra_p
        self.tail = f', "producer": "{producer}"}}\n'

    def lines(self, rng: np.random.Generator, items: list[tuple[int | None, float]]) -> list[str]:
        """JSON lines for (step, time) items (step None: a time-keyed row)."""
        if not items:
            return []
        vals = (self.lo + self.span * rng.random((len(items), len(self.keys)))).tolist()
        extra = rng.random((len(items), len(self.extras))) < self.extra_p if self.extras else None
        out = []
        for i, ((step, t), row) in enumerate(zip(items, vals)):
            strs = list(map(repr, row))
            for j in self.int_cols:
                strs[j] = str(int(row[j]))
            for j in self.intfloat_cols:
                strs[j] = repr(float(int(row[j])))
            for j, cut in self.zero_cols:
                if row[j] < cut:
                    strs[j] = "0"
            body = ", ".join(map(str.__add__, self.prefix, strs))
            if extra is not None:
                for p, on in zip(self.extras, extra[i]):
                    if on:
                        body += f", {p}{int(rng.integers(1, 6))}"
            head = '{"step": %s, "time": %r, ' % ("null" if step is None else step, round(t, 6))
            out.append(head + body + self.tail)
        return out


def row_kinds(spec: Spec) -> list[RowKind]:
    """Row kinds in the order they are written within one step."""
    groups = trainer_key_groups(spec.keys)
    always = lambda pos, step: True  # noqa: E731
    kinds = [
        RowKind("orch", orch_train_keys(spec.keys), "orch", True, always, 0.0, ORCH_ERROR_KEYS, 0.1),
        RowKind("inference", inference_keys(spec.engines), "orch", False,
                lambda pos, step: pos % spec.infer_every == 0, 4.0),
    ]
    for name, keys, dt in zip(("perf", "optim", "tensor", "time", "system"), groups, (20.0, 20.01, 20.05, 20.06, 20.07)):
        kinds.append(RowKind(f"trainer-{name}", keys, "trainer", True, always, dt))
    kinds.append(RowKind("periodic", periodic_keys(), "orch", False, lambda pos, step: pos % spec.periodic_every == 0, 25.0))
    kinds.append(RowKind("eval", orch_eval_keys(), "orch", True, lambda pos, step: step % spec.eval_every == 0, 28.0))
    return kinds


@dataclass
class Generated:
    path: str
    run_dir: str
    bytes: int
    lines: int
    values: int  # metric values written (before any merge)
    seconds: float
    positions: int


def _write_positions(f, spec: Spec, kinds: list[RowKind], rng, positions: list[tuple[int, int]],
                     t0: float, limit: int | None = None) -> tuple[int, int]:
    """Write the rows of (position, step) pairs; stop after `limit` rows. Returns (lines, values)."""
    per_kind: list[dict[int, str]] = []
    values = 0
    for kind in kinds:
        due = [(pos, step) for pos, step in positions if kind.due(pos, step)]
        items = [(step if kind.step_keyed else None, t0 + pos * spec.step_seconds + kind.dt) for pos, step in due]
        lines = kind.lines(rng, items)
        per_kind.append({pos: line for (pos, _), line in zip(due, lines)})
    written = 0
    out = []
    for pos, _step in positions:
        for d in per_kind:
            line = d.get(pos)
            if line is not None:
                if limit is not None and written >= limit:
                    break
                out.append(line)
                values += line.count('": ') - 3  # minus step, time, producer
                written += 1
    f.write("".join(out))
    return written, values


def generate_run(run_dir: str, spec: Spec, chunk: int = 256) -> Generated:
    """A prime-rl run dir (`configs/` so it is detected) with `monitors/file/metrics.jsonl`."""
    start = time.perf_counter()
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(os.path.join(run_dir, "configs"))
    os.makedirs(os.path.join(run_dir, "monitors", "file"))
    path = os.path.join(run_dir, "monitors", "file", "metrics.jsonl")
    rng = np.random.default_rng(spec.seed)
    kinds = row_kinds(spec)
    seq = spec.step_sequence()
    lines = values = 0
    with open(path, "w", encoding="utf-8", buffering=8 << 20) as f:
        for i in range(0, len(seq), chunk):
            positions = [(i + j, s) for j, s in enumerate(seq[i:i + chunk])]
            n, v = _write_positions(f, spec, kinds, rng, positions, spec.start_time)
            lines += n
            values += v
    return Generated(path, run_dir, os.path.getsize(path), lines, values, time.perf_counter() - start, len(seq))


def append_rows(path: str, spec: Spec, first_step: int, first_time: float, n_rows: int, seed: int) -> list[str]:
    """Append `n_rows` realistic rows continuing the run at `first_step`; returns the lines."""
    import io

    kinds = row_kinds(spec)
    rng = np.random.default_rng(seed)
    positions = [(j, first_step + j) for j in range(n_rows)]
    buf = io.StringIO()
    _write_positions(buf, spec, kinds, rng, positions, first_time, limit=n_rows)
    text = buf.getvalue()
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return text.splitlines()


# Independent merge (pure Python) --------------------------------------------------------------------

@dataclass
class Merged:
    """Metrics merged by the spec's rule, without rundash: step groups and time-keyed row counts."""

    groups: dict = field(default_factory=dict)  # (producer, step) -> {key: value}; "time" → max time
    timed_rows: int = 0
    timed_values: dict = field(default_factory=dict)  # producer -> number of values

    @property
    def tidy_rows(self) -> int:
        return sum(len(g) - 1 for g in self.groups.values()) + sum(self.timed_values.values())


def independent_merge(lines: Iterable[bytes | str], loads: Callable = json.loads) -> Merged:
    """Group step rows by (producer, step), last value wins per key; time-keyed rows count per row."""
    m = Merged()
    for raw in lines:
        if not raw.strip():
            continue
        row = loads(raw)
        prod = row.pop("producer", None)
        step = row.pop("step", None)
        t = row.pop("time", None)
        if step is None:
            m.timed_rows += 1
            m.timed_values[prod] = m.timed_values.get(prod, 0) + len(row)
            continue
        g = m.groups.get((prod, step))
        if g is None:
            g = m.groups[(prod, step)] = {"time": t}
        else:
            g["time"] = max(g["time"], t)
        g.update(row)
    return m


def _loads() -> Callable:
    try:
        import orjson

        return orjson.loads
    except ImportError:  # pragma: no cover
        return json.loads


def verify_tidy(tidy, merged: Merged, samples: int = 100) -> dict:
    """Compare a tidy frame with an independent merge: counts per (producer, step), sampled values."""
    import pandas as pd

    stepped = tidy[tidy["step"].notna()]
    sizes = stepped.groupby(["producer", "step"], observed=True).size()
    got = {(str(p), int(s)): int(n) for (p, s), n in sizes.items()}
    want = {k: len(g) - 1 for k, g in merged.groups.items()}
    group_mismatch = sum(1 for k in set(got) | set(want) if got.get(k) != want.get(k))
    timed = tidy[tidy["step"].isna()]
    timed_got = {str(p): int(n) for p, n in timed.groupby("producer", observed=True).size().items() if n}
    steps = {s for _, s in merged.groups}
    sample_every = max(1, len(steps) // samples)
    sample_steps = sorted(s for s in steps if s % sample_every == 0)
    sample = stepped[stepped["step"].isin(sample_steps)]
    value_mismatch = checked = 0
    for prod, step, metric, value, t in zip(sample["producer"].astype(str), sample["step"].astype(int),
                                            sample["metric"].astype(str), sample["value"], sample["time"]):
        g = merged.groups.get((prod, step), {})
        checked += 1
        if g.get(metric) is None or float(g[metric]) != value or g["time"] != t:
            value_mismatch += 1
    expected_sample = sum(len(g) - 1 for (p, s), g in merged.groups.items() if s % sample_every == 0)
    return {
        "tidy_rows": int(len(tidy)),
        "independent_rows": merged.tidy_rows,
        "groups": len(want),
        "group_count_mismatches": group_mismatch,
        "timed_rows_tidy": timed_got,
        "timed_rows_independent": {str(k): v for k, v in merged.timed_values.items() if v},
        "sample_every": sample_every,
        "values_checked": checked,
        "values_expected": expected_sample,
        "value_mismatches": value_mismatch + abs(expected_sample - checked),
        "ok": (len(tidy) == merged.tidy_rows and group_mismatch == 0 and value_mismatch == 0
               and checked == expected_sample and timed_got == {str(k): v for k, v in merged.timed_values.items() if v}),
        "pandas": pd.__version__,
    }


# One contender per process ----------------------------------------------------------------------

def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _run_dir_of(path: str) -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))


def _cold_rundash(path: str):
    import rundash_core as rd
    from rundash_core import cache

    cache.shared.clear()
    gc.collect()
    t = time.perf_counter()
    run = rd.open_run(_run_dir_of(path))
    frame = run.metrics()
    return time.perf_counter() - t, run, frame


def measure_one(contender: str, path: str, spec: Spec | None = None, refresh_repeat: int = 5,
                profile: bool = False) -> dict:
    """Measure one contender in this process. Peak RSS is meaningful only in a fresh process."""
    import pandas as pd
    import pyarrow.json as pj

    import rundash_core  # noqa: F401  (imports counted in the baseline, not in the measurement)

    gc.collect()
    base = _rss_mb()
    out: dict = {"contender": contender, "baseline_rss_mb": base}
    if contender == "rundash":
        secs, _run, frame = _cold_rundash(path)
        out.update(seconds=secs, rows=len(frame), shape=f"{len(frame)}×{frame.shape[1]}")
    elif contender == "pandas":
        t = time.perf_counter()
        df = pd.read_json(path, lines=True)
        out.update(seconds=time.perf_counter() - t, rows=len(df), shape=f"{df.shape[0]}×{df.shape[1]}")
    elif contender == "pyarrow":
        t = time.perf_counter()
        table = pj.read_json(path)
        out.update(seconds=time.perf_counter() - t, rows=table.num_rows, shape=f"{table.num_rows}×{table.num_columns}")
    elif contender == "pyarrow-tuned":
        block = min(max(os.path.getsize(path) // 8, 1 << 20), 64 << 20)  # the block size rundash uses
        t = time.perf_counter()
        table = pj.read_json(path, read_options=pj.ReadOptions(block_size=block))
        out.update(seconds=time.perf_counter() - t, rows=table.num_rows, shape=f"{table.num_rows}×{table.num_columns}",
                   block_mb=block / (1 << 20))
    elif contender == "verify":
        secs, _run, frame = _cold_rundash(path)
        with open(path, "rb") as f:
            merged = independent_merge(f, _loads())
        out.update(seconds=secs, rows=len(frame), verify=verify_tidy(frame, merged))
    elif contender == "refresh":
        out.update(_measure_refresh(path, spec or Spec(), refresh_repeat))
    elif contender == "phases":
        out.update(_measure_phases(path, profile))
    else:
        raise SystemExit(f"unknown contender {contender!r}")
    out["peak_rss_mb"] = _rss_mb()
    out["delta_rss_mb"] = out["peak_rss_mb"] - base
    return out


def _measure_refresh(path: str, spec: Spec, repeat: int) -> dict:
    cold, run, frame = _cold_rundash(path)
    rss_cold = _rss_mb()
    store = run.store()
    rows0 = len(frame)
    best = {"metrics": float("inf"), "refresh": float("inf"), "tidy": float("inf")}
    expected = got = 0
    ok = True
    for r in range(max(repeat, 1)):
        # round A: append 10 rows, time the public call (poll + parse + ingest + tidy rebuild)
        before = len(run.metrics())
        lines = append_rows(path, spec, store.max_step() + 1, store.last_time + 1.0, 10, seed=1000 + 2 * r)
        t = time.perf_counter()
        frame = run.metrics()
        best["metrics"] = min(best["metrics"], time.perf_counter() - t)
        delta = independent_merge(lines).tidy_rows
        expected += delta
        got += len(frame) - before
        ok &= len(frame) - before == delta
        # round B: append 10 more rows, time store.refresh() and the tidy rebuild separately
        before = len(frame)
        lines = append_rows(path, spec, store.max_step() + 1, store.last_time + 1.0, 10, seed=1001 + 2 * r)
        t = time.perf_counter()
        store.refresh()
        best["refresh"] = min(best["refresh"], time.perf_counter() - t)
        t = time.perf_counter()
        frame = store.tidy()
        best["tidy"] = min(best["tidy"], time.perf_counter() - t)
        delta = independent_merge(lines).tidy_rows
        expected += delta
        got += len(frame) - before
        ok &= len(frame) - before == delta
    return {"seconds": cold, "rows": rows0, "rss_after_cold_mb": rss_cold, "refresh_metrics_s": best["metrics"],
            "refresh_store_s": best["refresh"], "refresh_tidy_s": best["tidy"], "rounds": max(repeat, 1),
            "appended_values_expected": expected, "appended_values_got": got, "refresh_ok": bool(ok)}


def _measure_phases(path: str, profile: bool) -> dict:
    """Time the phases of a cold load by wrapping rundash's internals (in this process only)."""
    from rundash_core import metricstore as ms
    from rundash_core.io import jsonl

    import pyarrow.json as pj

    phases: dict[str, float] = {}
    originals: list[tuple[object, str, object]] = []

    def wrap(owner, attr: str, label: str) -> None:
        """Time every call of owner.attr under `label`; internals that no longer exist are skipped."""
        fn = getattr(owner, attr, None)
        if fn is None:
            return
        originals.append((owner, attr, fn if not isinstance(owner, type) else owner.__dict__.get(attr, fn)))
        phases[label] = 0.0

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phases[label] += time.perf_counter() - t

        setattr(owner, attr, timed)

    class _TimedPattern:
        """Stands in for a compiled regex module attribute so its scans are timed."""

        def __init__(self, pattern, label: str):
            self._p, self._label = pattern, label

        def __getattr__(self, name):
            real = getattr(self._p, name)
            if not callable(real):
                return real

            def timed(*a, **k):
                t = time.perf_counter()
                try:
                    return real(*a, **k)
                finally:
                    phases[self._label] += time.perf_counter() - t

            return timed

    wrap(jsonl, "read_range", "read file (read_range)")
    wrap(jsonl, "parse_jsonl_bytes", "parse_jsonl_bytes")
    wrap(jsonl, "_arrow_parse", "  _arrow_parse")
    for attr in [a for a, v in vars(jsonl).items() if hasattr(v, "search") and hasattr(v, "pattern")]:
        label = f"    regex scan ({attr})"
        originals.append((jsonl, attr, getattr(jsonl, attr)))
        phases[label] = 0.0
        setattr(jsonl, attr, _TimedPattern(getattr(jsonl, attr), label))
    wrap(pj, "read_json", "    pyarrow.json.read_json")
    wrap(ms.MetricStore, "_ingest", "ingest/merge (MetricStore._ingest)")
    wrap(ms, "_numeric", "  column → numpy (_numeric)")
    wrap(ms.MetricStore, "_producers", "  producer column (_producers)")
    wrap(ms.MetricStore, "_merge_stepped", "  merge step rows (_merge_stepped)")
    wrap(ms, "_last_per_group", "    last value per group (_last_per_group)")
    wrap(ms.MetricStore, "_append_timed", "  time-keyed rows (_append_timed)")
    wrap(ms.MetricStore, "_build_tidy", "tidy build (MetricStore._build_tidy)")
    wrap(ms, "_tidy_frame", "  DataFrame assembly (_tidy_frame)")
    try:
        total, _run, frame = _cold_rundash(path)
    finally:
        for owner, attr, fn in reversed(originals):
            setattr(owner, attr, fn)
    del _run, frame
    prof_text = _cprofile_cold_load(path) if profile else None
    return {"seconds": total, "rows": None, "phases": phases, "cprofile": prof_text}


def _cprofile_cold_load(path: str, top: int = 20) -> str:
    """cProfile of one more cold load, without the phase wrappers (they would hide C calls)."""
    import cProfile
    import io
    import pstats

    gc.collect()
    prof = cProfile.Profile()
    prof.enable()
    _cold_rundash(path)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


# Running contenders in fresh processes --------------------------------------------------------------

def run_one_subprocess(contender: str, path: str, extra: list[str] | None = None) -> dict:
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "rundash_core.bench", "_one", contender, path, *(extra or [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Report -----------------------------------------------------------------------------------------

def format_table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A markdown table with aligned columns; columns in `right` are right-aligned."""
    right = right or set()
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]

    def line(cells):
        return "| " + " | ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def _insert_after(d: dict, after: str, key: str, value) -> dict:
    out = {}
    for k, v in d.items():
        if k != key:
            out[k] = v
        if k == after:
            out[key] = value
    return out


def _s(x: float) -> str:
    return f"{x:.3f}" if x >= 0.1 else f"{x * 1000:.1f} ms"


def _mb(x: float | None) -> str:
    return "" if x is None else f"{x:,.0f}"


def build_report(gen: Generated, results: dict, in_process: bool) -> tuple[str, dict]:
    rd_, pd_, pa_, pt_, ver, ref = (results[k] for k in ("rundash", "pandas", "pyarrow", "pyarrow-tuned", "verify", "refresh"))
    def rss(r: dict) -> list[str]:
        return ["n/a", "n/a"] if in_process else [_mb(r["peak_rss_mb"]), _mb(r["delta_rss_mb"])]

    rows = [
        ["rundash cold load: open_run().metrics() → tidy", _s(rd_["seconds"]), *rss(rd_), f"{rd_['rows']:,} tidy rows"],
        ["pandas.read_json(lines=True)", _s(pd_["seconds"]), *rss(pd_), f"{pd_['shape']} wide, unmerged"],
        ["pyarrow.json.read_json (raw parse)", _s(pa_["seconds"]), *rss(pa_), f"{pa_['shape']} table, unmerged"],
        [f"  same, block_size={pt_['block_mb']:.0f} MB as rundash uses", _s(pt_["seconds"]), *rss(pt_), "(for reference)"],
        ["rundash refresh after +10 rows: run.metrics()", _s(ref["refresh_metrics_s"]), "", "",
         f"best of {ref['rounds']}, same process as a cold load"],
        ["  store.refresh() alone (poll+parse+ingest)", _s(ref["refresh_store_s"]), "", "", ""],
        ["  store.tidy() rebuild alone", _s(ref["refresh_tidy_s"]), "", "", ""],
    ]
    table = format_table(["measurement", "time (s)", "peak RSS (MB)", "Δ RSS (MB)", "result"], rows, right={1, 2, 3})
    v = ver["verify"]
    checks_data = {
        "pandas_over_rundash": pd_["seconds"] / rd_["seconds"],
        "rundash_over_pyarrow": rd_["seconds"] / pa_["seconds"],
        "refresh_over_cold": ref["refresh_metrics_s"] / rd_["seconds"],
        "tidy_ok": bool(v["ok"]),
        "refresh_rows_ok": bool(ref["refresh_ok"]),
    }
    pf = lambda ok: "PASS" if ok else "MISS"  # noqa: E731
    checks = [
        ["pandas / rundash", f"{checks_data['pandas_over_rundash']:.1f}×", "≥ 4×", pf(checks_data["pandas_over_rundash"] >= 4)],
        ["rundash / pyarrow", f"{checks_data['rundash_over_pyarrow']:.2f}×", "≤ 1.5×", pf(checks_data["rundash_over_pyarrow"] <= 1.5)],
        ["(rundash / pyarrow with rundash's block size)", f"{rd_['seconds'] / pt_['seconds']:.2f}×", "", "info"],
        ["refresh / cold", f"{100 * checks_data['refresh_over_cold']:.2f}%", "< 5%", pf(checks_data["refresh_over_cold"] < 0.05)],
        ["tidy rows = independent merge", f"{v['tidy_rows']:,} = {v['independent_rows']:,}", "equal",
         pf(v["tidy_rows"] == v["independent_rows"])],
        ["per-(producer, step) counts", f"{v['groups']:,} groups, {v['group_count_mismatches']} off", "0 off",
         pf(v["group_count_mismatches"] == 0)],
        ["time-keyed values per producer", ", ".join(f"{k} {n:,}" for k, n in v["timed_rows_tidy"].items()) or "none",
         "= independent", pf(v["timed_rows_tidy"] == v["timed_rows_independent"])],
        [f"sampled values + time (1 step in {v['sample_every']})", f"{v['values_checked']:,} checked, {v['value_mismatches']} off",
         "0 off", pf(v["value_mismatches"] == 0)],
        ["refresh adds the appended values", f"{ref['appended_values_got']:,} = {ref['appended_values_expected']:,}",
         "equal", pf(ref["refresh_ok"])],
    ]
    check_table = format_table(["check", "value", "target", "result"], checks, right={1})
    head = (f"file: {gen.path}\n"
            f"      {gen.bytes / 1e6:,.1f} MB, {gen.lines:,} lines, {gen.positions:,} step positions, "
            f"{gen.values:,} metric values (before merge); generated in {gen.seconds:.1f} s")
    reps = len(rd_.get("all_seconds", [1]))
    head += (f"\n      best of {reps} run(s) per contender, each in a fresh process"
             if not in_process else "\n      measured in-process (peak RSS not per contender)")
    if "loadavg" in results:
        head += "\n      1-min load average before/after: " + " / ".join(f"{x:.2f}" for x in results["loadavg"])
    text = head + "\n\n" + table + "\n\n" + check_table
    if "phases" in results:
        ph = results["phases"]
        phs = dict(ph["phases"])
        if "parse_jsonl_bytes" in phs and "  _arrow_parse" in phs:
            phs = _insert_after(phs, "parse_jsonl_bytes", "  (scans before Arrow: NaN/Infinity, strip…)",
                                phs["parse_jsonl_bytes"] - phs["  _arrow_parse"])
        if "  _arrow_parse" in phs and "    pyarrow.json.read_json" in phs:
            rest = phs["  _arrow_parse"] - phs["    pyarrow.json.read_json"] - sum(
                v for k, v in phs.items() if k.startswith("    regex scan"))
            phs = _insert_after(phs, "    pyarrow.json.read_json", "    (rest of _arrow_parse: validate…)", rest)
        prow = [[k, _s(max(s, 0.0)), f"{100 * s / ph['seconds']:.0f}%"] for k, s in phs.items()]
        top = sum(s for k, s in ph["phases"].items() if not k.startswith(" "))
        prow.append(["other (open_run, store lookup, cache sizing…)", _s(max(ph["seconds"] - top, 0.0)),
                     f"{100 * max(ph['seconds'] - top, 0.0) / ph['seconds']:.0f}%"])
        prow.append(["total cold load (this run)", _s(ph["seconds"]), "100%"])
        text += "\n\nrundash cold-load phases (wrapped internals; indented = part of the line above)\n\n"
        text += format_table(["phase", "time (s)", "share"], prow, right={1, 2})
        if ph.get("cprofile"):
            text += "\n\ncProfile of another cold load (by tottime)\n" + ph["cprofile"]
    return text, checks_data


def cmd_metrics(args) -> int:
    spec = Spec(steps=args.steps, keys=args.keys, seed=args.seed)
    keep = args.dir is not None
    root = os.path.abspath(args.dir) if keep else tempfile.mkdtemp(prefix="rundash-bench-")
    os.makedirs(root, exist_ok=True)
    run_dir = os.path.join(root, "bench-run")
    try:
        print(f"generating {spec.steps:,} steps × {spec.keys} keys/producer into {run_dir} …", flush=True)
        gen = generate_run(run_dir, spec)
        print(f"generated {gen.bytes / 1e6:,.1f} MB ({gen.lines:,} lines) in {gen.seconds:.1f} s", flush=True)

        def one(contender: str, extra: list[str] | None = None) -> dict:
            if args.in_process:
                opts = _one_parser().parse_args([contender, gen.path, *(extra or [])])
                return measure_one(contender, gen.path, Spec(**json.loads(opts.spec)) if opts.spec else None,
                                   opts.refresh_repeat, opts.profile)
            return run_one_subprocess(contender, gen.path, extra)

        load0 = os.getloadavg()[0]
        results: dict = {}
        samples: dict[str, list[dict]] = {}
        for r in range(max(args.repeat, 1)):  # interleaved, so background load hits all alike
            for contender in ("rundash", "pyarrow", "pyarrow-tuned", "pandas"):
                print(f"measuring {contender} ({r + 1}/{max(args.repeat, 1)}) …", flush=True)
                samples.setdefault(contender, []).append(one(contender))
        for contender, runs in samples.items():
            best = dict(min(runs, key=lambda x: x["seconds"]))
            best["peak_rss_mb"] = max(x["peak_rss_mb"] for x in runs)
            best["delta_rss_mb"] = max(x["delta_rss_mb"] for x in runs)
            best["all_seconds"] = [x["seconds"] for x in runs]
            results[contender] = best
        print("verifying the tidy frame against an independent merge …", flush=True)
        results["verify"] = one("verify")
        print("timing cold-load phases …", flush=True)
        results["phases"] = one("phases", ["--profile"] if args.profile else [])
        print("measuring refresh after appending rows …", flush=True)
        results["refresh"] = one("refresh", ["--spec", json.dumps(asdict(spec)),
                                             "--refresh-repeat", str(args.refresh_repeat)])
        results["loadavg"] = [load0, os.getloadavg()[0]]
        text, checks = build_report(gen, results, args.in_process)
        print()
        print(text, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"generated": asdict(gen), "results": results, "checks": checks}, f, indent=1)
        return 0 if (checks["tidy_ok"] and checks["refresh_rows_ok"]) else 1
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


CONTENDERS = {
    "rundash": "cold load into the tidy frame",
    "pandas": "pandas.read_json(path, lines=True)",
    "pyarrow": "pyarrow.json.read_json(path), default options",
    "pyarrow-tuned": "pyarrow.json.read_json with rundash's block size",
    "verify": "cold load, then compare with an independent merge",
    "phases": "cold load with rundash's phases timed",
    "refresh": "cold load, then append rows and time the refresh",
}


def _one_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rundash_core.bench _one")
    p.add_argument("contender", choices=list(CONTENDERS))
    p.add_argument("path", help="the metrics.jsonl file")
    p.add_argument("--spec", help="generator Spec as JSON (refresh: how to write appended rows)")
    p.add_argument("--refresh-repeat", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rundash_core.bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("metrics", help="metrics.jsonl cold load / refresh vs pandas and pyarrow")
    m.add_argument("--steps", type=int, default=10000, help="training steps to generate (default 10000)")
    m.add_argument("--keys", type=int, default=300, help="metric keys per producer (default 300)")
    m.add_argument("--dir", help="write the run to DIR/bench-run (replaced if present) and keep it "
                   "(default: a temp dir, removed at the end)")
    m.add_argument("--repeat", type=int, default=1, help="cold-load runs per contender; the best counts (default 1)")
    m.add_argument("--refresh-repeat", type=int, default=5, help="refresh rounds; the best counts (default 5)")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--profile", action="store_true", help="also print a cProfile of rundash's cold load")
    m.add_argument("--in-process", action="store_true",
                   help="measure in this process (fast, for tests; peak RSS is then not per contender)")
    m.add_argument("--json", help="also write all measurements to this JSON file")
    m.set_defaults(func=cmd_metrics)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "_one":
        opts = _one_parser().parse_args(argv[1:])
        spec = Spec(**json.loads(opts.spec)) if opts.spec else None
        result = measure_one(opts.contender, opts.path, spec, opts.refresh_repeat, opts.profile)
        print(json.dumps(result))
        return 0
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
