"""`python -m benchmarks verl`: parsing a ~100 MB verl console log.

Builds one log by repeating the real sample logs (verl.md section 12, plus the generated verl-based
Lego log: eras F1 and F3, S1 and S2, SFT, Ray prefixes, tqdm bars, sample dumps, a crash trace),
each copy's steps shifted so the steps keep growing. Then measures, each contender in a fresh
process:

- `rundash`: `VerlLogTail(path).poll()`, the MetricStore rows of every metric line;
- `baseline`: the usual per-line approach of peer dashboards: decode each line, strip ANSI codes
  with a regex, search `step:` with a regex, split the pairs, `float()` each value; the same rows;
- `floor`: iterating the file's lines without parsing anything;
- `cold`: `open_run(path).metrics()`: parse, merge per step, tidy frame (for reference);
- `verify`: rundash's merged values against the baseline's, cell by cell;
- `refresh`: after a cold load, append 10 metric lines and time `run.metrics()`.
"""
from __future__ import annotations

import gc
import math
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import rundash_core as rd
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
from rundash_core import cache
from rundash_core.sources.verl.metric_log import VerlLogTail

TARGET_SPEEDUP = 4.0  # baseline user CPU / rundash parse user CPU, the collector left on
SAMPLE_NAMES = ("dq_math.log", "eh_Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log", "eh_gemma-2-2b-it-sft-0.411.log",
                "lego/logs/qwen3-8b-swegym-gspo-async-r1.log")
_STEP = re.compile(rb"step(?<![\w/]step):(\d+)(?= - )")
_NOT_VALUES = {"step", "producer", "time"}  # row keys that are no logged values


# The log ------------------------------------------------------------------------------------------
def sample_dir() -> Path:
    """Where the sample logs are: $RUNDASH_VERL_SAMPLES, the repository's tests/data/verl, or the
    shared samples beside the repository (`../shared/samples/verl` from its root)."""
    root = Path(__file__).resolve().parents[1]  # the repository: the parent of benchmarks/
    for d in (os.environ.get("RUNDASH_VERL_SAMPLES"), root / "tests" / "data" / "verl",
              root.parent / "shared" / "samples" / "verl"):
        if d and (Path(d) / SAMPLE_NAMES[0]).is_file():
            return Path(d)
    raise FileNotFoundError("verl sample logs not found: set RUNDASH_VERL_SAMPLES to a folder holding "
                            + ", ".join(SAMPLE_NAMES))


def sample_logs(folder: Path) -> list[bytes]:
    out = []
    for name in SAMPLE_NAMES:
        p = folder / name
        if not p.is_file() and name.startswith("lego/"):  # the shared samples keep it elsewhere
            p = folder.parent / "generated" / name
        if p.is_file():
            out.append(p.read_bytes())
    return out


@dataclass
class Generated:
    path: str
    bytes: int
    lines: int
    copies: int
    seconds: float


def build_log(path: str, megabytes: float, samples: list[bytes] | None = None) -> Generated:
    """Repeat the sample logs up to `megabytes`, shifting each copy's steps past the last one."""
    t = time.perf_counter()
    samples = samples or sample_logs(sample_dir())
    target, written, lines, copies, offset = int(megabytes * 1e6), 0, 0, 0, 0
    with open(path, "wb") as out:
        while written < target:
            for data in samples:
                top = [offset]

                def shift(m, base=offset):
                    step = int(m.group(1)) + base
                    top[0] = max(top[0], step)
                    return b"step:%d" % step

                shifted = _STEP.sub(shift, data)
                out.write(shifted)
                written, lines = written + len(shifted), lines + shifted.count(b"\n")
                copies, offset = copies + 1, top[0] + 1
    return Generated(path, written, lines, copies, time.perf_counter() - t)


# Contenders ---------------------------------------------------------------------------------------
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
METRIC = re.compile(r"(?:^|[^\w/])step:(\d+) - (.+)$")


def baseline_rows(path: str) -> list[dict]:
    """What peer dashboards do: per line, decode, strip ANSI, regex, split the pairs."""
    rows = []
    with open(path, "rb") as fh:
        for raw in fh:
            line = ANSI.sub("", raw.decode("utf-8", "replace")).rstrip()
            m = METRIC.search(line)
            if m is None:
                continue
            row = {"step": int(m.group(1))}
            try:
                for pair in m.group(2).split(" - "):
                    key, _, value = pair.rpartition(":")
                    if value.startswith("np."):
                        value = value[value.index("(") + 1: -1]
                    row[key] = 1.0 if value == "True" else 0.0 if value == "False" else float(value)
            except ValueError:
                continue  # not a metric line after all (a sample dump mentioning step:)
            rows.append(row)
    return rows


