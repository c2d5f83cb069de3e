"""`rundash [DIR ...]`: the plan (Streamlit command, environment, port), the roots and the
instances file, all without starting a server (see test_launch.py for real starts)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rundash_core.serve import cli, guided, instances, launch

from helpers import DATA, NEW_RUN, OLD_RUN, copy_run
from helpers.serving import free_port, launch_plan, stop_group


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RUNDASH_DIRS", raising=False)
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)


@pytest.fixture
def no_start(monkeypatch):
    """Fail the test if the launcher gets as far as starting a server."""
    monkeypatch.setattr(launch, "serve", lambda plan: pytest.fail(f"must not start: {plan}"))


def test_plan_runs_streamlit_on_app_py_with_every_setting(tmp_path):
    root = tmp_path / "team"
    out = copy_run(NEW_RUN, root / "outputs").parent
    port = free_port()
    plan = launch_plan([str(out), "--port", str(port), "--host", "127.0.0.1", "--base-path", "/rd/", "--roots", str(root)])
    cmd = plan.command(launch.app_path())
    assert cmd[:5] == [sys.executable, "-m", "streamlit", "run", str(launch.app_path())]
    assert Path(cmd[4]).is_file()  # app.py served with the deep-link fix (test_browser_deep_links)
    assert cmd[cmd.index("--server.port") + 1] == str(port)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.baseUrlPath") + 1] == "rd"
    assert cmd[cmd.index("--server.maxUploadSize") + 1] == "512"  # the import cap (RUNDASH_IMPORT_MAX_MB)
    assert cmd[cmd.index("--") + 1:] == [str(out)]
    env = plan.environment({"RUNDASH_DIRS": "/elsewhere", "HOME": "/h"})
    assert env["RUNDASH_ROOTS"] == str(root) and "RUNDASH_DIRS" not in env and env["HOME"] == "/h"
    assert plan.local_url == f"http://127.0.0.1:{port}/rd/"
    text = plan.describe()
    assert str(out) in text and str(port) in text and plan.local_url in text


def test_base_path_must_be_a_plain_url_path():
    assert launch.parse_base_path("rd") == "/rd" and launch.parse_base_path("/a/b/") == "/a/b"
    assert launch.parse_base_path("/") == "" and launch.parse_base_path(None) == ""
    for bad in ("/../x", "/a/%2e%2e", "/a?b", "/a b"):
        with pytest.raises(ValueError):
            launch.parse_base_path(bad)


def test_cli_rejects_a_missing_directory(no_start, tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main([str(tmp_path / "nope")])
    assert "no such directory" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink", "encoded"])
def test_cli_refuses_a_dir_outside_the_roots(no_start, tmp_path, capsys, how):
    root, outside = tmp_path / "root", tmp_path / "outside"
    copy_run(NEW_RUN, outside)
    root.mkdir()
    (root / "%2e%2e%2foutside").mkdir()  # a folder literally named so: inside, but holding nothing
    os.symlink(outside, root / "link")
    target = {"absolute": str(outside), "dotdot": f"{root}/../outside", "symlink": str(root / "link"),
              "encoded": f"{root}/%2e%2e%2f..%2foutside"}[how]
    with pytest.raises(SystemExit):
        cli.main([target, "--roots", str(root), "--port", str(free_port())])
    err = capsys.readouterr().err
    assert "outside the allowed roots" in err or "no such directory" in err
    assert str(root) in err or how == "encoded"


def test_a_dir_inside_the_roots_is_accepted(tmp_path):
    root = tmp_path / "root"
    run = copy_run(NEW_RUN, root / "outputs")
    plan = launch_plan([str(run.parent), "--roots", str(root), "--port", str(free_port())])
    assert plan.dirs == [str(run.parent)] and plan.roots == [str(root)]


@pytest.mark.xdist_group("default-ports")  # holds or checks 8501-8520: one worker runs these one after another
def test_a_taken_port_is_refused_and_the_next_free_one_chosen(tmp_path, no_start, capsys):
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert not instances.port_free(port)
        with pytest.raises(SystemExit):
            cli.main([str(tmp_path), "--port", str(port)])
        assert f"port {port} is taken" in capsys.readouterr().err
        chosen = instances.free_port(None, (port, port + 50))
        assert chosen is not None and chosen != port and instances.port_free(chosen)
    default = launch_plan([str(tmp_path)])
    assert 8501 <= default.port <= 8520 and instances.port_free(default.port)
    assert all(not instances.port_free(p) for p in range(8501, default.port))  # the lowest free one


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_instances_file_records_finds_and_cleans(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    dead = _dead_pid()
    instances.record(dead, "http://localhost:8599/", [a])
    instances.record(os.getpid(), "http://localhost:8502/", [b, a])
    path = instances.instances_path()
    assert path.parent == tmp_path / "cache"
    found = instances.serving([a, b])  # the same dirs, in any order
    assert found["url"] == "http://localhost:8502/" and found["pid"] == os.getpid()
    assert set(found) == {"pid", "url", "dirs", "started"}
    assert instances.serving([a]) is None  # the dead pid's entry is gone
    assert [e["pid"] for e in instances.live()] == [os.getpid()]
    assert dead not in [e["pid"] for e in json.loads(path.read_text())]
    instances.remove(os.getpid())
    assert instances.live() == []


def test_cli_reports_a_live_instance_instead_of_starting_twice(tmp_path, no_start, capsys):
    out = copy_run(NEW_RUN, tmp_path / "outputs").parent
    instances.record(os.getpid(), "http://localhost:8517/", [str(out)])  # this process stands in for a server
    assert cli.main([str(out)]) == 0
    out_text = capsys.readouterr().out
    assert "already serving" in out_text and "http://localhost:8517/" in out_text


def test_guided_start_ranks_folders_by_their_runs(tmp_path):
    copy_run(NEW_RUN, tmp_path / "outputs")
    copy_run(OLD_RUN, tmp_path / "outputs")
    (tmp_path / "logs").mkdir()
    shutil.copy(DATA / "verl" / "dq_math.log", tmp_path / "logs" / "dq_math.log")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("nothing here")
    ranked = guided.candidates(str(tmp_path))
    assert [(c.path, c.runs) for c in ranked] == [(str(tmp_path / "outputs"), 2), (str(tmp_path / "logs"), 1)]
    assert all(c.newest is not None for c in ranked)
    assert ranked[0].describe().startswith("2 runs, newest ")
    plan = launch_plan(["--port", str(free_port())], cwd=str(tmp_path))
    assert plan.dirs == [str(tmp_path / "outputs")]
    text = plan.describe()
    assert "2 runs" in text and str(tmp_path / "logs") in text and "1 run," in text


def test_a_work_folder_that_reads_as_a_run_is_searched_inside(tmp_path):
    (tmp_path / "logs").mkdir()  # an empty logs/: the folder itself looks like a prime-rl run starting
    copy_run(NEW_RUN, tmp_path / "outputs")
    assert [(c.path, c.runs) for c in guided.candidates(str(tmp_path))] == [(str(tmp_path / "outputs"), 1)]


def test_rank_breaks_ties_by_the_newest_write():
    older, newer = guided.FolderCandidate("/a", 3, 100.0), guided.FolderCandidate("/b", 3, 200.0)
    assert guided.rank([older, newer, guided.FolderCandidate("/c", 0, None)]) == [newer, older]
    assert guided.rank([newer, guided.FolderCandidate("/d", 4, 1.0)])[0].path == "/d"


def test_guided_start_with_no_runs_is_the_demo(tmp_path):
    (tmp_path / "empty").mkdir()
    plan = launch_plan(["--port", str(free_port())], cwd=str(tmp_path))
    assert plan.dirs == [] and "built-in demo" in plan.describe()


def test_guided_start_asks_and_does_not_start_without_an_answer(tmp_path):
    copy_run(NEW_RUN, tmp_path / "outputs")
    env = {**os.environ, "RUNDASH_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("RUNDASH_DIRS", None)
    res = subprocess.run([sys.executable, "-m", "rundash_core.serve.cli", "--port", str(free_port())], cwd=tmp_path,
                         env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert str(tmp_path / "outputs") in res.stdout and "Proceed?" in res.stdout
    assert "pass --yes" in res.stderr
    assert launch.confirm(lambda _q: "") and launch.confirm(lambda _q: "y") and not launch.confirm(lambda _q: "n")


def test_help_lists_the_commands_and_the_server_options():
    res = subprocess.run([sys.executable, "-m", "rundash_core.serve.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    for verb in cli.VERBS:  # every verb the CLI dispatches, one line each saying what it does
        listed = [line for line in lines if line.strip().startswith(f"rundash {verb} ")]
        assert len(listed) == 1 and len(listed[0].split("  ")[-1].split()) >= 4, (verb, listed)
    for option in ("--port", "--host", "--base-path", "--roots", "--yes"):
        assert option in res.stdout, option
    assert "default: 127.0.0.1" in " ".join(res.stdout.split())


def test_the_server_binds_loopback_unless_asked(tmp_path):
    out = copy_run(NEW_RUN, tmp_path / "outputs").parent
    plan = launch_plan([str(out)])
    cmd = plan.command(launch.app_path())
    assert plan.host == "127.0.0.1" and cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert plan.local_url == f"http://127.0.0.1:{plan.port}/"
    # the tunnel ends where the server listens; a server on every interface is reached as localhost
    assert f"ssh -N -L {plan.port}:127.0.0.1:{plan.port} " in launch.forward_command(plan.port, plan.host)
    assert "-L 8600:localhost:8600 " in launch.forward_command(8600, "0.0.0.0")
    assert "-L 8600:[::1]:8600 " in launch.forward_command(8600, "::1")
    everywhere = launch_plan([str(out), "--host", "0.0.0.0"]).command(launch.app_path())
    assert everywhere[everywhere.index("--server.address") + 1] == "0.0.0.0"


def _listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses a socket LISTENs on for `port` (from /proc/net/tcp, hex little-endian)."""
    found = set()
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = row.split()[1], row.split()[3]
        addr, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
