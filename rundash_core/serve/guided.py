"""Guided start: which folder under the current one holds the runs, ranked by what is in it.

`rundash` without a directory lets the real discovery (`rundash_core.discover.scan`, down to
`RUNDASH_DEPTH`) find the runs under the current folder, groups them by the subfolder they sit in
(`outputs/`, `logs/`, …) and ranks those folders by how many runs they hold and how recently one
was written, not by name. The same list names the alternatives when a given directory holds no
runs.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pandas as pd

from rundash_core.discover import SKIP_NAMES, scan

MAX_SUBFOLDERS = 50  # searched at most when the current folder itself reads as a run


@dataclass(frozen=True)
class FolderCandidate:
    """A folder that holds runs: how many, and when the newest was last written (epoch s)."""

    path: str
    runs: int
    newest: float | None

    def describe(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        when = "" if self.newest is None else f", newest {_ago(now - self.newest)}"
        return f"{self.runs} run{'s' * (self.runs != 1)}{when}"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def rank(candidates: list[FolderCandidate]) -> list[FolderCandidate]:
    """Folders with runs, most runs first, then the most recently written."""
    held = [c for c in candidates if c.runs > 0]
    return sorted(held, key=lambda c: (-c.runs, -(c.newest or 0.0), c.path))


def candidates(base: str | None = None) -> list[FolderCandidate]:
    """The ranked folders that hold the runs discovery finds under `base` (default: the current
    folder): each run counts for the subfolder of `base` it sits in, or for `base` itself when it
    is one of its entries. When `base` itself reads as a run (a work folder with an empty `logs/`
    looks like a prime-rl run that is starting), its subfolders are searched too, and `base` is
    named only when they hold nothing."""
    base = os.path.abspath(base or os.getcwd())
    found = _runs(base)
    if base in found:
        inner = {p: t for sub in _subfolders(base) for p, t in _runs(sub).items()}
        found = inner or found
    held: dict[str, list] = {}
    for path, updated in found.items():
        parts = os.path.relpath(path, base).split(os.sep)
        top = base if len(parts) == 1 else os.path.join(base, parts[0])
        held.setdefault(top, []).append(updated)
    return rank([FolderCandidate(top, len(times), _newest(times)) for top, times in held.items()])


def _runs(folder: str) -> dict[str, object]:
    """{run path: last data time} of the runs discovery finds under `folder` (none if unreadable)."""
    try:
        frame, _errors = scan([folder])
    except Exception:  # noqa: BLE001 - an unreadable folder has no candidates
        return {}
    return dict(zip(frame["path"], frame["updated"]))


def _subfolders(base: str) -> list[str]:
    try:
        with os.scandir(base) as it:
            names = sorted(e.name for e in it if e.is_dir() and not e.name.startswith(".") and e.name not in SKIP_NAMES)
    except OSError:
        return []
    return [os.path.join(base, n) for n in names[:MAX_SUBFOLDERS]]


def _newest(times: list) -> float | None:
    known = [pd.Timestamp(t).timestamp() for t in times if not pd.isna(t)]
    return max(known) if known else None
