"""`rundash [DIR ...] [--port P] [--host H] [--base-path /prefix] [--roots R ...] [--yes]`: start the
dashboard on directories, on the folder a guided start finds, or on the built-in demo (bound to
127.0.0.1 unless --host says otherwise).

The server is Streamlit running app.py as a child process: the launcher waits for it to answer
its health check, prints the local URL and the SSH port-forward command, says so when the
directories hold no runs, and on Ctrl-C stops it and forgets it (`instances`).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import getpass
import os
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from rundash_core import settings
from rundash_core.io.files import env_roots, is_within
from rundash_core.safety.importer import max_bytes
from rundash_core.serve import guided, instances

HEALTH_TIMEOUT_S = 60
DEFAULT_HOST = "127.0.0.1"  # run data stays private until someone chooses --host 0.0.0.0
USAGE = ("%(prog)s [DIR ...] [--port P] [--host H] [--base-path /prefix] [--roots R ...] [--yes]\n"
         "       %(prog)s {status,check-in,tui} ...")
DESCRIPTION = ("Start the dashboard on the runs under DIRs (no DIR: the folder a guided start finds, or the\n"
               "built-in demo), or run one of the commands listed below.")
ANY_HOST = (None, "", "0.0.0.0", "::")  # every interface: reached as localhost from this machine


def app_path() -> Path:
    """The dashboard's app.py: next to the package in a checkout (`pip install -e .`), else in
    <prefix>/share/rundash where a wheel install puts it (pyproject's data-files)."""
    user = sysconfig.get_path("data", sysconfig.get_preferred_scheme("user"))  # pip install --user
    candidates = [Path(__file__).resolve().parents[2] / "app.py"]
    for data in (sysconfig.get_path("data"), sys.prefix, user):
        candidates.append(Path(data) / "share" / "rundash" / "app.py")
    for path in candidates:
        if path.is_file() and (path.parent / "pages" / "_ui.py").is_file():  # not some other app.py
            return path
    raise SystemExit("rundash: cannot find app.py; looked in:\n  " + "\n  ".join(map(str, candidates)))


@dataclass
class Plan:
    """What the launcher is about to start."""

    dirs: list[str]  # empty: the built-in demo
    port: int
    host: str | None = None
    base_path: str = ""  # "" or "/prefix"
    roots: list[str] = field(default_factory=list)  # empty: the dirs (the server's default)
    ranked: list[guided.FolderCandidate] = field(default_factory=list)  # what a guided start found

    @property
    def local_url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}{self.base_path}/"

    def command(self, app: Path) -> list[str]:
        """`python -m streamlit run app.py` (served through its ASGI app, deep links fixed) with the
        server options and the dirs after `--`."""
        cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(self.port),
               "--server.headless", "true", "--server.maxUploadSize", str(max(1, max_bytes() >> 20))]  # Import page
        if self.host:
            cmd += ["--server.address", self.host]
        if self.base_path:
            cmd += ["--server.baseUrlPath", self.base_path.strip("/")]
        return [*cmd, "--", *self.dirs]

    def environment(self, environ: dict | None = None) -> dict:
        """The server's environment: the roots in RUNDASH_ROOTS (the dirs travel as arguments)."""
        env = dict(os.environ if environ is None else environ)
        env.pop("RUNDASH_DIRS", None)
        if self.roots:
            env["RUNDASH_ROOTS"] = os.pathsep.join(self.roots)
        return env

    def describe(self) -> str:
        lines = ["rundash plan"]
        if self.dirs:
            counts = {c.path: c.describe() for c in self.ranked}
            for d in self.dirs:
                lines.append(f"  dir     {d}" + (f"  ({counts[d]})" if d in counts else ""))
        else:
            lines.append("  dir     the built-in demo (no runs found under the current folder)")
        for c in self.ranked:
            if c.path not in self.dirs:
                lines.append(f"  also    {c.path}  ({c.describe()})")
        if self.roots:
            lines.append(f"  roots   {', '.join(self.roots)}")
        lines.append(f"  port    {self.port}")
        lines.append(f"  url     {self.local_url}")
        return "\n".join(lines)


def url_host(host: str | None) -> str:
    """`host` as a URL (and `ssh -L`) writes it: localhost for every interface, IPv6 in brackets."""
    host = "localhost" if host in ANY_HOST else host
    return f"[{host}]" if ":" in host else host


