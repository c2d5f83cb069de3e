"""The launcher's parts one at a time (`serve/launch.py`, `serve/instances.py`): the instances
file garbled or written by launchers at once, a reused pid, ports (taken, not bound yet, IPv6),
hosts, base paths, roots from the environment, a server dying at start, SIGTERM. The whole
`rundash` command is test_launch.py."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rundash_core.serve import instances, launch

from helpers import NEW_RUN, copy_run
from helpers.serving import free_port, in_child_as, launch_plan, stop_group


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RUNDASH_DIRS", raising=False)
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)


def _ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


# Launcher -------------------------------------------------------------------------------------
def test_a_garbled_instances_file_or_a_directory_in_its_place_never_stops_a_launch(tmp_path):
    out = str(copy_run(NEW_RUN, tmp_path / "outputs").parent)
    path = instances.instances_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([{"pid": os.getpid(), "url": "u", "dirs": [1, 2]},  # not paths
                                {"pid": True, "url": "http://localhost:8519/", "dirs": []}]))  # pid 1
    assert instances.serving([out]) is None and instances.serving([]) is None
    assert instances.live() == []
    path.unlink()
    path.mkdir()  # a directory where the file should be
    assert instances.live() == [] and instances.serving([out]) is None
    instances.record(os.getpid(), "http://localhost:8518/", [out])
    instances.remove(os.getpid())
    assert launch_plan([out]).port is not None
    assert sorted(p.name for p in path.parent.iterdir()) == ["instances.json", "instances.lock"]  # no tmp left


def test_launchers_recording_at_once_lose_no_entry(tmp_path):
    code = ("import os, sys; from rundash_core.serve import instances; "
            "instances.record(os.getpid(), f'http://localhost:{os.getpid()}/', ['/d']); sys.stdin.read()")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, env=os.environ.copy())
             for _ in range(6)]
    try:
        deadline = time.time() + 60
        while len(instances.live()) < len(procs) and time.time() < deadline:
            time.sleep(0.2)
        assert sorted(e["pid"] for e in instances.live()) == sorted(p.pid for p in procs)
    finally:
        for p in procs:
            p.stdin.close()
            p.wait()
    assert instances.live() == []  # gone with their processes


def test_a_dead_servers_pid_reused_by_another_process_is_not_reported(tmp_path):
    out = str(tmp_path)
    other = subprocess.Popen(["sleep", "60"])  # not rundash: it took the number of a server that died
    try:
        path = instances.instances_path()
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps([{"pid": other.pid, "url": "http://localhost:8517/", "dirs": [out],
                                     "started": time.time() - 3600}]))
        assert instances.serving([out]) is None
        assert json.loads(path.read_text()) == []
        instances.record(other.pid, "http://localhost:8517/", [out])  # recorded as it starts: its own
        assert instances.serving([out])["pid"] == other.pid
    finally:
        other.kill()
        other.wait()


def test_a_port_a_recorded_server_has_not_bound_yet_is_not_chosen_again():
    port = free_port()
    assert instances.free_port(ports=(port, port)) == port
    instances.record(os.getpid(), f"http://localhost:{port}/", ["/somewhere"])  # starting, not bound yet
    assert instances.free_port(ports=(port, port)) is None


@pytest.mark.skipif(not _ipv6(), reason="no IPv6 on this machine")
def test_ports_and_urls_on_ipv6():
    port = free_port()
    with socket.socket(socket.AF_INET6) as s:  # a server on [::] only takes the port for Streamlit too
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::", port))
        s.listen()
        assert not instances.port_free(port) and instances.free_port(ports=(port, port)) is None
        assert instances.port_free(port, "127.0.0.1")
    plan = launch_plan(["--host", "::1", "--yes"], cwd="/nonexistent")
    assert 8501 <= plan.port <= 8520 and plan.local_url == f"http://[::1]:{plan.port}/"


@pytest.mark.xdist_group("default-ports")  # holds or checks 8501-8520: one worker runs these one after another
def test_a_port_taken_while_the_guided_start_asks_is_chosen_again(tmp_path, monkeypatch, capsys):
    copy_run(NEW_RUN, tmp_path / "outputs")
    monkeypatch.chdir(tmp_path)
    started, held = [], socket.socket()

    def answer(prompt):  # meanwhile someone else starts a server on the planned port
        held.bind(("0.0.0.0", instances.free_port()))
        held.listen()
        return "y"

    real_confirm = launch.confirm
    monkeypatch.setattr(launch, "confirm", lambda: real_confirm(answer))  # the question, answered by `answer`
    monkeypatch.setattr(launch, "serve", lambda plan: started.append(plan.port) or 0)
    with held:
        assert launch.main([]) == 0
        assert started and started[0] != held.getsockname()[1] and instances.port_free(started[0])
    assert "taken meanwhile" in capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to switch to a uid without a name")
def test_the_forward_command_for_a_user_without_a_name():
    import encodings.idna  # noqa: F401 - loaded before the switch (the interpreter's files may not be
    import pwd  # noqa: F401 - readable by that uid)

    def forward_command() -> str:  # in a container's bare uid: no passwd entry, no USER
        for k in ("USER", "LOGNAME", "LNAME", "USERNAME"):
            os.environ.pop(k, None)
        return launch.forward_command(8501)

    text = in_child_as(54321, forward_command)
    assert text.startswith("ssh -N -L 8501:127.0.0.1:8501 "), text  # the default host


def test_an_unknown_host_is_named_not_blamed_on_the_ports():
    with pytest.raises(ValueError, match="--host no-such-host.invalid"):
        launch_plan(["--host", "no-such-host.invalid", "--yes"], cwd="/nonexistent")


def test_base_path_forms():
    assert [launch.parse_base_path(p) for p in ("x", "/x/", "//x", "/a/b/")] == ["/x", "/x", "/x", "/a/b"]
    for bad in ("/a\nb", "/a\tb", "/a<b>", '/a"b', "/x/../y", "a//b", "/ a"):
        with pytest.raises(ValueError):
            launch.parse_base_path(bad)


def test_rundash_roots_from_the_environment_are_enforced_and_passed_on_absolute(tmp_path, monkeypatch):
    (tmp_path / "data" / "runs").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNDASH_ROOTS", os.pathsep.join(["", "data", " "]))  # relative, empty entries
    plan = launch_plan([str(tmp_path / "data" / "runs")])
    assert plan.roots == [str(tmp_path / "data")]
    assert plan.environment()["RUNDASH_ROOTS"] == str(tmp_path / "data")  # the server runs in app.py's folder
    with pytest.raises(ValueError, match="outside the allowed roots"):
        launch_plan([str(tmp_path / "elsewhere")])
    with pytest.raises(ValueError, match="empty path"):
        launch_plan([str(tmp_path / "data" / "runs"), "--roots", ""])  # not silently the current folder
    monkeypatch.setenv("RUNDASH_ROOTS", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="RUNDASH_ROOTS .*missing: no such directory"):
        launch_plan([str(tmp_path / "data" / "runs")])


def test_a_server_that_dies_at_start_says_so_with_its_last_lines(tmp_path, capsys):
    out = copy_run(NEW_RUN, tmp_path / "outputs").parent
    plan = launch_plan([str(out), "--host", "127.0.0.1", "--port", str(free_port())])
    with socket.socket() as s:  # taken after the plan was made: Streamlit cannot bind it
        s.bind(("127.0.0.1", plan.port))
        s.listen()
        code = launch.serve(plan)
    err = capsys.readouterr().err
    assert code != 0
    assert "the server stopped before it answered" in err and f"Port {plan.port} is not available" in err
    assert instances.live() == []


def test_sigterm_stops_the_server_and_leaves_no_instance_entry(tmp_path):
    out, cache = copy_run(NEW_RUN, tmp_path / "outputs").parent, tmp_path / "cache"
    env = {**os.environ, "RUNDASH_CACHE_DIR": str(cache)}
    proc = subprocess.Popen([sys.executable, "-m", "rundash_core.serve.cli", str(out), "--host", "127.0.0.1",
                             "--port", str(free_port())], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 90
        for line in proc.stdout:
            if "rundash is serving" in line or time.time() > deadline:
                break
        [entry] = json.loads((cache / "instances.json").read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert json.loads((cache / "instances.json").read_text()) == []
        deadline = time.time() + 10
        while instances.pid_alive(entry["pid"]) and time.time() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{entry['pid']}").exists() or "zombie" in Path(f"/proc/{entry['pid']}/status").read_text()
    finally:
        stop_group(proc, grace=0)
