"""Odd but possible prime-rl run directories (spec sections 2-4, 7) built from a copy of the real
sample in tmp_path and checked through the public API: the run opens and shows, values match what
the files say (the reference reader in conftest), and each bad input is a `Problem` naming the
file (never a traceback). Traces and in-flight files: `test_prime_rl_shapes_traces.py`."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

import rundash_core as rd

from helpers import NEW_METRICS, assert_tidy_matches, reference_file, set_all_mtimes

RESOLVED = "configs/attempt_2/resolved"
LOGS = "logs/attempt_2"


def _lines(run: Path) -> list[bytes]:
    return (run / NEW_METRICS).read_bytes().splitlines(keepends=True)


def _problems(run, path: Path) -> list[str]:
    return [p.what for p in run.problems() if p.path == str(path)]


def _shows(run) -> None:
    """Every view answers (no traceback) on the run."""
    run.overview(), run.overview(), run.metrics(), run.config(), run.configs(), run.logs(), run.samples()
    run.validation(), run.live_samples(), run.problems(), run.attempts(), run.resume_steps()


# metrics.jsonl -------------------------------------------------------------------------------------
ODD_TAILS = {
    "torn last line": (b'{"step": 99, "time": 1.0, "optim/lr": ', None),
    "garbage": (b"garbage {\n", "not JSON"),
    "NaN and Infinity": (b'{"step": 3, "time": 1790236999.0, "x/nan": NaN, "x/inf": Infinity, "producer": "trainer"}\n',
                         "NaN/Infinity"),
    "huge ints": (b'{"step": 4, "time": 1790236999.0, "x/big": 99999999999999999999999, "producer": "trainer"}\n'
                  b'{"step": 123456789012345678901234567890, "time": 1790236999.0}\n', "step is not a whole number"),
    "NUL bytes": (b'\x00\x00{"step": 4, "time": 1790236999.0, "x/nul": 1.5, "producer": "trainer"}\n', "NUL bytes"),
    "bad UTF-8": (b'{"step": 4, "time": 1790236999.0, "x/\xff\xfe": 2.5, "producer": "trainer"}\n', "invalid UTF-8"),
}


@pytest.mark.parametrize("shape", list(ODD_TAILS))
def test_odd_metric_lines_keep_every_good_row_and_name_the_bad(new_run, shape):
    tail, what = ODD_TAILS[shape]
    path = new_run / NEW_METRICS
    path.write_bytes(path.read_bytes() + tail)
    run = rd.open_run(new_run)
    _shows(run)
    assert_tidy_matches(run.metrics(), reference_file(path))
    problems = _problems(run, path)
    assert (what is None and not problems) or any(what in p for p in problems), problems


@pytest.mark.parametrize("shape", ["CR-LF", "no final newline"])
def test_line_ends_do_not_lose_or_double_rows(new_run, shape):
    path = new_run / NEW_METRICS
    data = path.read_bytes()
    path.write_bytes(data.replace(b"\n", b"\r\n") if shape == "CR-LF" else data.rstrip(b"\n"))
    run = rd.open_run(new_run)
    assert_tidy_matches(run.metrics(), reference_file(path))
    assert run.overview().last_step == max(r["step"] for r in map(json.loads, data.splitlines()) if r["step"] is not None)


def test_rows_appended_between_two_calls_show_once(new_run):
    """A growing file (a torn line in between): the second call has the new rows, nothing twice."""
    path = new_run / NEW_METRICS
    lines = _lines(new_run)
    path.write_bytes(b"".join(lines[:90]) + lines[90][:25])
    run = rd.open_run(new_run)
    first, v1 = run.metrics(), run.metrics_version()
    assert_tidy_matches(first, reference_file(path))
    with open(path, "ab") as fh:
        fh.write(lines[90][25:] + b"".join(lines[91:]))
    second = run.metrics()
    assert run.metrics_version() != v1
    assert_tidy_matches(second, reference_file(path))
    assert len(second) > len(first) and not second.duplicated().any()


@pytest.mark.parametrize("shape", ["empty", "missing", "folder", "broken symlink", "FIFO"])
def test_no_metrics_is_a_problem_not_an_error(new_run, shape):
    path = new_run / NEW_METRICS
    path.unlink()
    {"empty": lambda: path.write_bytes(b""), "missing": lambda: None, "folder": path.mkdir,
     "broken symlink": lambda: path.symlink_to("gone.jsonl"), "FIFO": lambda: os.mkfifo(path)}[shape]()
    run = rd.open_run(new_run)
    _shows(run)
    assert run.metrics().empty and run.resume_steps() == []
    assert run.overview().max_steps == 10 and run.overview().model == "Qwen/Qwen3-4B"
    assert _problems(run, path)


@pytest.mark.parametrize("bad_time", [b"Infinity", b"1e300", b"true", b"1" + b"0" * 400])
def test_one_impossible_time_does_not_blank_the_run_times(new_run, bad_time):
    """Bug: the newest row's `time` of Infinity (or 1e300) made `updated` None (no Timestamp holds
    it), and `true` counted as 1970 for `started`."""
    path = new_run / NEW_METRICS
    rows = [json.loads(line) for line in _lines(new_run)]
    newest = max(r["time"] for r in rows)
    path.write_bytes(b'{"step": null, "time": ' + bad_time + b', "x/y": 1}\n' + path.read_bytes()
                     + b'{"step": 8, "time": ' + bad_time + b', "x/y": 1, "producer": "trainer"}\n')
    ov = rd.open_run(new_run).overview()
    assert ov.updated.timestamp() == pytest.approx(newest)
    assert ov.started.timestamp() == pytest.approx(rows[0]["time"])


@pytest.mark.parametrize("where", ["first step", "last step"])
def test_a_long_step_under_inference_rows_keeps_the_step(new_run, where):
    """Bug: over 64 KiB of time-keyed rows before the first training row made the card count
    steps from 1 (`step 8`, not 9); over 1 MiB after the last step row lost the step (None)."""
    path = new_run / NEW_METRICS
    rows = [json.loads(line) for line in _lines(new_run)]
    t = rows[0]["time"] if where == "first step" else max(r["time"] for r in rows)
    filler = b"".join(b'{"step": null, "time": %f, "inference/agg/kv_cache_usage_perc/mean": 0.5, '
                      b'"producer": "orch"}\n' % (t + i * 1e-3) for i in range(1, 20000))
    data = path.read_bytes()
    path.write_bytes(filler + data if where == "first step" else data + filler)
    ov = rd.open_run(new_run).overview()
    assert (ov.step, ov.last_step) == (9, 8)  # steps 0..8 were written
    assert ov.updated.timestamp() == pytest.approx(max(t + 19999e-3, *(r["time"] for r in rows)), abs=1e-3)


# Attempts, resume, fresh copies -----------------------------------------------------------------------
def test_attempts_latest_links_and_resume(new_run):
    run = rd.open_run(new_run)
    assert run.attempts() == [1, 2] and run.overview().attempts == 2
    assert run.resume_steps() == [5]  # attempt 2 went back to step 5 (the metrics say so)
    os.makedirs(new_run / "logs" / "attempt_3")  # a log-only attempt (a standalone process)
    (new_run / "logs" / "attempt_3" / "trainer.log").write_text("x\n")
    assert rd.open_run(new_run).attempts() == [1, 2, 3]
    for folder in ("configs", "logs"):
        (new_run / folder / "latest").unlink()
        (new_run / folder / "latest").symlink_to("attempt_9")  # broken
    run = rd.open_run(new_run)
    _shows(run)
    assert run.latest_attempt() == 2 and "resolved/orchestrator.json" in run.configs()
    assert any("broken symlink" in w for w in _problems(run, new_run / "configs" / "latest"))


def test_a_second_resume_back_to_an_earlier_step(new_run):
    """A third attempt resumed from step 3: a restart point, the rewritten steps' last values."""
    path = new_run / NEW_METRICS
    t = max(json.loads(line)["time"] for line in _lines(new_run))
    with open(path, "ab") as fh:
        for step in (3, 4):
            fh.write(b'{"step": %d, "time": %f, "optim/lr": 0.25, "producer": "trainer"}\n' % (step, t + step))
    run = rd.open_run(new_run)
    assert 3 in run.resume_steps()  # (the trainer's restarts, when it has some: its 5 was the orchestrator's)
    assert_tidy_matches(run.metrics(), reference_file(path))
    lr = run.metrics().query("metric == 'optim/lr' and producer == 'trainer'").set_index("step")["value"]
    assert lr[3] == lr[4] == 0.25


