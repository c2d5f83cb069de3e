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
import errno
import fcntl
import json
import os
import socket
import time
import urllib.parse
from pathlib import Path

from rundash_core import settings

PORT_RANGE = (8501, 8520)  # Streamlit's default port and the next ones
MAX_FILE_BYTES = 1 << 20  # a few hundred servers' entries
CLOCK_SLACK_S = 60  # a clock stepped forward since a server started does not make it look like another


def instances_path() -> Path:
    return settings.cache_dir() / "instances.json"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0; another user's process counts)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> float | None:
    """When process `pid` started (epoch s, Linux `/proc`; ~1 s precision), None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _is_recorded_server(entry: dict) -> bool:
    """Whether the entry's server is still running: its pid is alive and is the same process, not
    a later one that reused the number (a reused pid started after the entry was recorded)."""
    if not pid_alive(entry["pid"]):
        return False
    started, began = entry.get("started"), process_start(entry["pid"])
    if isinstance(started, (int, float)) and not isinstance(started, bool) and began is not None:
        return began <= started + CLOCK_SLACK_S  # the server is started just before it is recorded
    return True


@contextlib.contextmanager
def _locked():
    path = instances_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name("instances.lock"), "a")
    except OSError:  # an unwritable cache: the registry is only a hint, go on unlocked
        yield path
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(path: Path) -> list[dict]:
    """The recorded entries; a missing or garbled file reads as none (it is only a hint)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:  # not what launchers write: garbled
            return []
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [e for e in data if isinstance(e, dict) and isinstance(e.get("pid"), int)
            and not isinstance(e["pid"], bool) and isinstance(e.get("url"), str)
            and isinstance(e.get("dirs"), list) and all(isinstance(d, str) for d in e["dirs"])]


def _write(path: Path, entries: list[dict]) -> None:
    """Replace the file; when it cannot be (a directory in its place, a read-only cache) the
    registry is only a hint, so the launcher goes on without it."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def live() -> list[dict]:
    """The recorded servers whose pid is alive; dead entries are removed from the file."""
    with _locked() as path:
        entries = _read(path)
        alive = [e for e in entries if _is_recorded_server(e)]
        if len(alive) != len(entries) or (entries == [] and path.exists()):
            _write(path, alive)
        return alive


def record(pid: int, url: str, dirs: list[str]) -> dict:
    """Remember a started server (replacing an older entry of the same pid)."""
    entry = {"pid": pid, "url": url, "dirs": [os.path.abspath(d) for d in dirs], "started": time.time()}
    with _locked() as path:
        entries = [e for e in _read(path) if e["pid"] != pid and _is_recorded_server(e)]
        _write(path, [*entries, entry])
    return entry


def remove(pid: int) -> None:
    with _locked() as path:
        entries = _read(path)
        kept = [e for e in entries if e["pid"] != pid and _is_recorded_server(e)]
        if kept != entries:
            _write(path, kept)


def _same_dirs(a: list[str], b: list[str]) -> bool:
    return sorted(map(os.path.realpath, a)) == sorted(map(os.path.realpath, b))


def serving(dirs: list[str]) -> dict | None:
    """A live rundash server already serving exactly these directories (none: the demo), if any."""
    return next((e for e in live() if _same_dirs(e["dirs"], dirs)), None)


def port_free(port: int, host: str | None = None) -> bool:
    """Whether a server could bind `port` on `host`: every address it resolves to, and with no host
    (every interface, as Streamlit does) both 0.0.0.0 and :: (a server on either takes the port)."""
    try:
        addrs = ([(socket.AF_INET, ("0.0.0.0", port))] + ([(socket.AF_INET6, ("::", port))] if socket.has_ipv6 else [])
                 if host in (None, "", "0.0.0.0", "::") else
                 [(fam, addr[:2]) for fam, *_, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)])
    except (OSError, UnicodeError):
        return False
    return all(_bindable(family, addr) for family, addr in addrs)


def _bindable(family: int, addr: tuple) -> bool:
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return True  # no IPv6 on this machine: nothing can hold the port there
    with s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will (TIME_WAIT is free)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # the IPv4 side is checked on its own
        try:
            s.bind(addr)
        except OSError as e:
            return family == socket.AF_INET6 and e.errno == errno.EADDRNOTAVAIL  # IPv6 disabled
    return True


def free_port(host: str | None = None, ports: tuple[int, int] = PORT_RANGE) -> int | None:
    """The lowest free port of the range, or None when all are taken. A port a recorded server
    holds is skipped even before that server has bound it (two launchers starting at once)."""
    held = set(map(_port_of, live()))
    return next((p for p in range(ports[0], ports[1] + 1) if p not in held and port_free(p, host)), None)


def _port_of(entry: dict) -> int | None:
    try:
        return urllib.parse.urlsplit(entry["url"]).port
    except ValueError:
        return None
