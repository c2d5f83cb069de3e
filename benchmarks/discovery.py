"""`python -m benchmarks discovery`: the runs list over 600 verl console logs of ~1 MB.

Builds one folder of logs by repeating the real sample logs with their steps shifted (as the
`verl` bench does), each log cut at its own line boundary so that steps, sizes and statuses
differ; every 10th log has a `<name>_vllm.log` sidecar and a few `launch_*.log` wrappers sit in
between (both must be skipped). Then measures, each in a fresh process:

- `floor`: `os.scandir` + `stat` of the same files: what any listing costs;
- `ends`: that listing plus reading 16 KiB at each end of every log, nothing searched (what
  reading alone costs: discovery reads at least this);
- `cold`: `rd.discover([folder])` in a fresh process with an empty cache;
- `warm`: the second `rd.discover` in the same process, nothing changed;
- `scan`: what peer dashboards do: read every log whole and regex its last `step:N`;
- `verify`: discover's step and status per run against a full parse of the log (its metric
  store: last step, final-validation print) for a sample of runs, at the same `now`.

Targets (ratios within one run): cold ≥ 3× faster than whole-file scans, warm ≤ 2× the floor.
Cold against reading alone is reported, not held to a target: the one summary of a verl log
(`io/verl_pass`: its resume prints, and its step timings when its end has no time stamp) reads
each log whole once, then only its appended bytes, so cold discovery costs one pass over every
byte (before that summary it read only the ends: 0.56 s for 600 logs, 25× less than the scan).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from benchmarks.common import (
    add_common_options,
    best_of,
    cpu_note,
    format_table,
    mb,
    pass_miss,
    print_report,
    run_one,
    secs,
    timed,
    work_root,
)
from benchmarks.verl import _STEP, sample_dir, sample_logs
from rundash_core.sources.verl.steps import _is_validation_key

SCAN_VS_COLD = 3.0  # cold discover at least 3× faster than reading every log whole and searching it
WARM_VS_FLOOR = 2.0  # warm discover at most 2× the bare listing
RUNNING = 0.05  # share of logs written "just now" (status running)
_FINAL = b"Final validation metrics"
_LAST_STEP = re.compile(rb"(?<![\w/])step:(\d+) - ")


# The logs -----------------------------------------------------------------------------------------
def _repeat(sample: bytes, megabytes: float) -> bytes:
    """`sample` repeated to about `megabytes` MB, each copy's steps shifted past the last one; a
    final-validation print is kept only in the last copy (one run, finished once)."""
    parts, size, offset = [], 0, 0
    while size < megabytes * 1e6:
        top = [offset]

        def shift(m, base=offset):
            step = int(m.group(1)) + base
            top[0] = max(top[0], step)
            return b"step:%d" % step

        parts.append(_STEP.sub(shift, sample))
        size, offset = size + len(parts[-1]), top[0] + 1
    data = b"".join(parts)
    last = data.rfind(_FINAL)
    head = b"\n".join(line for line in data[:max(last, 0)].split(b"\n") if _FINAL not in line)
    return head + data[max(last, 0):] if last >= 0 else data


def templates(megabytes: float = 1.25) -> list[bytes]:
    """One ~`megabytes` MB log per sample (the RL logs of eras S1/S2, SFT, the async Lego log)."""
    return [_repeat(s, megabytes) for s in sample_logs(sample_dir())]


@dataclass
class Generated:
    folder: str
    logs: int
    skipped: int  # sidecars and launch wrappers written next to the logs
    bytes: int
    seconds: float


def build_logs(folder: str, count: int = 600, megabytes: float = 1.0, now: float | None = None) -> Generated:
    """`count` logs of about `megabytes` MB (0.85–1.15×), cut at a line boundary (the last
    quarter are whole: finished runs); mtimes spread over the past days, 5% written just now."""
    t = time.perf_counter()
    now = time.time() if now is None else now
    tpl = templates(megabytes * 1.25)
    os.makedirs(folder, exist_ok=True)
    total = skipped = 0
    for i in range(count):
        data = tpl[i % len(tpl)]
        if i % 4 != 3:  # cut: a run stopped (or still writing) before its end
            cut = int(megabytes * 1e6 * (0.85 + 0.3 * ((i * 37) % 100) / 100))
            data = data[: data.rfind(b"\n", 0, cut) + 1]
        name = f"run-{i:04d}-{['math', 'gsm8k', 'sft', 'swe'][i % len(tpl)]}"
        path = os.path.join(folder, name + ".log")
        with open(path, "wb") as fh:
            fh.write(data)
        total += len(data)
        mtime = now - 5 if (i * 7919) % 100 < RUNNING * 100 else now - 3600 - i * 600
        os.utime(path, (mtime, mtime))
        extras = ([name + "_vllm.log"] if i % 10 == 0 else []) + ([f"launch_{name}.log"] if i % 50 == 7 else [])
        for extra in extras:
            with open(os.path.join(folder, extra), "wb") as fh:
                fh.write(b"INFO vllm engine started\nstep:1 - not/ours:1.0\n")
            skipped += 1
    return Generated(folder, count, skipped, total, time.perf_counter() - t)


def log_paths(folder: str) -> list[str]:
    from rundash_core.sources.verl.overview import is_log_name

    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if is_log_name(n))


# Contenders ---------------------------------------------------------------------------------------
def floor(folder: str) -> int:
    """The bare listing: every entry of the folder and a stat of each file."""
    n = 0
    with os.scandir(folder) as it:
        for e in it:
            e.stat()
            n += 1
    return n


def bench_logs(folder: str) -> Iterator[os.DirEntry]:
    """The folder's logs as the contenders below pick them (sidecars and launch wrappers left out)."""
    with os.scandir(folder) as it:
        for e in it:
            if e.name.endswith(".log") and not e.name.endswith("_vllm.log") and not e.name.startswith("launch_"):
                yield e


