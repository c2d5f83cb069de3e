"""Odd directory trees and config files through the public API: every run found exactly once,
nothing outside the allowed roots read, odd entries never raise or hang, configs that are garbage,
huge, deep or altered say so (and hide their secrets)."""
from __future__ import annotations

import builtins
import importlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core.io import configs as configs_mod
from rundash_core.io import files

from helpers import DATA, make_rl_run

scan = importlib.import_module("rundash_core.discover").scan  # `rd.discover` is the function
VERL_LOG = DATA / "verl" / "dq_math.log"
ROW = [{"step": 1, "loss": 1.0}]
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def _listings(monkeypatch) -> list[str]:
    """Every folder `os.scandir` lists from now on."""
    seen, real = [], os.scandir

    def spy(path="."):
        seen.append(os.fspath(path))
        return real(path)
    monkeypatch.setattr(os, "scandir", spy)
    return seen


# Discovery: links, cycles, unlistable folders -----------------------------------------------------
def test_links_to_a_parent_list_each_folder_once(tmp_path, monkeypatch):
    """8 folders each linking back to the root: the walk grew as 8 ** depth (0.6 s at depth 6)."""
    make_rl_run(tmp_path, "r1", rows=ROW)
    for i in range(8):
        (tmp_path / f"d{i}").mkdir()
        os.symlink("..", tmp_path / f"d{i}" / "up")
    listed = _listings(monkeypatch)
    df = rd.discover([tmp_path], depth=6)
    assert list(df["run_id"]) == ["r1"]
    assert listed.count(str(tmp_path)) == 1
    assert len(listed) < 60, len(listed)


def test_symlink_loop_and_self_link_never_hang(tmp_path):
    make_rl_run(tmp_path, "r1", rows=ROW)
    os.symlink("loop-b", tmp_path / "loop-a")
    os.symlink("loop-a", tmp_path / "loop-b")
    os.symlink(".", tmp_path / "self")
    t0 = time.process_time()  # CPU seconds: a busy machine (xdist, other users) does not make them grow
    assert list(rd.discover([tmp_path], depth=30)["run_id"]) == ["r1"]
    assert time.process_time() - t0 < 2


def test_run_linked_from_two_places_is_listed_once_where_it_is(tmp_path):
    """The walk met the link at the top first and listed the run under its alias's name."""
    real = make_rl_run(tmp_path / "a", "r", rows=ROW)
    (tmp_path / "b").mkdir()
    os.symlink(real, tmp_path / "b" / "r")
    os.symlink(real, tmp_path / "r-alias")
    df = rd.discover([tmp_path])
    assert list(df["path"]) == [str(real)] and list(df["run_id"]) == ["r"]


def test_same_tracked_dir_twice_and_nested_lists_each_run_once(tmp_path):
    make_rl_run(tmp_path / "sub", "r1", rows=ROW)
    make_rl_run(tmp_path, "r2", rows=ROW)
    df = rd.discover([tmp_path, tmp_path / "sub", tmp_path])
    assert sorted(df["run_id"]) == ["r1", "r2"]


def test_folder_that_cannot_be_listed_is_said_not_silently_empty(tmp_path, monkeypatch):
    make_rl_run(tmp_path / "locked", "hidden-run", rows=ROW)
    make_rl_run(tmp_path, "ok", rows=ROW)
    real = os.scandir

    def refuse(path="."):
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)
    monkeypatch.setattr(os, "scandir", refuse)
    frame, said = scan([tmp_path])
    assert list(frame["run_id"]) == ["ok"]
    assert len(said) == 1 and "locked: cannot be listed (Permission denied)" in said[0]
    assert list(rd.discover([tmp_path])["run_id"]) == ["ok"]  # a note, not an error
    monkeypatch.setattr(os, "scandir", real)  # listable again: not answered from the warm cache
    assert sorted(rd.discover([tmp_path])["run_id"]) == ["hidden-run", "ok"]


def test_tracked_dir_that_is_a_broken_link_or_fifo_is_an_error(tmp_path):
    os.symlink(tmp_path / "nowhere", tmp_path / "gone")
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(rd.RunError, match="broken symlink"):
        rd.discover([tmp_path / "gone"])
    with pytest.raises(rd.RunError, match="not a directory"):
        rd.discover([tmp_path / "pipe"])


