"""`python -m benchmarks trackers` (TensorBoard part): loading a 200,000-event TensorBoard file.

Generates one run folder with one event file of verl-style scalars (records built with
tensorboardX's summary builders, framed here with vectorised checksums: tensorboardX's own writer
checksums in pure Python, 13 s for 200k records), then measures, each contender in a fresh process:

- `rundash`: cold load, `open_run(dir).metrics()` → the tidy frame;
- `floor`: reading and decoding the records alone: the framing loop and `Event.FromString` per
  record, nothing kept (what any reader of the file must at least do);
- `fields`: the floor plus taking each record's step, wall time, tag and value through protobuf's
  Python API (upb), one tuple per value: where the time of a protobuf-based reader goes (each
  sub-message touched costs about a microsecond, five times `FromString` of the whole record);
- `tbparse`: `tbparse.SummaryReader(dir).scalars`, what a notebook would do;
- `verify`: the tidy frame against tbparse's, value for value with wall times;
- `refresh`: after a cold load, append 100 events per round and time `run.metrics()`.

`rows()` returns the report's table rows (for `python -m benchmarks trackers`); `main()` runs it alone.
"""
from __future__ import annotations

import gc
import json
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from benchmarks.common import format_table, measure_here, pass_miss, secs, work_root

KEYS = ("critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean", "critic/advantages/mean",
        "actor/entropy", "actor/pg_loss", "actor/ppo_kl", "actor/pg_clipfrac", "actor/grad_norm", "actor/lr",
        "response_length/mean", "response_length/max", "response_length/clip_ratio", "prompt_length/mean",
        "perf/mfu/actor", "perf/throughput", "perf/max_memory_allocated_gb", "timing_s/gen", "timing_s/step",
        "timing_s/update_actor", "training/global_step", "training/epoch", "critic/vf_loss", "actor/kl_loss")
APPEND = 100  # events appended per refresh round
T0 = 1.79e9


# Writing -----------------------------------------------------------------------------------------------
def frame_records(datas: list[bytes]) -> bytes:
    """TFRecords of `datas` (tensorboard spec 2.1), the checksums computed for all records of one
    length at once."""
    from rundash_core.sources.tensorboard.events import masked_crc32c_rows

    lengths = np.array([len(d) for d in datas], dtype=np.uint64)
    heads = lengths.astype("<u8").view(np.uint8).reshape(-1, 8)
    head_crc = masked_crc32c_rows(heads)
    data_crc = np.empty(len(datas), np.uint32)
    for n in np.unique(lengths):
        idx = np.flatnonzero(lengths == n)
        rows = np.frombuffer(b"".join(datas[i] for i in idx), dtype=np.uint8).reshape(len(idx), int(n))
        data_crc[idx] = masked_crc32c_rows(rows)
    out = []
    for i, d in enumerate(datas):
        out += [heads[i].tobytes(), struct.pack("<I", int(head_crc[i])), d, struct.pack("<I", int(data_crc[i]))]
    return b"".join(out)