def read_ends(folder: str, nbytes: int = 16 << 10) -> int:
    """What reading alone costs: the first and last `nbytes` of every log (one open, two preads,
    one close each, as discovery's first reads), nothing searched. The share of cold discovery
    no parser can avoid; on a VM that pages idle files out, most of it is disk latency."""
    n = 0
    for e in bench_logs(folder):
        size = e.stat().st_size
        fd = os.open(e.path, os.O_RDONLY)
        try:
            os.pread(fd, nbytes, 0)
            os.pread(fd, nbytes, max(size - nbytes, 0))
        finally:
            os.close(fd)
        n += 1
    return n


def whole_file_scan(folder: str) -> dict[str, int | None]:
    """What peer dashboards do for the runs list: read each log whole, regex its last `step:N`."""
    out = {}
    for e in bench_logs(folder):
        with open(e.path, "rb") as fh:
            steps = _LAST_STEP.findall(fh.read())
        out[e.path] = int(steps[-1]) if steps else None
    return out


def measure(contender: str, folder: str, now: float | None = None, sample: int = 40) -> dict:
    import rundash_core as rd
    from rundash_core import cache

    if contender == "floor":
        n, cost = timed(lambda: floor(folder))
        return {**cost, "rows": n}
    if contender == "ends":
        n, cost = timed(lambda: read_ends(folder))
        return {**cost, "rows": n}
    if contender in ("cold", "warm"):
        cache.shared.clear()
        frame, cost = timed(lambda: rd.discover([folder], now=now))
        if contender == "cold":
            return {**cost, "rows": len(frame), "errors": int(frame["error"].notna().sum())}
        best = float("inf")
        for _ in range(5):  # nothing changed in between: the best of five second calls
            t = time.perf_counter()
            again = rd.discover([folder], now=now)
            best = min(best, time.perf_counter() - t)
        same = again.drop(columns=["error"]).equals(frame.drop(columns=["error"]))
        return {"seconds": best, "rows": len(again), "cold_seconds": cost["seconds"], "same_as_cold": bool(same)}
    if contender == "scan":
        steps, cost = timed(lambda: whole_file_scan(folder))
        return {**cost, "rows": len(steps)}
    if contender == "verify":
        return verify(folder, now=now, sample=sample)
    raise ValueError(f"unknown contender {contender!r}")