def test_an_empty_path_is_an_error_not_the_working_directory(tmp_path, monkeypatch):
    """`os.path.abspath("")` is the working directory: `rd.discover([""])` listed every run there."""
    make_rl_run(tmp_path, "r1", rows=ROW)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(rd.RunError, match="empty path"):
        rd.discover(["", str(tmp_path)])
    runs, errors = rd.list_runs([" "])
    assert runs == [] and "empty path" in errors[0]


# Discovery: entries named like run files ----------------------------------------------------------
def test_fifo_socket_empty_and_folder_logs(tmp_path):
    """FIFOs and sockets named like run files are never opened (no hang); a folder named `x.log`
    is no log; an empty log is a run that has not logged yet; a dangling run link is passed over."""
    fifo_run = make_rl_run(tmp_path, "fifo-run")
    (fifo_run / "monitors" / "file").mkdir(parents=True)
    os.mkfifo(fifo_run / "monitors" / "file" / "metrics.jsonl")
    os.mkfifo(tmp_path / "train.log")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.log"))
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "folder.log").mkdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling-run")
    shutil.copyfile(VERL_LOG, tmp_path / "real.log")
    try:
        frame, said = scan([tmp_path])
        assert sorted(frame["run_id"]) == ["empty", "fifo-run", "real"] and said == []
        assert frame["error"].isna().all()
        problems = {p.path: p.what for p in rd.open_run(fifo_run).problems()}
        assert problems[str(fifo_run / "monitors" / "file" / "metrics.jsonl")] == files.NOT_REGULAR
        assert [p.what for p in rd.open_run(tmp_path / "empty.log").problems()] == ["no metric lines yet"]
        with pytest.raises(rd.RunError):
            rd.open_run(tmp_path / "train.log")
    finally:
        sock.close()


def test_ten_thousand_non_run_files_stay_fast(tmp_path):
    make_rl_run(tmp_path, "r1", rows=ROW)
    junk = tmp_path / "junk"
    junk.mkdir()
    for i in range(10_000):
        (junk / f"f{i}.txt").write_bytes(b"x")
    rd.discover([tmp_path])  # imports and first-call costs out of the measure
    rd.cache.shared.clear()
    t0 = time.process_time()  # CPU seconds: a busy machine (xdist, other users) does not make them grow
    df = rd.discover([tmp_path])
    took = time.process_time() - t0
    assert list(df["run_id"]) == ["r1"]
    assert took < 1.0, f"cold discovery of 10k files took {took:.2f} s"


def test_very_deep_nesting_stops_at_the_depth(tmp_path, monkeypatch):
    folder = tmp_path
    for i in range(200):
        folder = folder / f"n{i}"
    folder.mkdir(parents=True)
    make_rl_run(folder, "too-deep", rows=ROW)
    make_rl_run(tmp_path / "n0", "shallow", rows=ROW)
    listed = _listings(monkeypatch)
    assert list(rd.discover([tmp_path], depth=4)["run_id"]) == ["shallow"]
    assert len(listed) < 40


# Discovery: names and copies ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["my run", "ランß–ü", "a\nb", "<img src=x onerror=alert(1)>", "-rf"])
def test_odd_names_are_found_once_and_open(tmp_path, name):
    run = make_rl_run(tmp_path, name, rows=ROW)
    df = rd.discover([tmp_path])
    assert list(df["run_id"]) == [name] and list(df["path"]) == [str(run)]
    assert rd.open_run(df["path"][0]).overview().step == 1


def test_file_names_that_are_not_utf8_list_escaped_instead_of_raising(tmp_path):
    """A path with a byte that is not UTF-8 raised UnicodeEncodeError out of `rd.discover`
    (pandas' str columns and the id hash are UTF-8)."""
    for parent in (b"a", b"b"):
        folder = os.path.join(os.fsencode(tmp_path), parent, b"run-\xff")
        os.makedirs(folder)
        make_rl_run(Path(os.fsdecode(folder)), "x", rows=ROW)
    df = rd.discover([tmp_path])
    assert len(df) == 2 and df["run_id"].is_unique
    assert all(i.startswith("run-\\xff:x@") for i in df["run_id"])
    assert all("not valid UTF-8" in e for e in df["error"])
    assert all(s == 1 for s in df["step"])  # still summarised
    assert all(rd.open_run(p).overview().step == 1 for p in df["path"])  # the shown path opens the run