def rundash_rows(path: str) -> list[dict]:
    return VerlLogTail(path).poll().rows


def measure(contender: str, path: str) -> dict:
    if contender in ("rundash", "baseline"):
        rows, cost = timed_gc_on(lambda: (rundash_rows if contender == "rundash" else baseline_rows)(path))
        return {**cost, "rows": len(rows), "values": sum(len(r.keys() - _NOT_VALUES) for r in rows)}
    if contender == "floor":
        n, cost = timed_gc_on(lambda: _count_lines(path))
        return {**cost, "rows": n}
    if contender == "cold":
        cache.shared.clear()
        frame, cost = timed_gc_on(lambda: rd.open_run(path).metrics())
        return {**cost, "rows": len(frame)}
    if contender == "verify":
        return verify(path)
    if contender == "refresh":
        return measure_refresh(path)
    raise ValueError(f"unknown contender {contender!r}")


def timed_gc_on(fn) -> tuple:
    """`timed(fn)` with the garbage collector on, as in the app: `gc_on` says whether it still was
    afterwards, `gc_collections` how many collections ran meanwhile (0 in a long parse would mean
    something switched it off)."""
    if not gc.isenabled():
        raise RuntimeError("the garbage collector is off before the measurement")
    before = sum(g["collections"] for g in gc.get_stats())
    value, cost = timed(fn)
    return value, {**cost, "gc_on": gc.isenabled(),
                   "gc_collections": sum(g["collections"] for g in gc.get_stats()) - before}


