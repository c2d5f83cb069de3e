"""The W&B part of `python -m benchmarks trackers`: loading a W&B run with a 100,000-row history.

Generates an offline run folder (`run-<id>.wandb`: a history record and a summary record per row,
as wandb writes them, ~30 verl keys a row, framed by `records.Writer`, byte for byte wandb's
framing), then measures, each contender in a fresh process:

- `rundash`: cold load, `open_run(folder).metrics()` → the tidy frame;
- `decode`: the floor: framing every record (`records.frame`) and `Record.FromString` on each,
  nothing kept (what "decoding its records alone" means);
- `verify`: the tidy frame against an independent reading (wandb's old `DataStore` scan written out,
  `Record.FromString`, `json.loads` per item), value for value with times;
- `refresh`: after a cold load, append `appended` rows and time `run.metrics()`, and the decode of
  the appended bytes alone (framing + `Record.FromString`), best of `repeat` rounds.

`report(...)` returns (the markdown table, the pass/miss checks, every measurement).
"""
from __future__ import annotations

import gc
import json
import math
import os
import struct
import subprocess
import sys
import time
import zlib

from benchmarks.common import format_table, measure_here, pass_miss, secs
from rundash_core import cache

KEYS = ([f"actor/{k}" for k in ("entropy", "pg_loss", "pg_clipfrac", "ppo_kl", "grad_norm", "lr")]
        + [f"critic/{k}/{s}" for k in ("score", "rewards", "advantages", "returns") for s in ("mean", "max", "min")]
        + [f"response_length/{s}" for s in ("mean", "max", "min", "clip_ratio")]
        + [f"timing_s/{k}" for k in ("gen", "ref", "update_actor", "step", "testing")]
        + ["perf/throughput", "perf/mfu/actor", "training/global_step"])
RUN_ID = "bench01"


def clock() -> tuple[float, float]:
    """(wall, CPU) seconds now: the CPU time of this process is what the checks compare (the
    shared 2-core machine's load moves wall times by 2× from one run to the next)."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clock()
    return now[0] - start[0], now[1] - start[1]


def _values(step: int) -> dict:
    return {k: round(math.sin(step * 0.01 + i) + i, 12) if k != "training/global_step" else step
            for i, k in enumerate(KEYS)}


def generate(root: str, rows: int) -> str:
    """The run folder (its path) with `rows` history rows."""
    from rundash_core.sources.wandb import demo_run, log, records

    pb = log.wandb_proto()
    start = 1_790_000_000.0
    folder = os.path.join(root, "wandb", demo_run.folder_name(RUN_ID, start))
    os.makedirs(os.path.join(folder, "files"), exist_ok=True)
    with open(os.path.join(folder, f"run-{RUN_ID}.wandb"), "wb") as fh:
        writer = records.Writer(fh)
        writer.write(demo_run.run_record(pb, RUN_ID, project="bench", name="bench", config={"trainer": {}}, start=start))
        for payload in _row_payloads(pb, range(rows), start):
            writer.write(payload)
    return folder


def _row_payloads(pb, steps, start: float):
    from rundash_core.sources.wandb import demo_run

    for s in steps:
        values = _values(s)
        yield demo_run.history_record(pb, values, s, start + s, float(s))
        yield demo_run.summary_record(pb, values)


def append_rows(folder: str, steps, start: float = 1_790_000_000.0) -> int:
    """Append rows (history + summary records) to the run's file; the bytes appended."""
    from rundash_core.sources.wandb import log, records

    path = os.path.join(folder, f"run-{RUN_ID}.wandb")
    size = os.path.getsize(path)
    with open(path, "ab") as fh:
        writer = records.Writer(fh, at=size)
        for payload in _row_payloads(log.wandb_proto(), steps, start):
            writer.write(payload)
    return os.path.getsize(path) - size


def decode(path: str, start: int = 0) -> tuple[tuple[float, float], int]:
    """((wall, CPU) seconds, records) of framing the file's bytes from `start` and `Record.FromString` on each."""
    from rundash_core.sources.wandb import log, records

    pb = log.wandb_proto()
    t = clock()
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    framed = records.frame(data, start)
    for _off, payload in framed.records:
        pb.Record.FromString(payload)
    return since(t), len(framed.records)


