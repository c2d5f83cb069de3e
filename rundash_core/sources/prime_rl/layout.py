"""Which folders are prime-rl runs, and their attempts (`configs/attempt_N`, `logs/attempt_N`,
the `latest` link or, in a copied tree, the file naming it): the layout the reader lists.
"""
from __future__ import annotations

import os
import re
import stat

from rundash_core.io.files import inside_roots, read_range

MARKERS = ("configs", "logs", "monitors", "traces.jsonl")
ATTEMPT = re.compile(r"^attempt_(\d+)$")
_PRIME_LOGS = ("latest", "trainer.log", "orchestrator.log", "inference.log", "eval.log", "evals.log")


def is_run_dir(path: str) -> bool:
    """A non-hidden directory holding one of configs/, logs/, monitors/, traces.jsonl (spec 6).

    A `logs/` folder counts only when it looks like prime-rl's (attempts, `latest`, or the
    trainer/orchestrator logs): a verl or SWE-Lego-RL workdir also has a `logs/` of `<exp>.log`."""
    if os.path.basename(path.rstrip(os.sep)).startswith("."):
        return False
    if any(os.path.lexists(os.path.join(path, m)) for m in MARKERS if m != "logs"):
        return True
    logs = os.path.join(path, "logs")
    if not inside_roots(logs):  # a logs/ linking out of the allowed roots is not listed
        return False
    names = listdir_or_empty(logs)
    return any(n in _PRIME_LOGS or ATTEMPT.match(n) for n in names) or (
        os.path.isdir(logs) and not names)  # an empty logs/ tree: a run that is just starting


def attempt_numbers(folder: str) -> list[int]:
    """The N of the `attempt_N` folders (a stray file named so is no attempt)."""
    try:
        with os.scandir(folder) as it:
            return sorted(int(m.group(1)) for e in it if (m := ATTEMPT.match(e.name)) and _is_dir(e))
    except OSError:
        return []


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def latest_attempt(folder: str) -> int | None:
    """Resolve `<folder>/latest`: a symlink, or (copied without links) a file naming the target."""
    link = os.path.join(folder, "latest")
    try:
        target = os.path.basename(os.readlink(link).rstrip("/"))
    except OSError:  # not a link (or not there): a copied tree keeps the name in a file
        try:
            target = read_range(link, 0, 256).decode("utf-8", "replace").strip()
        except OSError:
            target = None
    m = ATTEMPT.match(target or "")
    if m and os.path.isdir(os.path.join(folder, m.group(0))):
        return int(m.group(1))
    numbers = attempt_numbers(folder)
    return numbers[-1] if numbers else None


def unlistable(folder: str) -> str | None:
    """Why an existing folder cannot be listed (e.g. "permission denied"), or None."""
    if not os.path.isdir(folder):
        return None
    try:
        with os.scandir(folder):
            return None
    except OSError as e:
        return (e.strerror or type(e).__name__).lower()


def listdir_or_empty(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def stamp(path: str) -> tuple | None:
    """(kind, mtime, size, inode) of a path from one stat; None when it is not there."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (stat.S_IFMT(st.st_mode), st.st_mtime, st.st_size, st.st_ino)
