"""One module per source format; this registry finds and opens runs of every kind.

Each source says how it finds its runs: whether a path (a directory, or a file such as a verl
console log) is one of its runs (`detect`), and which runs sit directly among a folder's entries
(`find`). Sources are tried in order; the first that claims a path owns it. How a run is
summarised (the runs-list row, the run card) is its `Run.overview()`: discovery uses nothing else.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from rundash_core.io.files import OUTSIDE_ROOTS, allowed_roots, inside_roots, listed_path
from rundash_core.run import Run, RunError
from rundash_core.sources.prime_rl import run as prime_rl
from rundash_core.sources.relax import run as relax
from rundash_core.sources.swe_lego_rl import run as swe_lego_rl
from rundash_core.sources.verl import run as verl


@dataclass(frozen=True)
class Source:
    kind: str
    run_class: type[Run]
    detect: Callable[[str], bool]  # is this path a run of this kind?
    find: Callable[[list[os.DirEntry]], list[str]] | None = None  # runs among a folder's entries
    describe: str = ""  # what a run of this kind looks like, for error messages


def child_dirs(detect: Callable[[str], bool]) -> Callable[[list[os.DirEntry]], list[str]]:
    """`find` for directory-shaped runs: the non-hidden child directories that are runs."""
    def find(entries: list[os.DirEntry]) -> list[str]:
        out = []
        for e in entries:
            try:
                if not e.name.startswith(".") and e.is_dir() and detect(e.path):
                    out.append(e.path)
            except OSError:
                continue
        return out
    return find


SOURCES: list[Source] = [  # most specific first: a Relax <save> may also hold logs/
    Source("relax", relax.RelaxRun, relax.is_run_dir, child_dirs(relax.is_run_dir),
           "Relax runs hold rollout_result/{train,eval}/<step>.jsonl"),
    Source("prime-rl", prime_rl.PrimeRLRun, prime_rl.is_run_dir, child_dirs(prime_rl.is_run_dir),
           "prime-rl runs hold configs/, logs/, monitors/ or traces.jsonl"),
    Source("swe-lego-rl", swe_lego_rl.SweLegoRLRun, swe_lego_rl.is_run_file, swe_lego_rl.find_runs,
           "SWE-Lego-RL runs are verl console logs with harbor_trials/<project>/<exp>/step_N trial dirs"),
    Source("verl", verl.VerlRun, verl.is_run_file, verl.find_runs,
           "verl runs are console logs (*.log, *.out) or file-logger JSONL ({\"step\": N, \"data\": {…}})"),
]


def register(source: Source, *, before: str | None = None) -> None:
    """Add a source (ordered before `before` when given: more specific kinds come first)."""
    at = next((i for i, s in enumerate(SOURCES) if s.kind == before), len(SOURCES))
    SOURCES.insert(at, source)


def detect(path: str) -> type[Run] | None:
    """The Run class that can read `path` (a directory or a file), or None."""
    for source in SOURCES:
        try:
            if source.detect(path):
                return source.run_class
        except OSError:
            continue
    return None


def runs_among(entries: list[os.DirEntry]) -> dict[str, type[Run]]:
    """The runs among a folder's entries, by path (the first source that claims one owns it)."""
    found: dict[str, type[Run]] = {}
    for source in SOURCES:
        if source.find is None:
            continue
        for path in source.find(entries):
            found.setdefault(path, source.run_class)
    return found


def open_run(path: str | os.PathLike, run_id: str | None = None, *, reveal: bool = False) -> Run:
    """Open a run (directory or file) of any supported kind; RunError says why when it is not.
    Its readers hide secrets (`rundash_core.safety.gate`); `reveal=True`: raw values, for a notebook."""
    path = listed_path(os.path.abspath(os.fspath(path)))  # a non-UTF-8 name as the listing shows it
    if not os.path.lexists(path):
        raise RunError(f"{path}: no such file or directory")
    if not inside_roots(path):
        raise RunError(f"{path}: {OUTSIDE_ROOTS} ({', '.join(allowed_roots() or ())})")
    cls = detect(path)
    if cls is None:
        kinds = "; ".join(s.describe for s in SOURCES if s.describe)
        what = "directory" if os.path.isdir(path) else "file"
        raise RunError(f"{path}: not a run {what} of a supported kind ({kinds})")
    run = cls(path, run_id=run_id)
    run.reveal = reveal
    return run