def parse_base_path(raw: str | None) -> str:
    """'/prefix' (no trailing slash) or '' for none; refuses what is not a plain URL path."""
    if not raw or raw.strip("/") == "":
        return ""
    path = "/" + raw.strip("/")
    if any(part in ("", ".", "..") for part in path[1:].split("/")) or not re.fullmatch(r"[A-Za-z0-9._~/-]+", path):
        raise ValueError(f"--base-path {raw!r}: use a plain path like /rundash")
    return path


def build_parser() -> argparse.ArgumentParser:
    from rundash_core.serve.cli import verbs_help

    parser = argparse.ArgumentParser(prog="rundash", usage=USAGE, description=DESCRIPTION, epilog=verbs_help(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="*", help="output directories holding runs (default: a guided start)")
    parser.add_argument("--port", type=int, default=None, help="port (default: the lowest free in 8501-8520)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to bind (default: {DEFAULT_HOST}, this machine only; 0.0.0.0 for every interface)")
    parser.add_argument("--base-path", default=None, help="URL prefix behind a reverse proxy, e.g. /rundash")
    parser.add_argument("--roots", nargs="+", default=None, metavar="R",
                        help="allowed roots: only paths under them can be read or added (default: the dirs)")
    parser.add_argument("--yes", "-y", action="store_true", help="start without asking (guided start)")
    return parser


def make_plan(args: argparse.Namespace, *, cwd: str | None = None) -> Plan:
    """The plan for parsed arguments; raises ValueError with the message for the user."""
    source = "--roots" if args.roots else "RUNDASH_ROOTS"
    raw_roots = args.roots or env_roots()
    roots = [os.path.abspath(os.path.expanduser(r)) for r in raw_roots]  # the server runs elsewhere: absolute
    if any(not r.strip() for r in raw_roots):
        raise ValueError(f"{source}: an empty path (it would mean the current folder)")
    for r in roots:
        if not os.path.isdir(r):
            raise ValueError(f"{source} {r}: no such directory")
    dirs = [os.path.abspath(os.path.expanduser(d)) for d in args.dirs]
    if not dirs:
        dirs = settings.startup_dirs([], os.environ)
    ranked: list[guided.FolderCandidate] = []
    if not dirs:
        ranked = [c for c in guided.candidates(cwd) if not roots or is_within(c.path, roots)]
        dirs = [ranked[0].path] if ranked else []
    for d in dirs:
        if not os.path.isdir(d) and not os.path.isfile(d):
            raise ValueError(f"{d}: no such directory")
        if roots and not is_within(d, roots):
            raise ValueError(f"{d} is outside the allowed roots ({', '.join(roots)})")
    base_path = parse_base_path(args.base_path)
    if args.host:
        try:
            socket.getaddrinfo(args.host, None)
        except (OSError, UnicodeError):
            raise ValueError(f"--host {args.host}: not a known address") from None
    if args.port is not None:
        if not 0 < args.port < 65536:
            raise ValueError(f"--port {args.port}: not a port number")
        if not instances.port_free(args.port, args.host):
            raise ValueError(f"port {args.port} is taken")
        port = args.port
    else:
        port = instances.free_port(args.host)
        if port is None:
            raise ValueError("no free port in 8501-8520; pass --port")
    return Plan(dirs=dirs, port=port, host=args.host, base_path=base_path, roots=roots, ranked=ranked)


def confirm(ask=input) -> bool | None:
    """The user's answer to "Proceed?": yes (enter, y) or no; None when there is no answer."""
    try:
        answer = ask("Proceed? [Y/n] ")
    except EOFError:
        print("\nrundash: no answer (not a terminal?); pass --yes to start without asking", file=sys.stderr)
        return None
    return answer.strip().lower() in ("", "y", "yes")


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = HEALTH_TIMEOUT_S) -> bool:
    """Poll `<url>_stcore/health` until it answers "ok" (True), the server exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def forward_command(port: int, host: str | None = DEFAULT_HOST) -> str:
    """What to run on a laptop to reach a server on this (remote) machine: the tunnel ends at the
    address the server binds (a user with no name, as in a container run with a bare uid, is left
    for ssh to choose)."""
    try:
        user = getpass.getuser() + "@"
    except (KeyError, OSError, ImportError):
        user = ""
    return f"ssh -N -L {port}:{url_host(host)}:{port} {user}{socket.getfqdn()}"


def empty_board(plan: Plan, *, cwd: str | None = None) -> list[str]:
    """Lines explaining an empty board: each dir with no runs, and where runs were found instead."""
    if not plan.dirs:
        return []
    from rundash_core.discover import scan

    empty = [d for d in plan.dirs if len(scan([d])[0]) == 0]
    if not empty:
        return []
    lines = [f"rundash: no runs found in {d}" for d in empty]
    others = [c for c in guided.candidates(cwd) if c.path not in plan.dirs]
    if others:
        lines.append("  runs were found in:")
        lines += [f"    {c.path}  ({c.describe()})" for c in others[:5]]
    else:
        lines.append("  and none under the current folder either; check the path (rundash DIR)")
    return lines


def serve(plan: Plan) -> int:
    """Start the server, report it once it answers, wait for it; Ctrl-C stops it cleanly."""
    app = app_path()
    # SIGINT and SIGTERM to the launcher's pid alone stop the server too (CLI only). SIGINT is set
    # explicitly: a launcher started from a script's `&` inherits it ignored, and so would its
    # server; with a handler here, the server execs with the default (handlers reset on exec).
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc = subprocess.Popen(plan.command(app), cwd=app.parent, env=plan.environment(),  # .streamlit/config.toml
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    except BaseException:
        _restore(previous)
        raise
    echo = _Echo(proc)
    instances.record(proc.pid, plan.local_url, plan.dirs)
    try:
        if wait_healthy(plan.local_url, proc):
            print(f"\nrundash is serving at {plan.local_url}", flush=True)
            print(f"  from another machine: {forward_command(plan.port, plan.host)}", flush=True)
            print(f"  then open http://localhost:{plan.port}{plan.base_path}/", flush=True)
            for line in empty_board(plan):
                print(line, flush=True)
        elif proc.poll() is None:
            print(f"rundash: the server does not answer at {plan.local_url} yet", file=sys.stderr, flush=True)
        else:
            return echo.died()
        return proc.wait()
    except KeyboardInterrupt:
        return stop(proc)
    except BaseException:
        stop(proc)  # the launcher fails: its server does not live on unrecorded
        raise
    finally:
        instances.remove(proc.pid)
        _restore(previous)  # a caller's own handlers are back once the server is gone


class _Echo:
    """Passes the server's output through to ours, keeping its last lines to explain a failed start."""

    def __init__(self, proc: subprocess.Popen, keep: int = 20):
        self.proc, self.tail = proc, collections.deque(maxlen=keep)
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.tail.append(line.rstrip("\n"))
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.write(line)
                sys.stdout.flush()

    def died(self) -> int:
        """Say that the server stopped before it answered, with its last lines; an exit code != 0."""
        code = self.proc.wait()
        self.thread.join(timeout=5)
        print(f"rundash: the server stopped before it answered (exit code {code}); its last lines:",
              file=sys.stderr, flush=True)
        for line in list(self.tail) or ["(no output)"]:
            print(f"  {line}", file=sys.stderr, flush=True)
        return code or 1


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _restore(saved: dict) -> None:
    for sig, handler in saved.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def stop(proc: subprocess.Popen, timeout: float = 6) -> int:
    """Stop the server: SIGINT (as a terminal's Ctrl-C), then SIGKILL if it lingers. A second
    Ctrl-C or `kill` meanwhile is ignored: it would leave the server running but forgotten."""
    saved = {}
    with contextlib.suppress(ValueError):  # not the main thread: signals are not ours to set
        saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        _restore(saved)  # the caller's handlers are back once the server is gone
    print("rundash stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        plan = make_plan(args)
    except ValueError as e:
        parser.error(str(e))
    running = instances.serving(plan.dirs)
    if running is not None:
        print(f"rundash is already serving {', '.join(plan.dirs) or 'the demo'} at {running['url']} "
              f"(pid {running['pid']})")
        return 0
    print(plan.describe(), flush=True)
    if not args.dirs and not args.yes:
        answer = confirm()
        if answer is None:  # no terminal to ask: a failed start
            return 1
        if not answer:  # the user said no: done, not failed
            print("rundash: nothing was started", flush=True)
            return 0
    if args.port is None and not instances.port_free(plan.port, plan.host):  # taken while we asked
        plan.port = instances.free_port(plan.host) or plan.port
        print(f"  port    {plan.port} (the first choice was taken meanwhile)", flush=True)
    return serve(plan)


if __name__ == "__main__":
    raise SystemExit(main())
