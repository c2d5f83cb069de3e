"""Hostile trees and files through the notebook API: problems, never exceptions; one bad run costs
its own row, not the runs list. (Secrets, roots and user patterns have their own test files.)"""
from __future__ import annotations

import os

import pytest

import rundash_core as rd

from helpers import DATA, NEW_METRICS, NEW_RUN, REPO, copy_run
from helpers.hostile import hostile_tree


def _everything(run) -> list:
    run.overview(), run.metrics(), run.metrics_wide(), run.config(), run.configs(), run.samples(), run.steps()
    return run.problems()


@pytest.fixture
def hostile(tmp_path):
    root = tmp_path / "hostile"
    deep = copy_run(NEW_RUN, root, name="deep-tree")
    cur, levels = deep / "configs" / "attempt_2" / "resolved", []
    for _ in range(1000):  # 1,000 levels under configs/
        cur = cur / "d"
        cur.mkdir()
        levels.append(cur)
    nested = copy_run(NEW_RUN, root, name="deep-json")
    (nested / "configs/attempt_2/resolved/trainer.json").write_text("[" * 100_000 + "]" * 100_000)
    big = copy_run(NEW_RUN, root, name="big-int")
    with open(big / NEW_METRICS, "a") as fh:
        fh.write('{"step": %d, "loss": 1.0}\n{"step": 12, "x": %d}\n' % (10**30, 10**30))
    fifo = copy_run(NEW_RUN, root, name="fifo")
    os.remove(fifo / NEW_METRICS)
    os.mkfifo(fifo / NEW_METRICS)
    yield root
    for level in reversed(levels):  # shutil.rmtree (pytest's clean-up) recurses once per level
        level.rmdir()


def test_hostile_runs_give_problems_not_exceptions(hostile):
    frame = rd.discover([hostile])
    assert sorted(frame["run_id"]) == ["big-int", "deep-json", "deep-tree", "fifo"]
    assert frame["error"].isna().all()
    problems = {name: _everything(rd.open_run(hostile / name)) for name in frame["run_id"]}
    assert any("nested too deeply" in p.what for p in problems["deep-json"])
    assert any("step is not a whole number" in p.what and p.line for p in problems["big-int"])
    assert any("not a regular file" in p.what for p in problems["fifo"])  # never opened: no hang
    assert rd.open_run(hostile / "deep-tree").configs()  # the real configs still show


def test_a_huge_step_costs_that_row_only(hostile):
    run = rd.open_run(hostile / "big-int")
    tidy = run.metrics()
    assert tidy["step"].max() < 1 << 62 and (tidy["metric"] == "x").any()  # the row at step 12 kept
    assert run.overview().last_step == 12  # the card is not thrown off by 10**30


def test_a_line_of_two_million_keys_is_not_two_million_metrics(tmp_path, monkeypatch):
    from rundash_core.io import jsonl
    from rundash_core.metrics import store as metricstore

    run_dir = copy_run(NEW_RUN, tmp_path)
    with open(run_dir / NEW_METRICS, "a") as fh:
        fh.write('{"step": 20, ' + ", ".join(f'"k{i}": {i}' for i in range(30_000)) + "}\n")
        fh.write('{"step": 21, "loss/mean": 0.5, "huge": "' + "x" * (9 << 20) + '"}\n')
        fh.write('{"step": 22, "loss/mean": 0.25}\n')
    run = rd.open_run(run_dir)
    tidy = run.metrics()
    assert tidy["metric"].nunique() <= metricstore.MAX_KEYS
    whats = [p.what for p in run.problems()]
    assert any("distinct metric names" in w for w in whats)
    assert any(f"longer than {jsonl.MAX_LINE_BYTES >> 20} MiB" in w for w in whats)
    assert 0.25 in set(tidy[tidy["metric"] == "loss/mean"]["value"])  # the rows after are read


