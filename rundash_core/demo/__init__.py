"""Synthetic runs of every supported kind, so a first-time user with no directory configured sees a
full dashboard.

    import rundash_core.demo as demo
    folder = demo.ensure_demo()          # writes once (< 1 s), returns the output dir holding the runs
    demo.start_live_writer()             # keeps the LIVE run growing, one step every 2 s

Four prime-rl runs follow the current on-disk layout of `docs/formats/prime-rl.md` exactly
(attempt folders with relative `latest` links, resolved JSON configs, loguru logs with ANSI colours,
`monitors/file/metrics.jsonl` with the real key grammar, a plain live trace chunk with its index
and orch annotations): live, completed, resumed after a crash, SFT. Next to them: a verl console
log (F3 era, resumed after a crash), a SWE-Lego-RL log with its Harbor trial folders (three paired
validation dumps) and a Relax `rollout_result/` dump (layout in `runs`). Their content is a
deterministic function of `now` and of the folder's path (seeded numpy RNG, fixed ids; the Lego
log names its trial folders by absolute path). The trace stream holds a small sample of episodes
(a few dozen), not every rollout the metrics count.

Everything is written into a temporary sibling folder and renamed into place, so readers never see
a half-written demo. The live writer (`live`) only ever appends to files that already exist inside
the demo folder.

Modules here: `specs` (envs, run shape), `curves` (seeded values per step), `logs` (log line
formats), `run_files`, `runs` (writing the runs), `folder` (where the demo lives), `live` (the live
writer thread). Each kind's writer sits in its source folder: `sources/prime_rl/demo_*.py`
(metric rows, traces, configs, RL and SFT runs), `sources/verl/demo_*.py` (console formatting,
dumps, the run), `sources/swe_lego_rl/demo_*.py` (trials, log, run), `sources/relax/demo_run.py`.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

from rundash_core.demo.folder import MARKER, demo_root, is_ours, read_marker

# `runs` and `live` import the writers in sources/<kind>/demo_*.py, which import this package's
# shared modules (curves, specs, run_files): imported where used, so a writer can be imported first.

__all__ = ["DEMO_VERSION", "demo_root", "ensure_demo", "start_live_writer", "stop_live_writer"]

DEMO_VERSION = 3  # bump when the written content changes, so older copies are rewritten
REFRESH_AFTER_S = 12 * 3600.0  # an older demo (with no live writer in this process) is rewritten

_DEMO_LOCK = threading.RLock()


def _is_current(root: Path, now: float | None) -> bool:
    from rundash_core.demo import live
    from rundash_core.demo.runs import OTHER_FILES, RUN_NAMES

    marker = read_marker(root)
    if marker is None or marker.get("version") != DEMO_VERSION:
        return False
    if not all((root / name / "monitors" / "file" / "metrics.jsonl").is_file() for name in RUN_NAMES.values()):
        return False
    if not all(os.path.exists(root / rel) for rel in OTHER_FILES):
        return False
    if marker.get("root", str(root)) != str(root):  # moved: the Lego log names its trials by path
        return False
    written = marker.get("written")
    if live.writer_alive(root) or not isinstance(written, (int, float)):
        return True
    age = (time.time() if now is None else now) - written
    return age <= REFRESH_AFTER_S


def ensure_demo(root: str | os.PathLike | None = None, *, now: float | None = None) -> Path:
    """Write the demo runs into `root` (default `demo_root()`) unless a current copy is there.

    Returns the folder that contains the runs (pass it to `rundash_core.discover`). Cheap when the
    demo is present: one small JSON read and eight stats. A stale demo (older `DEMO_VERSION`, a run
    missing, written for another path, or written more than `REFRESH_AFTER_S` ago while no live
    writer runs for it) is rewritten: into a temporary sibling folder, then renamed into place.
    """
    from rundash_core.demo.runs import OTHER_RUNS, RUN_NAMES, write_all

    root = Path(root).expanduser().absolute() if root is not None else demo_root()
    with _DEMO_LOCK:
        if _is_current(root, now):
            return root
        if os.path.lexists(root) and not is_ours(root):
            raise RuntimeError(f"{root} exists and is not a rundash demo folder; refusing to replace it")
        stop_live_writer(root)
        t = time.time() if now is None else float(now)
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
        try:
            write_all(tmp, t, root)
            with open(tmp / MARKER, "w", encoding="utf-8") as fh:
                json.dump({"version": DEMO_VERSION, "written": t, "runs": RUN_NAMES, "other_runs": OTHER_RUNS,
                           "root": str(root)}, fh)
            _install(tmp, root, now)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return root


def _install(tmp: Path, root: Path, now: float | None) -> None:
    """Move the finished `tmp` folder to `root`, setting a previous copy aside first."""
    old = None
    if os.path.lexists(root):
        old = root.parent / f".{root.name}.old-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(root, old)
        except FileNotFoundError:  # another process moved it meanwhile
            old = None
    try:
        os.rename(tmp, root)
    except OSError:
        if not _is_current(root, now):
            if old is not None and not os.path.lexists(root):
                os.rename(old, root)  # put the previous copy back rather than leave nothing
            raise
        # else another process installed a current copy first: keep theirs
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def start_live_writer(root: str | os.PathLike | None = None, *, interval_s: float = 2.0) -> threading.Thread:
    """Start (once per process per root) the daemon thread that keeps the LIVE run growing."""
    from rundash_core.demo import live

    return live.start(ensure_demo(root), interval_s)


def stop_live_writer(root: str | os.PathLike | None = None, timeout: float = 10.0) -> bool:
    """Stop the live writer of `root` and wait for it; True when one was running."""
    from rundash_core.demo import live

    return live.stop(Path(root) if root is not None else demo_root(), timeout)