def test_a_run_copied_to_two_places_is_two_runs_told_apart_by_path(tmp_path):
    for where in ("x/p", "y/p", "z"):
        make_rl_run(tmp_path / where, "r", rows=ROW)
    first = rd.discover([tmp_path])
    rd.cache.shared.clear()
    again = rd.discover([tmp_path])
    assert len(first) == 3 and first["run_id"].is_unique and first["path"].is_unique
    assert dict(zip(first["path"], first["run_id"])) == dict(zip(again["path"], again["run_id"]))  # stable
    assert {i.split("@")[0] for i in first["run_id"]} == {"p:r", "z:r"}


# Allowed roots ------------------------------------------------------------------------------------
def _reads(monkeypatch) -> list[str]:
    """Every path listed or opened from now on."""
    seen = []
    for mod, name in ((os, "scandir"), (os, "listdir"), (os, "open"), (builtins, "open")):
        real = getattr(mod, name)

        def spy(path=".", *a, _real=real, **k):
            if isinstance(path, (str, bytes, os.PathLike)):
                seen.append(os.fsdecode(path))
            return _real(path, *a, **k)
        monkeypatch.setattr(mod, name, spy)
    return seen


def _outside(tmp_path) -> Path:
    out = tmp_path / "outside"
    make_rl_run(out, "secret-run", rows=ROW)
    shutil.copyfile(VERL_LOG, out / "secret.log")
    (out / "leak.json").write_text(json.dumps({"api_key": SECRET}))
    (out / "logs").mkdir()
    (out / "logs" / "trainer.log").write_text("x")
    return out


def test_nothing_outside_the_roots_is_listed_or_opened(tmp_path, monkeypatch):
    out, root = _outside(tmp_path), tmp_path / "root"
    run = make_rl_run(root, "r", rows=ROW)
    os.symlink(out / "secret-run", root / "alias")
    os.symlink(out / "secret.log", root / "alias.log")
    os.symlink(out, root / "outdir")
    os.symlink(out / "leak.json", run / "configs" / "attempt_1" / "resolved" / "leak.json")
    monkeypatch.setenv("RUNDASH_ROOTS", str(root))
    reads = _reads(monkeypatch)
    assert list(rd.discover([root])["run_id"]) == ["r"]
    opened = rd.open_run(run)
    shown = json.dumps([opened.configs(), opened.config()])
    problems = {p.path: p.what for p in opened.problems()}
    with pytest.raises(rd.RunError, match="outside the allowed roots"):
        rd.discover([root / "outdir"])
    assert SECRET not in shown
    assert problems[str(run / "configs" / "attempt_1" / "resolved" / "leak.json")] == files.OUTSIDE_ROOTS
    assert reads and [p for p in map(os.path.realpath, reads) if files.is_within(p, [tmp_path])
                      and not files.is_within(p, [root])] == []


def test_a_logs_folder_linking_outside_is_not_listed(tmp_path, monkeypatch):
    out, root = _outside(tmp_path), tmp_path / "root"
    (root / "r2").mkdir(parents=True)
    os.symlink(out / "logs", root / "r2" / "logs")
    monkeypatch.setenv("RUNDASH_ROOTS", str(root))
    reads = _reads(monkeypatch)
    rd.discover([root])
    assert not any(os.path.realpath(p).startswith(str(out)) for p in reads)


def test_a_config_folder_linking_outside_is_not_listed(tmp_path, monkeypatch):
    out, root = _outside(tmp_path), tmp_path / "root"
    run = make_rl_run(root, "r", rows=ROW)
    shutil.rmtree(run / "configs" / "attempt_1" / "resolved")
    os.symlink(out, run / "configs" / "attempt_1" / "resolved")
    monkeypatch.setenv("RUNDASH_ROOTS", str(root))
    assert not any("leak.json" in name for name in rd.open_run(run).configs())