def test_an_unforeseen_reader_failure_is_a_message_naming_the_run(monkeypatch, demo_runs):
    """Any exception while a page renders becomes a message naming the run, never Streamlit's
    error page; error details stay hidden from browsers (.streamlit/config.toml)."""
    from rundash_core.sources.prime_rl.run import PrimeRLRun

    from helpers import open_page

    folder, runs = demo_runs
    run_id = runs[runs["kind"] == "prime-rl"]["run_id"].iloc[0]

    def boom(self, attempt=None):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(PrimeRLRun, "configs", boom)
    at = open_page(monkeypatch, folder, "pages/config.py", {"run": run_id})
    errors = " ".join(e.value for e in at.error)
    assert "could not be shown" in errors and run_id in errors and "disk on fire" in errors
    config = (REPO / ".streamlit" / "config.toml").read_text()
    assert 'showErrorDetails = "none"' in config


def test_a_trial_started_in_year_9999_is_no_time(tmp_path):
    import json
    import shutil

    work = shutil.copytree(DATA / "lego", tmp_path / "lego")
    result = next(work.rglob("result.json"))
    data = json.loads(result.read_text())
    data["started_at"] = "9999-12-31T23:59:59Z"
    result.write_text(json.dumps(data))
    run = rd.open_run(work / "logs" / "qwen3-8b-swegym-gspo-async-r1.log")
    samples = run.samples()
    row = samples[samples["locator"] == str(result.parent)]
    assert len(row) == 1 and row["duration_s"].isna().all()  # no time, no exception


def test_every_page_over_a_hostile_tree_shows_no_secret_no_outside_content_no_traceback(tmp_path, monkeypatch):
    from helpers import app_pages, open_page

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    hostile_tree(root, outside)
    from rundash_core.io import files

    files.set_roots([root])  # as the app does for its start directories
    runs = rd.discover([root])
    assert "linked-run" not in set(runs["run_id"]) and len(runs) == 5
    for run_id in runs["run_id"]:
        for page in app_pages():
            at = open_page(monkeypatch, root, page, {"run": run_id})  # asserts no exception
            shown = " ".join(str(getattr(e, "value", "")) for kind in ("markdown", "caption", "code", "error",
                                                                          "warning", "info", "dataframe")
                             for e in at.get(kind))
            assert "SECRET-" not in shown and "OUTSIDE-CONTENT" not in shown, (run_id, page)
    at = open_page(monkeypatch, root, "pages/config.py", {"run": "secrets-and-links"})
    code = " ".join(c.value for c in at.code)
    assert "max_tokens" in code and "tokenizer" in code  # names that are not secrets stay


def test_a_huge_config_file_is_cut_and_says_so(tmp_path):
    from rundash_core.io.configs import MAX_CONFIG_BYTES

    run_dir = copy_run(NEW_RUN, tmp_path)
    big = run_dir / "configs" / "attempt_2" / "resolved" / "trainer.json"
    big.write_text('{"pad": "' + "x" * (MAX_CONFIG_BYTES + 10) + '"}')
    run = rd.open_run(run_dir)
    shown = run.configs()["resolved/trainer.json"]
    assert isinstance(shown, str) and len(shown) < MAX_CONFIG_BYTES
    assert any(p.path.endswith("trainer.json") and "only its start" in p.what for p in run.problems())


def test_unreadable_config_folders_are_named_with_the_right_reason(tmp_path, monkeypatch):
    """As for a server not running as root: configs/ and resolved/ cannot be listed. The run still
    shows; each folder is a problem saying "permission denied", not "missing"."""
    run_dir = copy_run(NEW_RUN, tmp_path)
    locked = {str(run_dir / "configs"), str(run_dir / "configs" / "attempt_2"),
              str(run_dir / "configs" / "attempt_2" / "resolved")}
    real_scandir, real_listdir = os.scandir, os.listdir

    def refuse(real):
        def call(path=".", *a, **k):
            if os.fspath(path) in locked:
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real(path, *a, **k)
        return call

    monkeypatch.setattr(os, "scandir", refuse(real_scandir))
    monkeypatch.setattr(os, "listdir", refuse(real_listdir))
    run = rd.open_run(run_dir)
    ov, metrics, problems = run.overview(), run.metrics(), run.problems()
    assert len(metrics) and ov.step is not None
    denied = [p for p in problems if "permission denied" in p.what]
    assert {p.path for p in denied} >= {str(run_dir / "configs")} and not any("missing" in p.what for p in denied)