def test_a_started_server_listens_on_loopback_only(tmp_path):
    out = copy_run(NEW_RUN, tmp_path / "outputs").parent
    port = free_port()
    env = {**os.environ, "RUNDASH_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("RUNDASH_DIRS", None)
    proc = subprocess.Popen([sys.executable, "-m", "rundash_core.serve.cli", str(out), "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        text = ""
        for line in proc.stdout:
            text += line
            if "then open" in line:
                break
        assert f"rundash is serving at http://127.0.0.1:{port}/" in text, text
        assert f"-L {port}:127.0.0.1:{port} " in text
        assert _listening_addresses(port) == {"127.0.0.1"}
    finally:
        stop_group(proc, grace=30)


def test_no_at_the_question_starts_nothing_and_exits_0(tmp_path, monkeypatch, capsys, no_start):
    copy_run(NEW_RUN, tmp_path / "outputs")
    monkeypatch.chdir(tmp_path)
    real_confirm = launch.confirm
    monkeypatch.setattr(launch, "confirm", lambda: real_confirm(lambda _q: "n"))
    assert launch.main([]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "outputs") in out and "nothing was started" in out
    assert instances.live() == []  # nothing recorded either


def test_no_answer_at_the_question_is_none():
    def eof(_q):
        raise EOFError
    assert launch.confirm(eof) is None and launch.confirm(lambda _q: "N") is False