def events(first: int, count: int) -> list[bytes]:
    """`count` serialized scalar events from event number `first` on: key after key, step after step."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.summary import scalar

    rng = np.random.default_rng(first)
    vals = rng.normal(size=count)
    out = []
    for i in range(count):
        n = first + i
        step, key = divmod(n, len(KEYS))
        out.append(Event(wall_time=T0 + n * 0.01, step=step + 1, summary=scalar(KEYS[key], float(vals[i]))).SerializeToString())
    return out


@dataclass
class Generated:
    run_dir: str
    path: str
    events: int
    bytes: int
    seconds: float


def generate(root: str, count: int) -> Generated:
    from tensorboardX.proto.event_pb2 import Event

    t = time.perf_counter()
    run_dir = os.path.join(root, "tensorboard_log", "bench", "tb-200k")
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, "events.out.tfevents.1790000000.bench")
    first = Event(wall_time=T0, file_version="brain.Event:2").SerializeToString()
    with open(path, "wb") as f:
        f.write(frame_records([first] + events(0, count)))
    return Generated(run_dir, path, count, os.path.getsize(path), time.perf_counter() - t)


# Contenders (one per process) ---------------------------------------------------------------------
def measure(contender: str, run_dir: str, path: str, rounds: int = 5) -> dict:
    if contender == "rundash":
        seconds, _run, frame = cold_load(run_dir)
        return {"seconds": seconds, "rows": len(frame)}
    if contender == "floor":
        return floor(path)
    if contender == "fields":
        return fields(path)
    if contender == "tbparse":
        from tbparse import SummaryReader

        gc.collect()
        t = time.perf_counter()
        df = SummaryReader(run_dir).scalars
        return {"seconds": time.perf_counter() - t, "rows": len(df)}
    if contender == "verify":
        return verify(run_dir)
    if contender == "refresh":
        return refresh(run_dir, path, rounds)
    raise ValueError(f"unknown contender {contender!r}")


def cold_load(run_dir: str):
    """(seconds, run, frame) of `open_run(dir).metrics()` with an empty cache; the protobuf classes
    imported before (as the floor imports them before its clock starts)."""
    import rundash_core as rd
    from rundash_core import cache
    from rundash_core.sources.tensorboard.events import event_class

    event_class()
    cache.shared.clear()
    gc.collect()
    t = time.perf_counter()
    run = rd.open_run(run_dir)
    frame = run.metrics()
    return time.perf_counter() - t, run, frame


def floor(path: str) -> dict:
    """Read the file, frame every record, `Event.FromString` each: nothing kept."""
    from tensorboardX.proto.event_pb2 import Event

    parse, unpack = Event.FromString, struct.Struct("<Q").unpack_from
    gc.collect()
    t = time.perf_counter()
    with open(path, "rb") as f:
        buf = f.read()
    view, pos, n, count = memoryview(buf), 0, len(buf), 0
    while pos + 12 <= n:
        (length,) = unpack(buf, pos)
        parse(view[pos + 12:pos + 12 + length])
        pos += 16 + length
        count += 1
    return {"seconds": time.perf_counter() - t, "rows": count}


def fields(path: str) -> dict:
    """The floor plus what any reader must take from each record through protobuf's Python API:
    step, wall time, and each value's kind, tag and number (one tuple per value, nothing else)."""
    from tensorboardX.proto.event_pb2 import Event

    parse, unpack = Event.FromString, struct.Struct("<Q").unpack_from
    gc.collect()
    t = time.perf_counter()
    with open(path, "rb") as f:
        buf = f.read()
    view, pos, n, out = memoryview(buf), 0, len(buf), []
    add = out.append
    while pos + 12 <= n:
        (length,) = unpack(buf, pos)
        e = parse(view[pos + 12:pos + 12 + length])
        step, wall = e.step, e.wall_time
        for v in e.summary.value:
            if v.WhichOneof("value") == "simple_value":
                add((step, wall, v.tag, v.simple_value))
        pos += 16 + length
    return {"seconds": time.perf_counter() - t, "rows": len(out)}


def verify(run_dir: str) -> dict:
    """rundash's tidy frame against tbparse's scalars: (tag, step) -> value and wall time."""
    from tbparse import SummaryReader

    _s, _run, frame = cold_load(run_dir)
    ref = SummaryReader(run_dir, extra_columns={"wall_time"}).scalars
    got = frame.assign(metric=frame["metric"].astype(str), step=frame["step"].astype("int64"))
    both = got.merge(ref.rename(columns={"tag": "metric"}), on=["metric", "step"], how="outer", indicator=True)
    matched = both[both["_merge"] == "both"]
    out = {"rows": len(frame), "tbparse_rows": len(ref),
           "value_off": int((matched["value_x"] != matched["value_y"]).sum()),
           "time_off": int((matched["time"] != matched["wall_time"]).sum()),
           "missing": int((both["_merge"] == "right_only").sum()), "extra": int((both["_merge"] == "left_only").sum())}
    out["ok"] = out["rows"] == out["tbparse_rows"] and not any(out[k] for k in ("value_off", "time_off", "missing", "extra"))
    return out


def refresh(run_dir: str, path: str, rounds: int) -> dict:
    """Cold load, then rounds of: append APPEND events, time `run.metrics()`; the frame must grow by them."""
    cold, run, frame = cold_load(run_dir)
    rows0, best, n = len(frame), float("inf"), len(frame)
    for r in range(max(rounds, 1)):
        with open(path, "ab") as f:
            f.write(frame_records(events(n + r * APPEND, APPEND)))
        t = time.perf_counter()
        frame = run.metrics()
        best = min(best, time.perf_counter() - t)
    return {"seconds": cold, "metrics_s": best, "rounds": max(rounds, 1), "rows_added": len(frame) - rows0,
            "appended": APPEND * max(rounds, 1)}


