"""What every benchmark shares: one measurement per fresh process, peak RSS, report tables.

Why a fresh process per contender: peak RSS (`ru_maxrss`) only grows, so it says something about
one contender only in a process that ran nothing else; and no contender profits from caches or
allocator state another one left behind. `run_one` starts
`python -m benchmarks _one <bench> <contender> <kwargs as JSON>`, which calls
`benchmarks.<bench>.measure(contender, **kwargs)` and prints its result as one JSON line.
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class ReadCount:
    """Bytes and read calls counted by `counted_reads`."""

    bytes: int = 0
    reads: int = 0


class _CountedFile:
    """A file opened by the reader, each `read` counted (the rest passed through)."""

    def __init__(self, fh, count: ReadCount):
        self._fh, self._count = fh, count

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self._count.bytes += len(data)
        self._count.reads += 1
        return data

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


LOG_READER = ("rundash_core.logs.reading", "rundash_core.logs.merge")  # the log reader's modules that open files


@contextmanager
def counted_reads(modules: tuple[str, ...] = LOG_READER) -> Iterator[ReadCount]:
    """Within this block, what `modules` read: the files they open through `open_file` (patched in
    their namespaces for the block) count each read's bytes. The runtime keeps no counter: a
    benchmark or a test measures from its own side (every thread's reads through them count)."""
    count, real = ReadCount(), {}
    for name in modules:
        mod = importlib.import_module(name)
        real[name] = opener = mod.open_file
        mod.open_file = lambda path, opener=opener: _CountedFile(opener(path), count)
    try:
        yield count
    finally:
        for name, opener in real.items():
            importlib.import_module(name).open_file = opener


def rss_mb() -> float:
    """Peak RSS of this process so far, in MB: Linux's VmHWM, which starts at this program's exec
    (`ru_maxrss` keeps the forking parent's peak across exec: a big parent would count as ours)."""
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024.0
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn: Callable[[], Any]) -> tuple[Any, dict]:
    """`fn()` and what it cost: wall seconds, CPU seconds in user and kernel mode, and minor page
    faults (first touches of new memory). Why the last three: on a VM, the kernel time of page
    faults can be a large and variable share of a parse that keeps what it read."""
    r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    value = fn()
    seconds, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
    return value, {"seconds": seconds, "user_s": r1.ru_utime - r0.ru_utime, "sys_s": r1.ru_stime - r0.ru_stime,
                   "minor_faults": r1.ru_minflt - r0.ru_minflt}


def cpu_note(r: dict) -> str:
    """`user 0.41 s, sys 0.10 s, 43,281 page faults` for a measurement made by `timed`."""
    if "user_s" not in r:
        return ""
    return f"user {r['user_s']:.2f} s, sys {r['sys_s']:.2f} s, {r['minor_faults']:,} page faults"


def measure_here(bench: str, contender: str, kwargs: dict) -> dict:
    """Run one contender in this process; `peak_rss_mb` counts from process start, `delta_rss_mb`
    from after the bench module's imports."""
    module = importlib.import_module(f"{__package__}.{bench}")
    gc.collect()
    base = rss_mb()
    out = {"contender": contender, **module.measure(contender, **kwargs)}
    out["peak_rss_mb"] = rss_mb()
    out["delta_rss_mb"] = out["peak_rss_mb"] - base
    return out


def run_one(bench: str, contender: str, kwargs: dict, *, in_process: bool = False) -> dict:
    """Measure one contender in a fresh Python process (or here, for fast tests)."""
    if in_process:
        return measure_here(bench, contender, kwargs)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", __package__, "_one", bench, contender, json.dumps(kwargs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best_of(bench: str, contenders: tuple[str, ...], kwargs: dict, *, repeat: int,
            in_process: bool = False, key: str = "seconds") -> dict[str, dict]:
    """Each contender `repeat` times, interleaved so background load hits all alike; the run with
    the least `key` (wall seconds, or `user_s` for user CPU) counts, with every run's seconds kept
    as `all_seconds` (and user CPU as `all_user_s` when measured)."""
    runs: dict[str, list[dict]] = {}
    for r in range(max(repeat, 1)):
        for contender in contenders:
            print(f"measuring {contender} ({r + 1}/{max(repeat, 1)}) …", flush=True)
            runs.setdefault(contender, []).append(run_one(bench, contender, kwargs, in_process=in_process))
    out = {}
    for contender, measured in runs.items():
        best = dict(min(measured, key=lambda x: x[key]))
        best["all_seconds"] = [x["seconds"] for x in measured]
        if all("user_s" in x for x in measured):
            best["all_user_s"] = [x["user_s"] for x in measured]
        if all("peak_rss_mb" in x for x in measured):  # every run's peak, not only the fastest one's
            best["all_peak_rss_mb"] = [x["peak_rss_mb"] for x in measured]
            best["all_delta_rss_mb"] = [x["delta_rss_mb"] for x in measured]
        out[contender] = best
    return out


# Command-line pieces every bench shares ----------------------------------------------------------
def add_common_options(p, kept: str, *, repeat: int | None = None, repeat_help: str = "",
                       in_process_help: str = "measure in this process (fast, for tests)") -> None:
    """`--dir` (keep what is generated: `kept`), `--repeat` (when the bench repeats), `--in-process`
    and `--json`."""
    p.add_argument("--dir", help=f"write {kept} and keep it (default: a temp dir, removed at the end)")
    if repeat is not None:
        p.add_argument("--repeat", type=int, default=repeat,
                       help=f"{repeat_help or 'runs per contender, interleaved'}; the best counts (default {repeat})")
    p.add_argument("--in-process", action="store_true", help=in_process_help)
    p.add_argument("--json", help="also write all measurements to this JSON file")


@contextmanager
def work_root(keep_dir: str | None, prefix: str) -> Iterator[str]:
    """The folder a bench generates its data in: `keep_dir` (kept), else a temp dir removed after."""
    root = os.path.abspath(keep_dir) if keep_dir is not None else tempfile.mkdtemp(prefix=prefix)
    os.makedirs(root, exist_ok=True)
    try:
        yield root
    finally:
        if keep_dir is None:
            shutil.rmtree(root, ignore_errors=True)


def print_report(text: str, json_path: str | None, payload: dict) -> None:
    """The report on stdout, and every measurement as JSON when asked (`--json`)."""
    print()
    print(text, flush=True)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(payload, f, indent=1, default=str)


def format_table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A markdown table with aligned columns; columns in `right` are right-aligned."""
    right = right or set()
    widths = [max([len(str(h)), *(len(str(r[i])) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells):
        return "| " + " | ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def secs(x: float) -> str:
    """Seconds as `1.234`, or milliseconds below 0.1 s (`12.3 ms`)."""
    return f"{x:.3f}" if x >= 0.1 else f"{x * 1000:.1f} ms"


def mb(x: float | None) -> str:
    return "" if x is None else f"{x:,.0f}"


def pass_miss(ok: bool) -> str:
    return "PASS" if ok else "MISS"