def _count_lines(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def merged(rows: list[dict]) -> dict:
    out = {}
    for r in rows:
        for k, v in r.items():
            if k not in ("step", "producer", "time"):
                out[(r["step"], k)] = v
    return out


def verify(path: str) -> dict:
    """rundash's merged (step, key) values against the baseline's; rundash may hold more: the
    era-S1 validation pprints (step 0 and the last step) the baseline does not read."""
    mine, theirs = merged(rundash_rows(path)), merged(baseline_rows(path))
    off = sum(1 for k, v in theirs.items()
              if k not in mine or not (mine[k] == v or (math.isnan(v) and math.isnan(mine[k]))))
    extra = [k for k in mine if k not in theirs]
    from_pprint = sum(1 for _s, k in extra if k.startswith("val/test_score/"))
    return {"checked": len(theirs), "off": off, "extra": len(extra), "extra_from_pprint": from_pprint,
            "ok": off == 0 and from_pprint == len(extra)}


def measure_refresh(path: str, lines: int = 10, rounds: int = 5) -> dict:
    """After a cold load, rounds of: append `lines` metric lines, time `run.metrics()` (best
    round; a round that grows the store's arrays pays for that growth)."""
    cache.shared.clear()
    run = rd.open_run(path)
    rows = len(run.metrics())
    best, added = float("inf"), []
    for _ in range(rounds):
        step = run.store().tail.last_step + 1
        with open(path, "ab") as fh:
            fh.write(b"".join(b"(TaskRunner pid=1) step:%d - actor/pg_loss:-0.%03d - critic/score/mean:0.5\n"
                             % (step + i, i) for i in range(lines)))
        t = time.perf_counter()
        now = len(run.metrics())
        best = min(best, time.perf_counter() - t)
        added.append(now - rows)
        rows = now
    return {"seconds": best, "rows_added": min(added), "expected": 2 * lines, "rounds": rounds,
            "all_added": added}


# Report -------------------------------------------------------------------------------------------
def build_report(gen: Generated, results: dict) -> tuple[str, dict]:
    """The table and the checks. The speed target is on user CPU time (the parse's own work, what
    a busy or shared machine changes least); wall time is shown for information."""
    size = gen.bytes / 1e6
    base, base_user = results["baseline"]["seconds"], results["baseline"]["user_s"]

    def row(label: str, r: dict, note: str) -> list[str]:
        return [label, secs(r["seconds"]), f"{size / r['seconds']:,.0f}", f"{base / r['seconds']:.1f}×",
                f"{r['user_s']:.2f}", _ratio(base_user, r["user_s"]), note, cpu_note(r)]

    rows = [
        row("rundash parse: VerlLogTail.poll() → rows", results["rundash"],
            f"{results['rundash']['rows']:,} metric lines, {results['rundash']['values']:,} values"),
        row("baseline: per line decode, ANSI regex, step: regex, split pairs", results["baseline"],
            f"{results['baseline']['rows']:,} metric lines, {results['baseline']['values']:,} values"),
        row("floor: read the lines, no parsing", results["floor"], f"{results['floor']['rows']:,} lines"),
        row("rundash cold load: open_run().metrics() (parse + merge + tidy)", results["cold"],
            f"{results['cold']['rows']:,} tidy rows"),
    ]
    table = format_table(["measurement", "time (s)", "MB/s", "vs baseline (wall)", "user CPU (s)",
                          "vs baseline (user CPU)", "result", "CPU of that run"], rows, right={1, 2, 3, 4, 5})
    speedup = base / results["rundash"]["seconds"]
    user_speedup = base_user / results["rundash"]["user_s"] if results["rundash"]["user_s"] > 0 else math.inf
    timed_runs = ("rundash", "baseline", "floor", "cold")
    gc_ok = all(results[k].get("gc_on", True) for k in timed_runs)
    ver, ref = results["verify"], results["refresh"]
    checks = {"speedup": speedup, "user_cpu_speedup": user_speedup, "speedup_ok": user_speedup >= TARGET_SPEEDUP,
              "gc_on": gc_ok, "rows_ok": bool(ver["ok"]),
              "refresh_ok": all(n == ref["expected"] for n in ref["all_added"])}
    check_rows = [
        ["rundash parse / baseline, user CPU (collector on)",
         f"{_ratio(base_user, results['rundash']['user_s'])} (wall {speedup:.1f}×, for information)",
         f"≥ {TARGET_SPEEDUP:.0f}×", pass_miss(checks["speedup_ok"])],
        ["garbage collector on in every timed run",
         ", ".join(f"{k} {results[k].get('gc_collections', '?')}" for k in timed_runs) + " collections",
         "on", pass_miss(gc_ok)],
        ["rundash values = baseline values", f"{ver['checked']:,} (step, key) cells checked, {ver['off']} off", "0 off",
         pass_miss(ver["off"] == 0)],
        ["rundash-only cells", f"{ver['extra']:,} ({ver['extra_from_pprint']:,} from era-S1 validation pprints)",
         "pprints only", pass_miss(ver["ok"])],
        ["refresh +10 lines: run.metrics()", f"{secs(ref['seconds'])} (best of {ref['rounds']}), "
         f"+{ref['rows_added']} tidy rows per round", f"+{ref['expected']}", pass_miss(checks["refresh_ok"])],
    ]
    reps = len(results["rundash"].get("all_seconds", [1]))
    head = (f"file: {gen.path}\n      {size:,.1f} MB, {gen.lines:,} lines: {gen.copies} copies of the sample logs, "
            f"steps shifted per copy; generated in {gen.seconds:.1f} s\n"
            f"      best of {reps} run(s) per contender (least user CPU), each in a fresh process; peak RSS (MB): "
            + ", ".join(f"{k} {mb(results[k].get('peak_rss_mb'))}" for k in timed_runs))
    if "loadavg" in results:
        head += "\n      1-min load average before/after: " + " / ".join(f"{x:.2f}" for x in results["loadavg"])
    return "\n\n".join([head, table, format_table(["check", "value", "target", "result"], check_rows, right={1})]), checks


def _ratio(base: float, x: float) -> str:
    return f"{base / x:.1f}×" if x > 0 else "∞"


# Command ------------------------------------------------------------------------------------------
def add_parser(sub) -> None:
    p = sub.add_parser("verl", help="a ~100 MB verl console log: rundash vs the per-line approach")
    p.add_argument("--mb", type=float, default=100.0, help="size of the generated log in MB (default 100)")
    add_common_options(p, "the log to DIR/bench.log", repeat=3)
    p.set_defaults(func=cmd_verl)


def cmd_verl(args) -> int:
    with work_root(args.dir, "rundash-bench-verl-") as root:
        path = os.path.join(root, "bench.log")
        print(f"building a {args.mb:,.0f} MB verl log from the sample logs in {sample_dir()} …", flush=True)
        gen = build_log(path, args.mb)
        print(f"built {gen.bytes / 1e6:,.1f} MB ({gen.lines:,} lines) in {gen.seconds:.1f} s", flush=True)
        load0 = os.getloadavg()[0]
        results: dict = best_of("verl", ("rundash", "baseline", "floor", "cold"), {"path": path},
                                repeat=args.repeat, in_process=args.in_process, key="user_s")
        print("verifying rundash's values against the baseline's …", flush=True)
        results["verify"] = run_one("verl", "verify", {"path": path}, in_process=args.in_process)
        print("measuring a refresh after appending lines …", flush=True)
        results["refresh"] = run_one("verl", "refresh", {"path": path}, in_process=args.in_process)
        results["loadavg"] = [load0, os.getloadavg()[0]]
        text, checks = build_report(gen, results)
        print_report(text, args.json, {"generated": asdict(gen), "results": results, "checks": checks})
        return 0 if checks["rows_ok"] and checks["refresh_ok"] and checks["gc_on"] else 1