def decode_values(path: str, start: int = 0) -> tuple[tuple[float, float], int]:
    """((wall, CPU) seconds, values) of `decode` plus reading every history value as Python does it without a
    fast path (each item's key parts and `json.loads` of its value_json): the plain reader."""
    from rundash_core.sources.wandb import log, records

    pb = log.wandb_proto()
    t = clock()
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    n = 0
    for _off, payload in records.frame(data, start).records:
        record = pb.Record.FromString(payload)
        if record.WhichOneof("record_type") == "history":
            row = {".".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
            n += len(row)
    return since(t), n


def independent(path: str) -> dict:
    """(step, key) -> (value, time): the file read as wandb's old Python DataStore read it."""
    from wandb.proto import wandb_internal_pb2 as pb

    out = {}
    with open(path, "rb") as f:
        f.read(7)
        index, data = 7, b""
        while True:
            left = 32768 - index % 32768
            if left < 7:
                f.read(left)
                index += left
            header = f.read(7)
            if len(header) < 7:
                break
            crc, length, kind = struct.unpack("<IHB", header)
            chunk = f.read(length)
            index += 7 + length
            assert crc == zlib.crc32(chunk, zlib.crc32(bytes([kind])))
            if kind in (2, 3):
                data = chunk if kind == 2 else data + chunk
                continue
            record = pb.Record.FromString(chunk if kind == 1 else data + chunk)
            if record.WhichOneof("record_type") == "history":
                row = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
                for k, v in row.items():
                    if not k.startswith("_"):
                        out[(row["_step"], k)] = (float(v), row["_timestamp"])
    return out


def _cold(folder: str):
    """((wall, CPU) seconds, run, frame) of a cold load: an empty cache, wandb's protobuf modules
    already loaded (once a process: the `import` row), as for `decode`."""
    import rundash_core as rd
    from rundash_core.sources.wandb import log

    log.wandb_proto()
    cache.shared.clear()
    gc.collect()
    t = clock()
    run = rd.open_run(folder)
    frame = run.metrics()
    return since(t), run, frame


def measure(contender: str, folder: str, appended: int = 1000, repeat: int = 3) -> dict:
    path = os.path.join(folder, f"run-{RUN_ID}.wandb")
    if contender == "rundash":
        (wall, cpu), _run, frame = _cold(folder)
        return {"seconds": wall, "cpu_s": cpu, "rows": len(frame)}
    if contender == "import":  # rundash's loader: wandb's protobuf modules only, not the SDK
        from rundash_core.sources.wandb import log

        t = clock()
        log.wandb_proto()
        wall, cpu = since(t)
        return {"seconds": wall, "cpu_s": cpu}
    if contender == "decode":
        (wall, cpu), n = decode(path)
        return {"seconds": wall, "cpu_s": cpu, "records": n}
    if contender == "decode_values":
        (wall, cpu), n = decode_values(path)
        return {"seconds": wall, "cpu_s": cpu, "values": n}
    if contender == "verify":
        (wall, cpu), _run, frame = _cold(folder)
        want = independent(path)
        got = {(int(s), str(k)): (v, t) for s, k, v, t in zip(frame["step"], frame["metric"], frame["value"], frame["time"])}
        return {"seconds": wall, "cpu_s": cpu, "ok": got == want, "tidy_rows": len(frame),
                "independent_rows": len(want), "values_off": sum(got.get(k) != v for k, v in want.items())}
    if contender == "refresh":
        (wall, cpu), run, frame = _cold(folder)
        top = int(frame["step"].max())
        best = {"refresh": (math.inf, math.inf), "decode": (math.inf, math.inf), "values": (math.inf, math.inf)}
        grew = added = 0
        for r in range(max(repeat, 1)):
            size = os.path.getsize(path)
            start = top + 1 + r * appended
            added += append_rows(folder, range(start, start + appended))
            before = len(frame)
            t = clock()
            frame = run.metrics()
            took = since(t)
            grew += len(frame) - before
            for name, got in (("refresh", took), ("decode", decode(path, size)[0]),  # whole records were appended
                              ("values", decode_values(path, size)[0])):
                best[name] = min(best[name], got, key=lambda x: x[1])
        return {"seconds": wall, "cpu_s": cpu, "rounds": max(repeat, 1), "rows_added": grew,
                "values_appended": max(repeat, 1) * appended * len(KEYS), "bytes_appended": added,
                **{f"{name}_s": w for name, (w, _c) in best.items()}, **{f"{name}_cpu_s": c for name, (_w, c) in best.items()}}
    raise ValueError(f"unknown contender {contender!r}")


def run_one(contender: str, kwargs: dict, *, in_process: bool = False) -> dict:
    """One contender in a fresh Python process (`common.measure_here` there), or here."""
    if in_process:
        return measure_here("wandb_load", contender, kwargs)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": repo + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    code = ("import json, sys; from benchmarks.common import measure_here; "
            "print(json.dumps(measure_here('wandb_load', sys.argv[1], json.loads(sys.argv[2]))))")
    proc = subprocess.run([sys.executable, "-c", code, contender, json.dumps(kwargs)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"wandb_load {contender} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(root: str, *, rows: int = 100_000, appended: int = 1000, repeat: int = 3,
           in_process: bool = False) -> tuple[str, dict, dict]:
    """Generate the run under `root`, measure each contender `repeat` times (best counts)."""
    t = time.perf_counter()
    folder = generate(root, rows)
    generated = time.perf_counter() - t
    kwargs = {"folder": folder, "appended": appended, "repeat": repeat}
    best = {}
    for contender in ("import", "decode", "decode_values", "rundash", "verify", "refresh"):
        runs = [run_one(contender, kwargs, in_process=in_process)
                for _ in range(1 if contender in ("verify", "refresh") else max(repeat, 1))]
        best[contender] = min(runs, key=lambda r: r["cpu_s"])
    dec, ver, ref = best["decode"], best["verify"], best["refresh"]
    size = os.path.getsize(os.path.join(folder, f"run-{RUN_ID}.wandb"))

    def row(what: str, r: dict, key: str, of: dict | None, ofkey: str, note: str) -> list[str]:
        wall, cpu = r[key], r[key.replace("_s", "_cpu_s") if key != "seconds" else "cpu_s"]
        base = None if of is None else of[ofkey.replace("_s", "_cpu_s") if ofkey != "seconds" else "cpu_s"]
        return [what, secs(cpu), secs(wall), "" if base is None else f"{cpu / base:.2f}×", note]

    rows_table = [
        row("loading wandb's protobuf modules (once a process)", best["import"], "seconds", None, "", "not in the rows below"),
        row("decode alone: framing + Record.FromString", dec, "seconds", dec, "seconds",
            f"{dec['records']:,} records, {size / 1e6:.0f} MB"),
        row("plain reader: decode + json.loads of each history item", best["decode_values"], "seconds", dec, "seconds",
            f"{best['decode_values']['values']:,} values"),
        row("rundash cold load: open_run().metrics()", best["rundash"], "seconds", dec, "seconds",
            f"{best['rundash']['rows']:,} tidy rows"),
        row(f"decode of the {appended:,} appended rows alone", ref, "decode_s", ref, "decode_s",
            f"{ref['bytes_appended'] // ref['rounds']:,} bytes a round"),
        row("  plain reader of the appended rows", ref, "values_s", ref, "decode_s", ""),
        row(f"rundash refresh +{appended:,} rows: run.metrics()", ref, "refresh_s", ref, "decode_s", f"best of {ref['rounds']}"),
    ]
    table = format_table([f"W&B ({rows:,}-row history)", "CPU (s)", "wall (s)", "of decode", "result"], rows_table,
                         right={1, 2, 3})
    cold = best["rundash"]["cpu_s"]
    checks = {"cold_over_decode": cold / dec["cpu_s"], "refresh_over_decode": ref["refresh_cpu_s"] / ref["decode_cpu_s"],
              "verified": bool(ver["ok"]) and ref["rows_added"] == ref["values_appended"]}
    lines = [table, "",
             f"CPU time: cold / decode {checks['cold_over_decode']:.2f}× (≤ 2×: {pass_miss(checks['cold_over_decode'] <= 2)}); "
             f"refresh / decode of the appended rows {checks['refresh_over_decode']:.2f}× "
             f"(≤ 2×: {pass_miss(checks['refresh_over_decode'] <= 2)}); values against the independent reader: "
             f"{ver['tidy_rows']:,} tidy vs {ver['independent_rows']:,}, {ver['values_off']} off "
             f"({pass_miss(checks['verified'])}); generated in {generated:.1f} s"]
    return "\n".join(lines), checks, {"best": best, "generated_s": generated, "folder": folder}


if __name__ == "__main__":  # python -m benchmarks.wandb_load [rows]: the table alone
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rundash-wandb-bench-") as root:
        text, _checks, _all = report(root, rows=int(sys.argv[1]) if len(sys.argv) > 1 else 100_000,
                                     in_process="--in-process" in sys.argv)
        print(text)
