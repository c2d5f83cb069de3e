"""`Run.capabilities`, the one mechanism: reading it touches no file (it answers from what the
run's listings last found), and what depends on files shows from the run's next listing — a verl
run whose dump folder appears gains samples and episodes, a prime-rl run gains reports, in the
library and on the pages the way a user sees them (AppTest)."""
from __future__ import annotations

import builtins
import io
import os
import shutil
from pathlib import Path

import rundash_core as rd
from rundash_core.run import CAPABILITIES

from helpers import DATA, make_rl_run, open_page

DUMPS = DATA / "verl-dumps"
FS_CALLS = (os, ("stat", "lstat", "scandir", "listdir", "open", "access", "readlink")), \
           (builtins, ("open",)), (io, ("open",))


def _read_everything(run) -> None:
    """What the app does for a run on every page: its card, its problems, its listings."""
    run.overview()
    run.problems()
    run.samples()
    run.reports()


def _counting_fs_calls(monkeypatch) -> list:
    """Every filesystem call made from here on lands in the list returned (and fails)."""
    calls = []
    for module, names in FS_CALLS:
        for name in names:
            def refuse(*args, _name=f"{module.__name__}.{name}", **kwargs):
                calls.append((_name, args[:1]))
                raise OSError(f"{_name} called while reading capabilities")
            monkeypatch.setattr(module, name, refuse)
    return calls


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the verl-dumps run and a prime-rl run with one report, under one root."""
    root = tmp_path / "runs"
    shutil.copytree(DUMPS, root / "verl")
    prime = make_rl_run(root, "r--m--0123abcd", rows=[{"step": 0, "time": 1.0, "producer": "trainer", "loss": 1.0}])
    (prime / "reports").mkdir()
    (prime / "reports" / "first.md").write_text("# First\n")
    return root / "verl" / "grpo-dumps.log", prime


def test_reading_capabilities_makes_no_filesystem_call(tmp_path, monkeypatch):
    log, prime = _copy(tmp_path)
    runs = [rd.open_run(p) for p in (log, prime, DATA / "relax" / "relax-run",
                                     DATA / "lego" / "logs" / "qwen3-8b-swegym-gspo-async-r1.log")]
    for run in runs:
        _read_everything(run)
    before = [run.capabilities for run in runs]
    assert {"samples", "episodes"} <= before[0] and "reports" in before[1]
    calls = _counting_fs_calls(monkeypatch)
    after = [[run.capabilities for _ in range(3)] for run in runs]
    read = list(calls)
    os.path.isdir(tmp_path)  # (the guard sees what a listing would do)
    monkeypatch.undo()
    assert read == [] and calls == [("os.stat", (tmp_path,))]
    assert all(answers == [b] * 3 and b <= set(CAPABILITIES) for answers, b in zip(after, before))


def test_the_answer_is_what_was_listed_until_the_next_listing(tmp_path):
    """The folders removed after a read: the run still says what it read; its next listing (the
    app's next refresh reads `problems()`) says they are gone."""
    log, prime = _copy(tmp_path)
    verl, prime_run = rd.open_run(log), rd.open_run(prime)
    _read_everything(verl), _read_everything(prime_run)
    shutil.rmtree(log.parent / "generations")
    shutil.rmtree(prime / "reports")
    assert {"samples", "episodes"} <= verl.capabilities and "reports" in prime_run.capabilities
    verl.problems(), prime_run.problems()
    assert not {"samples", "episodes"} & verl.capabilities and "reports" not in prime_run.capabilities
    assert verl.kind_capabilities <= verl.capabilities  # the kind's fixed set stays


def test_a_verl_run_gains_samples_when_its_dump_folder_appears(tmp_path):
    log, _prime = _copy(tmp_path)
    away = tmp_path / "away"
    shutil.move(log.parent / "generations", away)
    run = rd.open_run(log)
    assert run.samples().empty and not {"samples", "episodes"} & run.capabilities
    shutil.move(away, log.parent / "generations")
    assert "samples" not in run.capabilities  # nothing read yet: the answer has not changed
    run.problems()  # the refresh (the sidebar and the terminal card read it every time)
    assert {"samples", "episodes"} <= run.capabilities and len(run.samples()) > 0


def test_the_pages_show_dumps_and_reports_that_appear_at_their_next_refresh(tmp_path, monkeypatch):
    log, prime = _copy(tmp_path)
    away = tmp_path / "away"
    shutil.move(log.parent / "generations", away)
    shutil.rmtree(prime / "reports")
    root = log.parent.parent

    at = open_page(monkeypatch, root, "pages/trajectory.py", {"run": "grpo-dumps"})
    assert any("has no samples" in i.value for i in at.info) and not at.dataframe
    shutil.move(away, log.parent / "generations")
    at.run()  # the user's next rerun (a click, the auto-refresh)
    assert not at.exception and not any("has no samples" in i.value for i in at.info)
    assert len(at.dataframe) and any("v2-" in str(d.value) or "t1-" in str(d.value) for d in at.dataframe)

    at = open_page(monkeypatch, root, "pages/reports.py", {"run": prime.name})
    assert any("no reports" in i.value for i in at.info)
    (prime / "reports").mkdir()
    (prime / "reports" / "later.md").write_text("# Written later\n\nFindings at step 1.\n")
    at.run()
    assert not at.exception and not any("no reports" in i.value for i in at.info)
    assert any("Findings at [step 1]" in m.value for m in at.markdown)  # the report, rendered
