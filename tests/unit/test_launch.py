"""`rundash` for real: a guided start serves the folder it found, reports its URL and the SSH
forward, is found by a second launch instead of started twice, stops cleanly on Ctrl-C; a dir
with no runs is diagnosed with the folders that do hold runs."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from rundash_core.serve import instances

from helpers import NEW_RUN, copy_run
from helpers.serving import free_port, launcher_env, stop_group


class Launcher:
    """`python -m rundash_core.serve.cli ARGS` in `cwd`, its output collected line by line."""

    def __init__(self, args: list[str], cwd: Path, cache: Path, stdin: str = ""):
        self.proc = subprocess.Popen([sys.executable, "-m", "rundash_core.serve.cli", *args], cwd=cwd, env=launcher_env(cache),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.proc.stdin.write(stdin)
        self.proc.stdin.close()
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, needle: str, timeout: float = 90) -> str:
        deadline = time.time() + timeout
        while needle not in self.text:
            assert time.time() < deadline, f"no {needle!r} in:\n{self.text}"
            assert self.proc.poll() is None or needle in self.text, f"exited {self.proc.returncode}:\n{self.text}"
            time.sleep(0.2)
        return self.text

    def kill(self):
        stop_group(self.proc, grace=0)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_guided_start_serves_reports_and_stops_cleanly(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    copy_run(NEW_RUN, work / "outputs")
    port = free_port()
    first = Launcher(["--port", str(port), "--host", "127.0.0.1"], work, cache, stdin="y\n")
    try:
        text = first.wait_for("rundash is serving at")
        url = f"http://127.0.0.1:{port}/"
        assert text.index(str(work / "outputs")) < text.index("Proceed?") < text.index("rundash is serving")
        first.wait_for(f"ssh -N -L {port}:127.0.0.1:{port} ")  # the tunnel ends at the bound address
        assert urllib.request.urlopen(url + "_stcore/health", timeout=5).read() == b"ok"
        [server] = _children(first.proc.pid)  # a child process, not an exec
        [entry] = json.loads((cache / "instances.json").read_text())
        assert entry["pid"] == server and entry["url"] == url and entry["dirs"] == [str(work / "outputs")]
        assert "no runs found" not in first.text

        again = Launcher(["--yes"], work, cache)  # the same folder again: reported, not started
        assert again.proc.wait(60) == 0
        time.sleep(0.3)
        assert f"already serving {work / 'outputs'} at {url}" in again.text and "Proceed?" not in again.text

        os.kill(first.proc.pid, signal.SIGINT)  # Ctrl-C
        assert first.proc.wait(30) is not None
        first.wait_for("rundash stopped", 5)
        deadline = time.time() + 10
        while instances.pid_alive(server) and time.time() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{server}").exists() or "zombie" in Path(f"/proc/{server}/status").read_text()
        assert json.loads((cache / "instances.json").read_text()) == []
        with pytest.raises(OSError):
            urllib.request.urlopen(url + "_stcore/health", timeout=2)
    finally:
        first.kill()


def test_an_empty_dir_is_diagnosed_with_the_folders_holding_runs(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    copy_run(NEW_RUN, work / "outputs")
    (work / "logs").mkdir()
    launcher = Launcher([str(work / "logs"), "--port", str(free_port()), "--host", "127.0.0.1"], work, cache)
    try:
        text = launcher.wait_for("runs were found in")
        assert f"no runs found in {work / 'logs'}" in text
        launcher.wait_for(f"{work / 'outputs'}  (1 run")
        assert "Proceed?" not in text  # a DIR given: no question
    finally:
        launcher.kill()


def _port_free(port: int) -> bool:
    with socket.socket() as s:  # as a new server binds it (SO_REUSEADDR: TIME_WAIT leftovers do not count)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_sigint_to_the_launcher_pid_alone_stops_it_and_its_server(tmp_path):
    """`kill -INT <pid of rundash>` (not the group) from a script whose `&` started the launcher
    with SIGINT ignored: the launcher and its server exit within seconds and the port is free."""
    runs, cache = tmp_path / "outputs", tmp_path / "cache"
    copy_run(NEW_RUN, runs)
    port = free_port()
    rundash = str(Path(sys.executable).with_name("rundash"))
    proc = subprocess.Popen([rundash, str(runs), "--port", str(port), "--host", "127.0.0.1"], env=launcher_env(cache), cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    try:
        deadline = time.time() + 90
        while not any("rundash is serving" in line for line in lines):
            assert time.time() < deadline and proc.poll() is None, "".join(lines)
            time.sleep(0.2)
        [server] = _children(proc.pid)
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)  # the launcher's pid only
        assert proc.wait(10) == 0
        while instances.pid_alive(server) and time.monotonic() - t0 < 10:
            time.sleep(0.1)
        assert time.monotonic() - t0 < 10, "the server outlived the launcher"
        assert not Path(f"/proc/{server}").exists() or "zombie" in Path(f"/proc/{server}/status").read_text()
        assert _port_free(port)
        time.sleep(0.3)
        assert any("rundash stopped" in line for line in lines)
    finally:
        stop_group(proc, grace=0)