def test_walk_files_stops_listing_at_max_entries(tmp_path, monkeypatch):
    for i in range(3000):
        (tmp_path / f"f{i}").write_bytes(b"")
    pulled, real = [0], os.scandir

    class Counting:
        def __init__(self, path):
            self.it = real(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.it.close()

        def __iter__(self):
            for e in self.it:
                pulled[0] += 1
                yield e
    monkeypatch.setattr(os, "scandir", Counting)
    assert len(files.walk_files(str(tmp_path), max_entries=100)) == 100
    assert pulled[0] <= 101  # the folder is listed only as far as the count allows
    assert pulled[0] <= 1000


# Config files -------------------------------------------------------------------------------------
def _run_with(tmp_path, name: str, data: bytes) -> tuple[rd.Run, str]:
    run = make_rl_run(tmp_path, "r", rows=ROW)
    where = run / "configs" / "attempt_1" / ("resolved" if name.endswith(".json") else "") / name
    where.write_bytes(data)
    return rd.open_run(run), str(where)


def _problem(run, path) -> str | None:
    return next((p.what for p in run.problems() if p.path == path), None)


@pytest.mark.parametrize("name,data,said", [
    ("x.json", b"", "invalid JSON"),
    ("x.json", b"{garbage", "invalid JSON"),
    ("x.json", bytes(range(256)) * 20, "invalid JSON"),
    ("x.json", b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    ("rl.toml", b"a = " + b"[" * 3000 + b"]" * 3000, "too deeply"),
    ("rl.toml", b"= = =\x00\xff", "invalid TOML"),
    ("rl.toml", b"a = " + b"9" * 5000, "invalid TOML"),  # raised ValueError (int digits limit)
])
def test_bad_config_files_are_problems_not_tracebacks(tmp_path, name, data, said):
    run, path = _run_with(tmp_path, name, data)
    shown = run.configs()
    assert isinstance(shown[os.path.relpath(path, os.path.join(run.path, "configs", "attempt_1"))], str)
    assert said in (_problem(run, path) or "")
    assert run.config()["orchestrator"]["max_steps"] == 10  # the good files still read


def test_bad_utf8_and_nul_bytes_in_a_config_are_said(tmp_path):
    """The value parsed after U+FFFD replacement and NUL dropping: shown altered, silently."""
    run, path = _run_with(tmp_path, "x.json", b'{"a": "caf\xe9", "b": "x\x00y"}')
    assert run.configs()["resolved/x.json"] == {"a": "caf\ufffd", "b": "xy"}
    what = _problem(run, path)
    assert what is not None and "NUL" in what and "UTF-8" in what


def test_a_lone_surrogate_escape_in_a_config_breaks_neither_the_list_nor_the_view(tmp_path):
    """JSON may spell half a UTF-16 pair (`"\\ud800"`): no UTF-8 output can hold it, and a model
    name with one made `rd.discover` raise UnicodeEncodeError for every run of the list."""
    run = make_rl_run(tmp_path / "runs", "r", rows=ROW, model="Qwen\ud800", train=("env\udfff",))
    make_rl_run(tmp_path / "runs", "other", rows=ROW)
    df = rd.discover([tmp_path / "runs"]).set_index("run_id")
    assert df.loc["r", "model"] == "Qwen\ufffd" and df.loc["r", "train_envs"] == ["env\ufffd"]
    opened = rd.open_run(run)
    json.dumps(opened.configs(), ensure_ascii=False).encode("utf-8")  # raised UnicodeEncodeError
    path = str(run / "configs" / "attempt_1" / "resolved" / "orchestrator.json")
    assert "surrogate" in _problem(opened, path)


def test_config_entries_that_are_no_files_never_hang(tmp_path):
    run, fifo = _run_with(tmp_path, "x.json", b"{}")
    resolved = Path(fifo).parent
    os.remove(fifo)
    os.mkfifo(fifo)
    os.symlink("loop.json", resolved / "loop.json")
    os.symlink(tmp_path / "nowhere.json", resolved / "dangling.json")
    (resolved / "folder.json").mkdir()
    said = {os.path.basename(p.path): p.what for p in run.problems()}
    assert said["x.json"] == files.NOT_REGULAR and said["loop.json"] == "symlink loop"
    assert said["dangling.json"] == "broken symlink" and files.NOT_REGULAR in said.get("folder.json", files.NOT_REGULAR)
    assert run.configs()["resolved/x.json"] is None and run.config()["orchestrator"]["max_steps"] == 10


def test_a_huge_config_is_read_only_as_far_as_it_is_shown(tmp_path, monkeypatch):
    """A 50 MB config was read 16 MiB deep to show its first MiB."""
    run, path = _run_with(tmp_path, "x.json", b'{"k": "' + b"a" * (50 << 20) + b'"}')
    asked, real = [], files.read_range

    def spy(p, start, end=None):
        asked.append((os.fspath(p), start, end))
        return real(p, start, end)
    monkeypatch.setattr(files, "read_range", spy)
    monkeypatch.setattr(configs_mod, "read_range", spy, raising=False)
    shown = run.configs()["resolved/x.json"]
    assert isinstance(shown, str) and len(shown) <= configs_mod.MAX_SHOWN_CHARS
    assert "larger than 16 MiB" in _problem(run, path)
    ends = [end for p, _s, end in asked if p == path]
    assert ends and max(e or 1 << 40 for e in ends) <= 2 << 20


def test_a_large_garbage_config_keeps_only_what_is_shown(tmp_path):
    """A 5 MB file that is no JSON was kept (and redacted, rendered) whole as its text."""
    run, path = _run_with(tmp_path, "x.json", b"{garbage " + b"x" * (5 << 20))
    assert len(run.configs()["resolved/x.json"]) == configs_mod.MAX_SHOWN_CHARS
    assert _problem(run, path).startswith("invalid JSON") and "first 1 MiB is shown" in _problem(run, path)


def test_a_deep_json_config_is_text_with_a_problem_and_its_secret_hidden(tmp_path):
    """150 levels parsed as a value every view walks recursively; 600 came back as one '[hidden]'
    for the whole file, without a word."""
    doc = '{"a": ' * 150 + json.dumps({"api_key": SECRET}) + "}" * 150
    run, path = _run_with(tmp_path, "x.json", doc.encode())
    shown = run.configs()["resolved/x.json"]
    assert isinstance(shown, str) and '"a"' in shown and SECRET not in shown
    assert "nested deeper than 100 levels" in _problem(run, path)


def test_yaml_bomb_stays_text_and_fast(tmp_path):
    """rundash parses no YAML: a billion-laughs file (or one pasted in command.txt) stays its text."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}]" + f",*{chr(97 + i)}" * 8 for i in range(8)]
    bomb = ("\n".join(lines) + f"\napi_key: {SECRET}\n").encode()
    run, _path = _run_with(tmp_path, "command.txt", bomb)
    (Path(run.path) / "configs" / "attempt_1" / "bomb.yaml").write_bytes(bomb)
    t0 = time.process_time()  # CPU seconds: a busy machine (xdist, other users) does not make them grow
    shown = json.dumps(run.configs())
    assert time.process_time() - t0 < 2
    assert len(shown) < 4 * len(bomb) and "*h" in shown and SECRET not in shown


def test_secrets_are_hidden_in_every_config_form(tmp_path):
    run = make_rl_run(tmp_path, "r", rows=ROW)
    attempt = run / "configs" / "attempt_1"
    (attempt / "resolved" / "orchestrator.json").write_text(json.dumps(
        {"model": {"name": "q"}, "max_steps": 10,
         "client": {"api_key": SECRET, "headers": {"Authorization": f"Bearer {SECRET}"}}}))
    (attempt / "rl.toml").write_text(f'[model]\nname = "q"\n[wandb]\napi_key = "{SECRET}"\n')
    (attempt / "command.txt").write_text(f"OPENAI_API_KEY={SECRET} uv run rl --wandb.api-key {SECRET}\n")
    (attempt / "resolved" / "bad.json").write_bytes(b'{"token": "' + SECRET.encode() + b'", \xff')
    opened = rd.open_run(run)
    shown = json.dumps([opened.configs(), opened.config(), [p.what for p in opened.problems()]])
    assert SECRET not in shown and shown.count("hidden") >= 4
    assert opened.configs(redacted=False)["rl.toml"].count(SECRET) == 1  # the owner's view is whole
