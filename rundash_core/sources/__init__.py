"""One module per source format; this registry finds and opens runs of every kind."""
from __future__ import annotations

import os

from ..run import Run, RunError
from . import prime_rl

# (kind, "is this directory a run of mine?", Run class), tried in order.
SOURCES = [
    ("prime-rl", prime_rl.is_run_dir, prime_rl.PrimeRLRun),
]


def detect(path: str) -> type[Run] | None:
    """The Run class that can read `path`, or None."""
    if not os.path.isdir(path):
        return None
    for _kind, is_run, cls in SOURCES:
        if is_run(path):
            return cls
    return None


def find_runs(folder: str) -> list[tuple[str, type[Run]]]:
    """Runs in a tracked folder: the folder itself if it is a run, else its non-hidden children."""
    cls = detect(folder)
    if cls is not None:
        return [(folder, cls)]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise RunError(f"{folder}: cannot list directory ({e.strerror or e})") from e
    found = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if not entry.is_dir():
                continue
        except OSError:
            continue
        cls = detect(entry.path)
        if cls is not None:
            found.append((entry.path, cls))
    return found


def open_run(path: str | os.PathLike, run_id: str | None = None) -> Run:
    """Open a run directory of any supported kind; RunError says why when it is not one."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.lexists(path):
        raise RunError(f"{path}: no such directory")
    if not os.path.isdir(path):
        raise RunError(f"{path}: not a directory")
    cls = detect(path)
    if cls is None:
        raise RunError(
            f"{path}: not a run directory of a supported kind (prime-rl runs hold configs/, logs/, "
            "monitors/ or traces.jsonl)")
    return cls(path, run_id=run_id)
