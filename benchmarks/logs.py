"""`python -m benchmarks logs`: the Logs page's reads on a multi-GB log.

Writes a big vLLM-style `inference.log` (default 2 GB of real lines: engine stats, access lines
without a time, warnings) and three 100 MB loguru logs (trainer, orchestrator, an env server, with
ANSI colours), then measures, each in a fresh process (best of `--repeat`):

- `tail`: the last 1000 lines of the big log;
- `merged`: the last 1000 lines of all four merged by time;
- `filter`: a regex kept in one line of ten, 1000 lines wanted (a scan of about the last 10k lines);
- `older`: the "Load older" page before a first tail (only the second read is timed);
- `floor`: reading the last 1 MB with one plain `seek` + `read` (what a tail cannot beat by much);
- `tail -n 1000` (coreutils) through a subprocess, for reference.

Each process first makes one small read of another file (one-time costs of a cold process are not
counted: the app's server is warm). Each row gives wall time, the bytes the reader read (counted
from outside it: `common.counted_reads`) and the process's peak RSS growth. Targets: tail ≤ 5× the floor, RSS growth < 200 MB.
"""
from __future__ import annotations

import os
import subprocess
import time

from benchmarks.common import add_common_options, best_of, counted_reads, format_table, print_report, work_root

LINES_WANTED = 1000
FILTER = "Avg prompt throughput"
TAIL_FACTOR = 5.0
RSS_LIMIT_MB = 200.0


# The logs ---------------------------------------------------------------------------------------------
def _vllm_block(t: float, n: int) -> str:
    """n lines of a vLLM server log at time t: 1 in 10 an engine stats line, a warning now and
    then, the rest access lines (no time of their own)."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(t))
    out = []
    for i in range(n):
        if i % 10 == 0:
            out.append(f"(APIServer pid=3134) INFO {stamp} [loggers.py:123] Engine 000: {FILTER}: {2000 + i}.4 tokens/s, "
                       f"Avg generation throughput: 480.6 tokens/s, Running: 14 reqs, GPU KV cache usage: 7.9%\n")
        elif i % 23 == 7:
            out.append(f"(APIServer pid=3134) WARNING {stamp} [serving.py:88] request {i} exceeded max_tokens; truncated\n")
        else:
            out.append(f'(APIServer pid=3134) INFO:     127.0.0.1:{50000 + i} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    return "".join(out)


def _loguru_block(t: float, n: int, who: str) -> str:
    hms = time.strftime("%H:%M:%S", time.localtime(t))
    out = []
    for i in range(n):
        level, code = ("WARNING", "\x1b[33m\x1b[1m") if i % 50 == 0 else ("INFO", "\x1b[1m")
        out.append(f"\x1b[2m{hms}\x1b[0m {code}{level:>7}\x1b[0m {code}\x1b[22m{who} | step {i} | "
                   f"Loss: 0.{i:04d} | Throughput: {300 + i} tokens/s\x1b[0m\x1b[0m\n")
    return "".join(out)


def write_log(path: str, size_mb: float, block, *, t0: float, span_s: float = 3600.0, lines_per_block: int = 50) -> int:
    """A log of about `size_mb` MB of real lines spread over `span_s` seconds of log time (every
    log of the bench covers the same hour, so a merged tail interleaves them); its bytes."""
    target, written = int(size_mb * (1 << 20)), 0
    blocks = max(1, -(-target // len(block(t0, lines_per_block))))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        for i in range(blocks):
            data = block(t0 + span_s * i / max(1, blocks - 1), lines_per_block)
            fh.write(data)
            written += len(data)
    end = t0 + span_s
    os.utime(path, (end, end))
    return written


def build(root: str, *, big_mb: float, small_mb: float) -> dict[str, str]:
    """The four logs (written once; a kept `--dir` reuses logs of the right size)."""
    t0 = time.time() - 86400
    paths = {"inference": os.path.join(root, "inference.log"), "trainer": os.path.join(root, "trainer.log"),
             "orchestrator": os.path.join(root, "orchestrator.log"),
             "env:math": os.path.join(root, "envs", "train", "math.log")}
    for name, path in paths.items():
        mb = big_mb if name == "inference" else small_mb
        if os.path.exists(path) and abs(os.path.getsize(path) - mb * (1 << 20)) < (1 << 20):
            continue
        block = _vllm_block if name == "inference" else (lambda t, n, who=name: _loguru_block(t, n, who))
        started = time.perf_counter()
        size = write_log(path, mb, block, t0=t0)
        print(f"wrote {path}: {size / 1e6:,.0f} MB in {time.perf_counter() - started:.1f} s", flush=True)
    return paths


# Contenders (each in its own process) -----------------------------------------------------------------
def _specs(paths: dict[str, str], names: list[str]):
    from rundash_core.logs.reading import LogSpec

    return [LogSpec(paths[n], paths[n], n) for n in names]


def _warm_up(paths: dict[str, str]) -> None:
    """One small read first, so one-time costs (pandas' and the regex engines' first calls) are
    not counted: the app's server process is warm."""
    from rundash_core.logs.reading import LogSpec, read_specs

    small = paths["env:math"]
    read_specs([LogSpec(small, small, "warm-up")], tail=10, pattern="warm|up")


def measure(contender: str, *, paths: dict[str, str]) -> dict:
    _warm_up(paths)
    with counted_reads() as count:
        return _measure(contender, paths, count)


