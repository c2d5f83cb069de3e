"""Allowed roots: with roots set (the app always sets them), nothing outside them is read, at any
level a link may sit (run dir, attempt dir, config file, metrics file, log, trial dir, a path a log
names), and a link swapped between two reads is caught at the second."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import rundash_core as rd
from rundash_core.io import files
from rundash_core.settings import check_added_dir

from helpers import DATA, NEW_METRICS, NEW_RUN, copy_run

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def roots(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    with files.restricted_to([root]):
        yield root, outside


def _text_of(run) -> str:
    """Everything a page could show of a run."""
    parts = [repr(run.overview()), run.metrics().to_csv(), repr(run.configs()), repr(run.config()),
             run.samples().to_csv(), "\n".join(map(str, run.problems()))]
    return "\n".join(parts)


def test_a_run_dir_linked_from_outside_is_neither_listed_nor_opened(roots):
    root, outside = roots
    copy_run(NEW_RUN, outside)
    os.symlink(outside / NEW_RUN.name, root / "linked-run")
    copy_run(NEW_RUN, root, name="inside-run")
    assert list(rd.discover([root])["run_id"]) == ["inside-run"]
    with pytest.raises(rd.RunError, match="outside the allowed roots"):
        rd.open_run(root / "linked-run")
    with pytest.raises(rd.RunError, match="outside the allowed roots"):
        rd.discover([outside])


def test_links_inside_a_run_are_refused_and_named(roots):
    root, outside = roots
    run_dir = copy_run(NEW_RUN, root)
    (outside / "passwd").write_text(f"root:x:0:0:{SECRET}\n")
    resolved = run_dir / "configs" / "attempt_2" / "resolved"
    os.remove(resolved / "trainer.json")
    os.symlink(outside / "passwd", resolved / "trainer.json")  # a config file
    shutil.move(run_dir / "configs" / "attempt_1", outside / "attempt_1")
    os.symlink(outside / "attempt_1", run_dir / "configs" / "attempt_1")  # an attempt dir
    run = rd.open_run(run_dir)
    text = _text_of(run) + repr(run.configs(attempt=1))
    assert SECRET not in text and "root:x" not in text
    assert any(p.path.endswith("trainer.json") and "outside the allowed roots" in p.what for p in run.problems())


def test_a_metrics_file_or_log_linked_from_outside_is_not_read(roots):
    root, outside = roots
    run_dir = copy_run(NEW_RUN, root)
    metrics = run_dir / NEW_METRICS
    shutil.move(metrics, outside / "metrics.jsonl")
    os.symlink(outside / "metrics.jsonl", metrics)
    run = rd.open_run(run_dir)
    assert run.metrics().empty
    assert any("outside the allowed roots" in p.what for p in run.problems())
    shutil.copy(DATA / "verl" / "dq_math.log", outside / "dq.log")
    os.symlink(outside / "dq.log", root / "dq.log")
    assert "dq" not in set(rd.discover([root])["run_id"])
    with pytest.raises(rd.RunError, match="outside the allowed roots"):
        rd.open_run(root / "dq.log")


def test_paths_a_log_names_outside_the_roots_are_not_followed(roots):
    root, outside = roots
    log = root / "run.log"
    data = (DATA / "verl" / "dq_math.log").read_bytes()
    (outside / "x.jsonl").write_text('{"step": 1, "data": {"secret/value": 42.0}}\n')
    log.write_bytes(data.replace(b"\n", f"\n(TaskRunner pid=1) Creating file logger at {outside}/x.jsonl\n".encode(), 1))
    run = rd.open_run(log)
    assert "secret/value" not in set(run.metrics()["metric"].astype(str))
    work = root / "work"
    shutil.copytree(DATA / "lego", work)
    trials = work / "harbor_trials"
    shutil.move(trials, outside / "harbor_trials")  # the trials now live outside: named by the log, and linked
    os.symlink(outside / "harbor_trials", trials)
    lego_log = work / "logs" / "qwen3-8b-swegym-gspo-async-r1.log"
    named = outside / "harbor_trials" / "swe_lego_rl" / "qwen3-8b-swegym-gspo-async-r1"
    with open(lego_log, "a") as fh:
        fh.write(f"(AgentLoopWorker pid=1) trial dir {named}/step_0002/x-12345678 done\n")
    run = rd.open_run(lego_log)
    assert run.samples().empty
    assert any("outside the allowed roots" in p.what for p in run.problems())


def test_a_link_swapped_after_discovery_is_caught_at_open_time(roots):
    root, outside = roots
    run_dir = copy_run(NEW_RUN, root)
    run = rd.open_run(run_dir)
    before = run.configs()
    assert before
    (outside / "evil.json").write_text(f'{{"stolen": "{SECRET}"}}')
    target = run_dir / "configs" / "attempt_2" / "resolved" / "orchestrator.json"
    os.remove(target)
    os.symlink(outside / "evil.json", target)  # swapped between two reads
    assert SECRET not in repr(run.configs())


def test_without_roots_a_notebook_reads_what_its_user_can(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    files.set_roots(None)
    outside = tmp_path / "elsewhere"
    copy_run(NEW_RUN, outside)
    (tmp_path / "root").mkdir()
    os.symlink(outside / NEW_RUN.name, tmp_path / "root" / "linked")
    assert len(rd.open_run(tmp_path / "root" / "linked").metrics())
    monkeypatch.setenv("RUNDASH_ROOTS", str(tmp_path / "root"))  # a notebook can set them
    with pytest.raises(rd.RunError, match="outside the allowed roots"):
        rd.open_run(tmp_path / "root" / "linked")


def test_two_threads_with_their_own_roots_each_read_only_under_theirs(tmp_path, monkeypatch):
    """Two sessions of one server (each a thread) with different roots: each opens its run and is
    refused the other's, at the same time; the caller's own context keeps no roots at all."""
    import threading

    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    a, b = copy_run(NEW_RUN, tmp_path / "a"), copy_run(NEW_RUN, tmp_path / "b")
    both_set, seen = threading.Barrier(2), {}

    def session(name, mine, other):
        files.set_roots([mine.parent])  # as a script run's thread does (`streamlit_cache.use_roots`)
        both_set.wait()  # the other thread has set its roots by now
        try:
            rd.open_run(other)
            refused = False
        except rd.RunError as e:
            refused = "outside the allowed roots" in str(e)
        seen[name] = (files.allowed_roots(), len(rd.open_run(mine).metrics()) > 0, refused)

    threads = [threading.Thread(target=session, args=("a", a, b)), threading.Thread(target=session, args=("b", b, a))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen["a"] == ((os.path.realpath(tmp_path / "a"),), True, True)
    assert seen["b"] == ((os.path.realpath(tmp_path / "b"),), True, True)
    assert files.allowed_roots() is None  # nothing leaked into this thread


def test_restricted_to_ends_with_its_block(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    with files.restricted_to([tmp_path]):
        assert files.allowed_roots() == (os.path.realpath(tmp_path),)
        assert not files.inside_roots("/etc/hostname")
    assert files.allowed_roots() is None and files.inside_roots("/etc/hostname")


def test_a_fragment_or_callback_in_a_fresh_thread_reads_under_the_servers_roots(tmp_path, monkeypatch):
    """Streamlit runs a fragment's rerun and a widget callback without app.py, in a thread that
    starts with no roots: the pages' wrappers set the server's there, and no page uses a bare
    `st.fragment`."""
    import threading

    from pages import _ui

    monkeypatch.setenv("RUNDASH_DIRS", str(tmp_path))
    monkeypatch.delenv("RUNDASH_ROOTS", raising=False)
    seen = []
    thread = threading.Thread(target=_ui.in_session(lambda: seen.append(files.allowed_roots())))
    thread.start()
    thread.join(60)
    assert seen and seen[0][0] == os.path.realpath(tmp_path)
    pages = Path(__file__).resolve().parents[2] / "pages"
    bare = [p.name for p in pages.glob("*.py") if p.name != "_ui.py" and "st.fragment(" in p.read_text()]
    assert bare == []


# Hostile paths: a link swapped before the open, directories typed in the add box ----------------
def test_a_link_swapped_between_the_check_and_the_open_is_refused(tmp_path, monkeypatch):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "inside.log").write_text("fine\n")
    (outside / "secret").write_text("TOP-SECRET\n")
    link = root / "run.log"
    os.symlink(root / "inside.log", link)
    files.set_roots([root])
    real_check = files.check_inside

    def check_then_swap(path):
        real_check(path)  # passes: the link points inside
        os.remove(link)
        os.symlink(outside / "secret", link)  # swapped before the open

    monkeypatch.setattr(files, "check_inside", check_then_swap)
    with pytest.raises(files.OutsideRoots, match="outside the allowed roots"):
        with files.open_file(link) as fh:
            fh.read()
    monkeypatch.setattr(files, "check_inside", real_check)
    with pytest.raises(files.OutsideRoots):
        files.read_text(link)
    os.remove(link)
    os.symlink(root / "inside.log", link)
    assert files.read_text(link) == "fine\n"


def test_hostile_directory_paths_are_refused_against_the_roots(tmp_path, monkeypatch):
    base = tmp_path / "data"
    root = base / "runs"
    (root / "ok").mkdir(parents=True)
    (base / "runs-evil" / "x").mkdir(parents=True)
    os.symlink(root, tmp_path / "root-link")
    os.symlink(base / "runs-evil", root / "dir-link-out")
    monkeypatch.setenv("HOME", str(tmp_path))
    for roots in ([f"{root}/"], [str(tmp_path / "root-link")]):  # a trailing slash; a root that is a link
        for bad in [str(base / "runs-evil" / "x"), f"{root}/../runs-evil/x", str(root / "dir-link-out"), "~",
                    "~/data/runs-evil", f"{root}/ok\x00", f"{root}/%2e%2e/runs-evil", f"{root}/%252e%252e/runs-evil",
                    f"{root}/" + "a/" * 3000, str(root).upper(), "/proc/self/cwd", "../../.."]:
            full, error = check_added_dir(bad, roots)
            assert full is None and error, (roots, bad)
        assert check_added_dir(f"{root}/ok/", roots) == (str(root / "ok"), None)
        assert check_added_dir("~/data/runs/ok", roots) == (str(root / "ok"), None)