def run_one(bench: str, contender: str, kwargs: dict, *, in_process: bool = False) -> dict:
    """`common.run_one` for this module: one contender in a fresh process (`python -m
    benchmarks.tensorboard_load _one ...`), or here."""
    if in_process:
        return measure_here(bench, contender, kwargs)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=repo + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    cmd = [sys.executable, "-m", "benchmarks.tensorboard_load", "_one", contender, json.dumps(kwargs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Report ---------------------------------------------------------------------------------------------
def results(count: int = 200_000, *, keep_dir: str | None = None, repeat: int = 3, in_process: bool = False) -> dict:
    """Generate the file and measure every contender (the best of `repeat` cold loads each)."""
    with work_root(keep_dir, "rundash-bench-tensorboard-") as root:
        gen = generate(root, count)
        kw = {"run_dir": gen.run_dir, "path": gen.path}
        out: dict = {"generated": gen.__dict__}
        for contender in ("rundash", "floor", "fields"):
            runs = [run_one("tensorboard_load", contender, kw, in_process=in_process) for _ in range(max(repeat, 1))]
            out[contender] = dict(min(runs, key=lambda x: x["seconds"]), all_seconds=[x["seconds"] for x in runs])
        out["tbparse"] = run_one("tensorboard_load", "tbparse", kw, in_process=in_process)
        out["verify"] = run_one("tensorboard_load", "verify", kw, in_process=in_process)
        out["refresh"] = run_one("tensorboard_load", "refresh", kw, in_process=in_process)  # (appends: last)
        return out


def rows(res: dict) -> tuple[list[list[str]], dict]:
    """The table rows (measurement, time, ratio, target, result) and the checks."""
    cold, fl, tb, ref, ver = (res[k] for k in ("rundash", "floor", "tbparse", "refresh", "verify"))
    c = cold["seconds"]
    checks = {"tbparse_over_rundash": tb["seconds"] / c, "rundash_over_floor": c / fl["seconds"],
              "refresh_over_cold": ref["metrics_s"] / ref["seconds"], "verified": bool(ver["ok"]),
              "refresh_rows": ref["rows_added"] == ref["appended"]}
    table = [
        ["TensorBoard cold load: open_run().metrics() → tidy", secs(c), "", "", f"{cold['rows']:,} rows"],
        ["floor: framing + Event.FromString per record", secs(fl["seconds"]), f"rundash {checks['rundash_over_floor']:.2f}×",
         "≤ 2×", pass_miss(checks["rundash_over_floor"] <= 2)],
        ["  floor + each record's step, time, tag, value (upb)", secs(res["fields"]["seconds"]),
         f"rundash {c / res['fields']['seconds']:.2f}×", "", "(for reference)"],
        ["tbparse.SummaryReader(dir).scalars", secs(tb["seconds"]), f"{checks['tbparse_over_rundash']:.1f}× rundash",
         "≥ 3×", pass_miss(checks["tbparse_over_rundash"] >= 3)],
        [f"refresh after {APPEND} appended events: run.metrics()", secs(ref["metrics_s"]),
         f"{100 * checks['refresh_over_cold']:.2f}% of cold", "< 5%", pass_miss(checks["refresh_over_cold"] < 0.05)],
        ["refresh adds the appended events", f"{ref['rows_added']:,} = {ref['appended']:,}", "", "equal",
         pass_miss(checks["refresh_rows"])],
        ["tidy frame = tbparse's scalars", f"{ver['rows']:,} = {ver['tbparse_rows']:,}",
         f"{ver['value_off']} values, {ver['time_off']} times off", "0 off", pass_miss(checks["verified"])],
    ]
    return table, checks


HEADERS = ["measurement", "time (s)", "ratio", "target", "result"]


def main(count: int = 200_000, keep_dir: str | None = None, repeat: int = 3, in_process: bool = False) -> int:
    res = results(count, keep_dir=keep_dir, repeat=repeat, in_process=in_process)
    table, checks = rows(res)
    g = res["generated"]
    print(f"TensorBoard: {g['events']:,} events, {g['bytes'] / 1e6:.1f} MB (generated in {g['seconds']:.1f} s); "
          f"best of {repeat} cold loads per contender, each in a fresh process")
    print(format_table(HEADERS, table, right={1}))
    return 0 if checks["verified"] and checks["refresh_rows"] else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["_one"]:
        print(json.dumps(measure_here("tensorboard_load", sys.argv[2], json.loads(sys.argv[3]))))
    else:
        sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000))