def test_stray_attempt_file_is_not_an_attempt(new_run):
    """Bug: a file named `attempt_7` (not a folder) counted as attempt 7 (RESUMES 3)."""
    (new_run / "configs" / "attempt_7").write_text("not an attempt")
    (new_run / "logs" / "attempt_8").symlink_to("nowhere")
    run = rd.open_run(new_run)
    assert run.attempts() == [1, 2] and run.overview().attempts == 2


def test_a_fresh_copy_keeps_its_values_and_is_not_running(new_run, tmp_path):
    before = rd.open_run(new_run).overview()
    copy = tmp_path / "copy" / new_run.name
    shutil.copytree(new_run, copy, symlinks=True)
    set_all_mtimes(copy, time.time())
    ov = rd.open_run(copy).overview()
    assert (ov.step, ov.last_step, ov.started, ov.updated) == (before.step, before.last_step, before.started,
                                                              before.updated)
    assert ov.status == "stopped"


# Configs ------------------------------------------------------------------------------------------------
CONFIG_SHAPES = {
    "garbage": lambda p: p.write_bytes(b"\x00\xff garbage {"),
    "empty": lambda p: p.write_bytes(b""),
    "folder": lambda p: (p.unlink(), p.mkdir()),
    "broken symlink": lambda p: (p.unlink(), p.symlink_to("gone.json")),
    "FIFO": lambda p: (p.unlink(), os.mkfifo(p)),
    "a list": lambda p: p.write_text("[1, 2, 3]"),
}


