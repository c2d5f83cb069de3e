"""verl console output as a Ray-launched trainer prints it (`docs/formats/verl.md`), for the
verl and SWE-Lego-RL demo runs: Ray actor prefixes with ANSI colours, `step:N - key:value` metric
lines in the F3 era (numpy >= 2: numpy scalars print as `np.float64(…)` / `np.int64(…)`, plain
Python numbers stay plain, float32-reduced values keep their noise), the pprinted resolved config,
the wrapped `Initial/Final validation metrics` pprints, tqdm bars and Ray's start-up banner.

Everything here formats; the values come from the run writers' seeded RNGs.
"""
from __future__ import annotations

import pprint
import time

import numpy as np

CYAN, YELLOW, GREEN, RESET = "\x1b[36m", "\x1b[33m", "\x1b[32m", "\x1b[0m"
_BLOCKS = " ▏▎▍▌▋▊▉"


def prefix(actor: str, pid: int, ip: str | None = None) -> str:
    """`(TaskRunner pid=N)` / `(WorkerDict pid=N, ip=…)` in Ray's cyan, with the trailing space."""
    where = f", ip={ip}" if ip else ""
    return f"{CYAN}({actor} pid={pid}{where}){RESET} "


def raylet(msg: str) -> str:
    return f"{YELLOW}(raylet){RESET} {msg}\n"


def repeated(n: int) -> str:
    """Ray's dedup suffix, in green."""
    return f"{GREEN} [repeated {n}x across cluster]{RESET}"


# Values (spec 2.1) --------------------------------------------------------------------------------
def py(x: float) -> str:
    """A plain Python float: `repr`."""
    return repr(float(x))


def f32(x: float) -> str:
    """A value reduced in float32 and printed as a Python float: `0.4000000059604645`."""
    return repr(float(np.float32(x)))


def npf(x: float) -> str:
    """A numpy float64 scalar under numpy >= 2."""
    return f"np.float64({float(x)!r})"


def npi(x: int) -> str:
    return f"np.int64({int(x)})"


def metric_line(step: int, items: list[tuple[str, str]]) -> str:
    """`step:N - k:v - …` (values already formatted), without prefix or newline."""
    return f"step:{step} - " + " - ".join(f"{k}:{v}" for k, v in items)


# Multi-line prints --------------------------------------------------------------------------------
def pprint_lines(pfx: str, obj) -> list[str]:
    """`pprint.pprint(obj)` as one prefixed line per output line (how Ray forwards it)."""
    return [pfx + line + "\n" for line in pprint.pformat(obj).splitlines()]


def validation_pprint(pfx: str, label: str, items: list[tuple[str, str]]) -> list[str]:
    """verl's `pprint(f"{label} validation metrics: {val_metrics}")`: the dict's repr (numpy
    wrappers included) inside a string that pprint wraps into adjacent literals."""
    text = f"{label} validation metrics: {{" + ", ".join(f"{k!r}: {v}" for k, v in items) + "}"
    return pprint_lines(pfx, text)


# tqdm ----------------------------------------------------------------------------------------------
def _interval(s: float) -> str:
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def tqdm_bar(desc: str, done: int, total: int, elapsed: float, width: int = 10, unit: str = "it",
             initial: int = 0) -> str:
    """One tqdm redraw: `Training Progress:  13%|█▎        | 20/150 [1:02:11<6:44:05, 186.50s/it]`
    (`initial`: where a resumed bar starts; the rate counts only the steps done since)."""
    frac = done / total if total else 0.0
    cells = frac * width
    full = min(int(cells), width)
    part = int((cells - full) * 8)
    bar = "█" * full + (_BLOCKS[part] if full < width and part else "")
    bar = bar + " " * (width - len(bar))
    head = f"{desc}: {int(frac * 100):3d}%|{bar}| {done}/{total} "
    if done <= initial or elapsed <= 0:
        return head + f"[{_interval(elapsed)}<?, ?{unit}/s]"
    rate = elapsed / (done - initial)
    eta = rate * (total - done)
    speed = f"{rate:.2f}s/{unit}" if rate >= 1 else f"{1 / rate:.2f}{unit}/s"
    return head + f"[{_interval(elapsed)}<{_interval(eta)}, {speed}]"


# Ray and friends -----------------------------------------------------------------------------------
def ray_banner(t: float, head_ip: str) -> list[str]:
    """Ray's `ray.init()` lines: `2026-08-12 03:31:43,292\tINFO worker.py:1843 -- …`."""
    def stamp(x: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(x)) + f",{int((x % 1) * 1000):03d}"

    return [f"{stamp(t)}\tINFO worker.py:1660 -- Connecting to existing Ray cluster at address: {head_ip}:6379...\n",
            f"{stamp(t + 0.013)}\tINFO worker.py:1843 -- Connected to Ray cluster. View the dashboard at "
            f"\x1b[1m\x1b[32m127.0.0.1:8265 \x1b[39m\x1b[22m\n"]


def worker_stamp(t: float) -> str:
    """The `2025-06-18 16:50:58,067` stamp of Python `logging` lines inside workers."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int((t % 1) * 1000):03d}"
