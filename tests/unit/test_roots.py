"""Allowed roots: with roots set (the app always sets them), nothing outside them is read, at any
level a link may sit (run dir, attempt dir, config file, metrics file, log, trial dir, a path a log
names), and a link swapped between two reads is caught at the second."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import rundash_core as rd
from helpers import NEW_METRICS, NEW_RUN, copy_run, DATA
from rundash_core.io import files

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def roots(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    files.set_roots([root])
    yield root, outside
    files.set_roots(None)


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
    (outside / "evil.json").write_text('{"stolen": "%s"}' % SECRET)
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