def _measure(contender: str, paths: dict[str, str], counter) -> dict:
    from rundash_core.logs.reading import read_specs

    big = paths["inference"]
    start_bytes = counter.bytes
    started = time.perf_counter()
    if contender == "floor":
        with open(big, "rb") as fh:
            fh.seek(-min(1 << 20, os.path.getsize(big)), os.SEEK_END)
            data = fh.read()
        return {"seconds": time.perf_counter() - started, "bytes_read": len(data), "lines": data.count(b"\n")}
    if contender == "tail_cmd":
        out = subprocess.run(["tail", "-n", str(LINES_WANTED), big], capture_output=True, check=True).stdout
        return {"seconds": time.perf_counter() - started, "bytes_read": None, "lines": out.count(b"\n")}
    if contender == "older":
        first = read_specs(_specs(paths, ["inference"]), tail=LINES_WANTED)
        before = counter.bytes
        started = time.perf_counter()
        frame = read_specs(_specs(paths, ["inference"]), tail=LINES_WANTED, before=first.attrs["older"])
        ok = frame["offset"].max() < first["offset"].min()
        return {"seconds": time.perf_counter() - started, "bytes_read": counter.bytes - before, "lines": len(frame),
                "ok": bool(ok)}
    names = {"tail": ["inference"], "merged": list(paths), "filter": ["inference"]}[contender]
    frame = read_specs(_specs(paths, names), tail=LINES_WANTED, pattern=FILTER if contender == "filter" else None)
    seconds = time.perf_counter() - started
    ok = len(frame) == LINES_WANTED and (contender != "filter" or frame["text"].str.contains(FILTER).all())
    if contender == "merged":
        ok = ok and frame["time"].is_monotonic_increasing
    return {"seconds": seconds, "bytes_read": counter.bytes - start_bytes, "lines": len(frame), "ok": bool(ok),
            "components": int(frame["component"].nunique())}


CONTENDERS = ("tail", "merged", "filter", "older", "floor", "tail_cmd")
LABELS = {"tail": "tail 1000 lines of the big log", "merged": "merged tail of all four logs",
          "filter": f"regex '{FILTER}' (1 line in 10), 1000 lines", "older": "load older (the page before)",
          "floor": "floor: last 1 MB, one seek + read", "tail_cmd": "tail -n 1000 (coreutils, subprocess)"}


def build_report(sizes: dict[str, int], results: dict[str, dict]) -> tuple[str, dict]:
    floor = results["floor"]["seconds"]
    rows = []
    for c in CONTENDERS:
        r = results[c]
        read = "—" if r.get("bytes_read") is None else f"{r['bytes_read'] / 1e6:,.2f} MB"
        rows.append([LABELS[c], f"{r['seconds'] * 1000:,.1f} ms", f"{r['seconds'] / floor:,.1f}×", read,
                     f"{r['lines']:,}", f"{r.get('delta_rss_mb', 0):,.0f} MB"])
    rss = max(results[c].get("delta_rss_mb", 0.0) for c in ("tail", "merged", "filter", "older"))
    checks = {"tail_within_factor": results["tail"]["seconds"] <= TAIL_FACTOR * floor,
              "rss_growth_ok": rss < RSS_LIMIT_MB,
              "all_ok": all(results[c].get("ok", True) for c in CONTENDERS),
              "ranges_only": max(results[c]["bytes_read"] for c in ("tail", "merged", "filter", "older")) < sizes["inference"] / 4}
    sizes_text = ", ".join(f"{n} {s / 1e6:,.0f} MB" for n, s in sizes.items())
    text = "\n".join([f"logs: {sizes_text}", "",
                      format_table(["read", "time", "× floor", "bytes read", "lines", "peak RSS growth"], rows,
                                   right={1, 2, 3, 4, 5}), "",
                      f"tail ≤ {TAIL_FACTOR:g}× floor: {'yes' if checks['tail_within_factor'] else 'NO'}; "
                      f"peak RSS growth < {RSS_LIMIT_MB:g} MB: {'yes' if checks['rss_growth_ok'] else 'NO'} ({rss:,.0f} MB); "
                      f"results checked: {'yes' if checks['all_ok'] else 'NO'}; only ranges read: "
                      f"{'yes' if checks['ranges_only'] else 'NO'}"])
    return text, checks


def add_parser(sub) -> None:
    p = sub.add_parser("logs", help="Logs page reads on a multi-GB log: tail, merged tail, regex, load older")
    p.add_argument("--size-mb", type=float, default=2048.0, help="size of the big log in MB (default 2048)")
    p.add_argument("--small-mb", type=float, default=100.0, help="size of each of the three other logs (default 100)")
    add_common_options(p, "the logs to DIR", repeat=3)
    p.set_defaults(func=cmd_logs)


def cmd_logs(args) -> int:
    with work_root(args.dir, "rundash-bench-logs-") as root:
        paths = build(root, big_mb=args.size_mb, small_mb=args.small_mb)
        sizes = {n: os.path.getsize(p) for n, p in paths.items()}
        results = best_of("logs", CONTENDERS, {"paths": paths}, repeat=args.repeat, in_process=args.in_process)
        text, checks = build_report(sizes, results)
        print_report(text, args.json, {"sizes": sizes, "results": results, "checks": checks})
        return 0 if checks["all_ok"] and checks["ranges_only"] else 1
