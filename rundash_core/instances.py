"""The rundash servers running on this machine, and the ports they leave free.

A launcher records each server it starts in `<cache>/instances.json` (`settings.cache_dir()`, so
`~/.cache/rundash/` or `RUNDASH_CACHE_DIR`) as `{pid, url, dirs, started}`, and removes it when the
server stops. Before starting another it asks `serving(dirs)`: a live server on the same
directories is reported (its URL) instead of started twice. Entries whose pid is no longer alive
(a server killed hard) are dropped at every read. Writes hold an `flock` on `instances.lock` and
replace the file atomically, so two launchers starting at once never lose an entry.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from . import settings

PORT_RANGE = (8501, 8520)  # Streamlit's default port and the next ones


def instances_path() -> Path:
    return settings.cache_dir() / "instances.json"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0; another user's process counts)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _locked():
    path = instances_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name("instances.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(path: Path) -> list[dict]:
    """The recorded entries; a missing or garbled file reads as none (it is only a hint)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [e for e in data if isinstance(e, dict) and isinstance(e.get("pid"), int)
            and isinstance(e.get("url"), str) and isinstance(e.get("dirs"), list)]


def _write(path: Path, entries: list[dict]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    os.replace(tmp, path)


def live() -> list[dict]:
    """The recorded servers whose pid is alive; dead entries are removed from the file."""
    with _locked() as path:
        entries = _read(path)
        alive = [e for e in entries if pid_alive(e["pid"])]
        if len(alive) != len(entries) or (entries == [] and path.exists()):
            _write(path, alive)
        return alive


def record(pid: int, url: str, dirs: list[str]) -> dict:
    """Remember a started server (replacing an older entry of the same pid)."""
    entry = {"pid": pid, "url": url, "dirs": [os.path.abspath(d) for d in dirs], "started": time.time()}
    with _locked() as path:
        entries = [e for e in _read(path) if e["pid"] != pid and pid_alive(e["pid"])]
        _write(path, [*entries, entry])
    return entry


def remove(pid: int) -> None:
    with _locked() as path:
        entries = _read(path)
        kept = [e for e in entries if e["pid"] != pid and pid_alive(e["pid"])]
        if kept != entries:
            _write(path, kept)


def _same_dirs(a: list[str], b: list[str]) -> bool:
    return sorted(map(os.path.realpath, a)) == sorted(map(os.path.realpath, b))


def serving(dirs: list[str]) -> dict | None:
    """A live rundash server already serving exactly these directories (none: the demo), if any."""
    return next((e for e in live() if _same_dirs(e["dirs"], dirs)), None)


def port_free(port: int, host: str | None = None) -> bool:
    """Whether a server could bind `port` on `host` (all interfaces when None, as Streamlit does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will (TIME_WAIT is free)
        try:
            s.bind(("" if host in (None, "0.0.0.0") else _ipv4(host), port))
        except OSError:
            return False
    return True


def _ipv4(host: str) -> str:
    return "127.0.0.1" if host == "localhost" else host


def free_port(host: str | None = None, ports: tuple[int, int] = PORT_RANGE) -> int | None:
    """The lowest free port of the range, or None when all are taken."""
    return next((p for p in range(ports[0], ports[1] + 1) if port_free(p, host)), None)