@pytest.mark.parametrize("shape", list(CONFIG_SHAPES))
def test_odd_orchestrator_config_is_a_problem(new_run, shape):
    """Bug (folder, list): the file was passed over with no word; the card fell back quietly."""
    path = new_run / RESOLVED / "orchestrator.json"
    CONFIG_SHAPES[shape](path)
    run = rd.open_run(new_run)
    _shows(run)
    assert _problems(run, path), shape
    assert run.overview().max_steps == 10  # trainer.json still says so
    assert "resolved/trainer.json" in run.configs()


# Logs, reports, discovery ------------------------------------------------------------------------------
def test_unreadable_logs_are_problems(new_run):
    """Bug: a broken-link or FIFO log was listed and read as empty, with no problem named."""
    logs = new_run / LOGS
    (logs / "broken.log").symlink_to("nowhere.log")
    os.mkfifo(logs / "fifo.log")
    (logs / "loop").symlink_to(".")
    (logs / "trainer.log").write_bytes(b"\x00\xff\xfe garbage\r\n" * 50 + b"\x1b[31")
    run = rd.open_run(new_run)
    _shows(run)
    listed = set(run.logs()["path"])
    assert {str(logs / "broken.log"), str(logs / "fifo.log")} <= listed
    assert run.read_log([str(logs / "broken.log")]).empty
    assert len(run.read_log([str(logs / "trainer.log")])) == 50
    assert any("broken symlink" in w for w in _problems(run, logs / "broken.log"))
    assert any("not a regular file" in w for w in _problems(run, logs / "fifo.log"))


def test_logs_folder_that_is_a_file(new_run):
    shutil.rmtree(new_run / "logs")
    (new_run / "logs").write_text("x")
    run = rd.open_run(new_run)
    _shows(run)
    assert run.logs().empty and run.overview().step == 9


def test_odd_report_files(new_run):
    reports = new_run / "reports"
    (reports / "bad.md").write_bytes(b"---\ntitle: [unclosed\n---\n\xff\x00 body")
    (reports / "dir.md").mkdir()
    os.mkfifo(reports / "fifo.md")
    (reports / "broken.md").symlink_to("nowhere.md")
    (reports / "list.md").write_text("---\n- a\n---\nbody")
    run = rd.open_run(new_run)
    _shows(run)
    names = set(run.reports()["name"])
    assert {"resume-after-oom", "bad", "list"} <= names and not {"dir", "fifo"} & names


def test_discover_passes_over_odd_children(new_run):
    parent = new_run.parent
    (parent / "stray.txt").write_text("x")
    (parent / "broken").symlink_to("nowhere")
    os.mkfifo(parent / "fifo")
    (parent / ".hidden").mkdir()
    runs = rd.discover([str(parent)])
    assert list(runs["name"]) == [new_run.name]