def verify(folder: str, now: float | None = None, sample: int = 40) -> dict:
    """discover's (step, status, max_steps) against a full parse of `sample` runs spread over the
    list; also: only the logs are listed (no sidecar, no launch wrapper)."""
    import rundash_core as rd
    from rundash_core import cache
    from rundash_core.overview import derive_status

    now = time.time() if now is None else now
    cache.shared.clear()
    frame = rd.discover([folder], now=now).sort_values("path").reset_index(drop=True)
    listed_ok = sorted(frame["path"]) == log_paths(folder)
    picks = sorted(set(range(0, len(frame), max(len(frame) // max(sample, 1), 1))))[:sample]
    off = []
    for i in picks:
        row = frame.iloc[i]
        cache.shared.clear()  # a full parse from scratch, nothing from discovery
        run = rd.open_run(row["path"])
        tail, ov = run.store().tail, run.overview(now=now)
        done = tail.last_step
        if done is not None and _zero_based(tail):  # steps done: one more than the last training step
            tidy = run.metrics()
            training = tidy[~tidy["metric"].astype(str).map(lambda k: _is_validation_key(k.encode()))]
            done = int(training["step"].max()) + 1
        status = derive_status(finished=tail.final_validation, updated=os.stat(row["path"]).st_mtime, step=done,
                               max_steps=ov.max_steps, now=now)
        got = (None if row["step"] is None or row["step"] != row["step"] else int(row["step"]), row["status"])
        if got != (done, status):  # steps done, as the runs list shows them
            off.append({"path": row["path"], "discover": list(got), "full": [done, status]})
    statuses = frame["status"].value_counts().to_dict()
    return {"checked": len(picks), "off": len(off), "examples": off[:5], "listed": len(frame),
            "listed_ok": listed_ok, "statuses": statuses, "ok": not off and listed_ok}


def _zero_based(tail) -> bool:
    """The full parse's word on it: the first metric line logs step 0 and more than validation."""
    return tail.first_step == 0 and not all(_is_validation_key(k.encode()) for k in tail.first_keys)


# Report -------------------------------------------------------------------------------------------
def build_report(gen: Generated, results: dict) -> tuple[str, dict]:
    fl, ends, cold, warm, scan = (results[k]["seconds"] for k in ("floor", "ends", "cold", "warm", "scan"))
    ver = results["verify"]
    rows = [
        ["floor: os.scandir + stat of the same files", secs(fl), "1.0×", f"{results['floor']['rows']:,} entries"],
        ["reading alone: 16 KiB at each end of every log, no search", secs(ends), f"{ends / fl:.1f}×",
         f"{results['ends']['rows']:,} logs"],
        ["rundash cold: rd.discover (fresh process, fresh cache)", secs(cold), f"{cold / fl:.1f}×",
         f"{results['cold']['rows']:,} runs, {results['cold']['errors']} errors"],
        ["rundash warm: rd.discover again, nothing changed", secs(warm), f"{warm / fl:.1f}×",
         f"{results['warm']['rows']:,} runs, same frame: {results['warm']['same_as_cold']}"],
        ["whole-file scan: read each log, regex the last step:N", secs(scan), f"{scan / fl:.1f}×",
         f"{results['scan']['rows']:,} logs"],
    ]
    for r, key in zip(rows, ("floor", "ends", "cold", "warm", "scan")):
        r.append(cpu_note(results[key]))
    table = format_table(["measurement", "time (s)", "vs floor", "result", "CPU of that run"], rows, right={1, 2})
    checks = {"cold_vs_ends": cold / ends, "scan_vs_cold": scan / cold, "warm_vs_floor": warm / fl,
              "verify_ok": bool(ver["ok"]), "warm_same": bool(results["warm"]["same_as_cold"])}
    check_rows = [
        ["cold / reading alone", f"{checks['cold_vs_ends']:.1f}×", "(one pass over every byte)", "info"],
        ["whole-file scan / cold", f"{checks['scan_vs_cold']:.1f}×", f"≥ {SCAN_VS_COLD:.0f}×",
         pass_miss(checks["scan_vs_cold"] >= SCAN_VS_COLD)],
        ["warm / floor", f"{checks['warm_vs_floor']:.1f}×", f"≤ {WARM_VS_FLOOR:.0f}×",
         pass_miss(checks["warm_vs_floor"] <= WARM_VS_FLOOR)],
        ["discover step/status = full parse", f"{ver['checked']} runs checked, {ver['off']} off", "0 off",
         pass_miss(ver["off"] == 0)],
        ["only the logs listed", f"{ver['listed']:,} runs; sidecars/launch_* skipped: {ver['listed_ok']}", "logs only",
         pass_miss(ver["listed_ok"])],
    ]
    head = (f"folder: {gen.folder}\n        {gen.logs} verl logs, {gen.bytes / 1e6:,.0f} MB, plus {gen.skipped} "
            f"sidecars/launch wrappers; generated in {gen.seconds:.1f} s; statuses: {ver['statuses']}\n"
            f"        best of {len(results['cold'].get('all_seconds', [1]))} run(s) per contender, each in a fresh "
            "process; peak RSS (MB): " + ", ".join(f"{k} {mb(results[k].get('peak_rss_mb'))}"
                                                   for k in ("floor", "cold", "warm", "scan")))
    if ver["examples"]:
        head += "\n        disagreements: " + json.dumps(ver["examples"])
    return "\n\n".join([head, table, format_table(["check", "value", "target", "result"], check_rows,
                                                  right={1})]), checks


# Command ------------------------------------------------------------------------------------------
def add_parser(sub) -> None:
    p = sub.add_parser("discovery", help="the runs list over 600 verl logs of ~1 MB: cold, warm, floor, scan")
    p.add_argument("--logs", type=int, default=600, help="number of logs (default 600)")
    p.add_argument("--mb", type=float, default=1.0, help="size of each log in MB (default 1)")
    p.add_argument("--sample", type=int, default=40, help="runs checked against a full parse (default 40)")
    add_common_options(p, "the logs to DIR/logs", repeat=3)
    p.set_defaults(func=cmd_discovery)


def cmd_discovery(args) -> int:
    with work_root(args.dir, "rundash-bench-discovery-") as root:
        folder = os.path.join(root, "logs")
        shutil.rmtree(folder, ignore_errors=True)
        now = time.time()
        print(f"building {args.logs} verl logs of ~{args.mb:g} MB from the sample logs in {sample_dir()} …", flush=True)
        gen = build_logs(folder, args.logs, args.mb, now=now)
        print(f"built {gen.bytes / 1e6:,.0f} MB in {gen.seconds:.1f} s", flush=True)
        results: dict = best_of("discovery", ("floor", "ends", "cold", "warm", "scan"), {"folder": folder, "now": now},
                                repeat=args.repeat, in_process=args.in_process)
        print("checking discover's step and status against full parses …", flush=True)
        results["verify"] = run_one("discovery", "verify", {"folder": folder, "now": now, "sample": args.sample},
                                    in_process=args.in_process)
        text, checks = build_report(gen, results)
        print_report(text, args.json, {"generated": asdict(gen), "results": results, "checks": checks})
        return 0 if checks["verify_ok"] and checks["warm_same"] else 1
