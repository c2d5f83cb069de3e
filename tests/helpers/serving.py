"""Real servers and processes for the tests: a free port, the launcher (`rundash ARGS`) until it
serves, a process group stopped the way a user stops it, a child that runs as another uid.

One copy of each, so every test that starts a server stops it the same way (Ctrl-C on the group,
SIGKILL only when that does not end it) and leaves no process behind."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, *, grace: float = 20, sig: int = signal.SIGINT) -> None:
    """Stop the process group `proc` leads (started with `start_new_session=True`): `sig` (Ctrl-C
    by default) to the group, SIGKILL when it has not ended within `grace` seconds (`grace=0`:
    SIGKILL at once); an already gone group is fine."""
    try:
        if grace > 0:
            os.killpg(proc.pid, sig)
            try:
                proc.wait(grace)
                return
            except subprocess.TimeoutExpired:
                pass
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def launcher_env(cache: Path) -> dict:
    """The environment a launcher under test gets: its own cache, no inherited directories or roots."""
    env = {**os.environ, "RUNDASH_CACHE_DIR": str(cache)}
    for k in ("RUNDASH_DIRS", "RUNDASH_ROOTS"):
        env.pop(k, None)
    return env


@contextlib.contextmanager
def launched_rundash(base: Path, args: list[str], *, cwd: Path | None = None):
    """`rundash ARGS` (the launcher, its own process group, caches under `base`) until it says it is
    serving; yields (port, log path); stopped with Ctrl-C on the group (SIGKILL after 20 s)."""
    port = free_port()
    log_path = base / f"launcher-{port}.log"
    log = log_path.open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "rundash_core.serve.cli", *args, "--port", str(port)], cwd=cwd,
                            env=launcher_env(base / "cache"), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 90
        while "rundash is serving at" not in log_path.read_text():
            assert proc.poll() is None and time.time() < deadline, log_path.read_text()
            time.sleep(0.3)
        yield port, log_path
    finally:
        stop_group(proc)
        log.close()


def launch_plan(argv: list[str], cwd: str | None = None):
    """The launcher's plan for `rundash ARGV` (command, environment, port), nothing started."""
    from rundash_core.serve import launch

    return launch.make_plan(launch.build_parser().parse_args(argv), cwd=cwd)


def in_child_as(uid: int, work):
    """`work()` (answering something JSON-able) run in a forked child that dropped to uid and gid
    `uid` (as root, mode 000 files are readable; as that uid they are not); the child ends with
    os._exit, no pytest teardown. Needs root."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(rfd)
            os.setgid(uid)
            os.setuid(uid)
            os.write(wfd, json.dumps(work()).encode())
        except BaseException:  # noqa: BLE001 - the parent fails the test
            code = 1
        os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0 and data, f"the child running as uid {uid} failed"
    return json.loads(data)
