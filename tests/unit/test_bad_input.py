"""Damaged run directories: every run still lists, good rows are read, problems are named."""
from __future__ import annotations

import json
import os

import pytest

import rundash_core as rd

from helpers import NEW_METRICS, NEW_RUN, OLD_RUN, assert_tidy_matches, copy_run, make_rl_run, reference_metrics, snapshot

NAME = "bad-env--qwen3-0.6b--0000beef"


def good_rows(n=6, start=0):
    out = []
    for s in range(start, start + n):
        out.append({"step": s, "time": 100.0 + 3 * s, "perf/mfu": 1.0 + s, "optim/lr": 1e-6, "producer": "trainer"})
        out.append({"step": None, "time": 101.0 + 3 * s, "inference/agg/kv/mean": s * 0.1, "producer": "orch"})
        out.append({"step": s, "time": 102.0 + 3 * s, "train/agg/all/agent/reward/mean": s / 10, "time/step": 2.0,
                    "producer": "orch"})
    return out


def lines_bytes(items) -> bytes:
    out = []
    for it in items:
        out.append(it if isinstance(it, bytes) else json.dumps(it).encode())
    return b"\n".join(out) + b"\n"


def run_with_metrics(tmp_path, data: bytes | None):
    run = make_rl_run(tmp_path / "out", NAME, rows=None)
    if data is not None:
        path = run / NEW_METRICS
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return run


def still_lists(run):
    df = rd.discover([run.parent])
    assert list(df["path"]) == [str(run)]
    assert df["error"].isna().all(), df["error"].tolist()
    assert df.at[0, "status"] in ("running", "stopped", "completed", "unknown")
    return df


def one_problem(run, needle):
    probs = run.problems()
    found = [p for p in probs if needle in p.what]
    assert len(found) == 1, [str(p) for p in probs]
    assert str(found[0])  # renders
    return found[0]


def check_lines(tmp_path, items, expected):
    """items: rows and raw byte lines; expected: [(substring of what, count, first line)]."""
    data = lines_bytes(items)
    run_dir = run_with_metrics(tmp_path, data)
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    ref = reference_metrics(data)
    assert ref.stepped and ref.timed
    assert_tidy_matches(run.metrics(), ref)
    for needle, count, line in expected:
        p = one_problem(run, needle)
        assert p.path == str(run_dir / NEW_METRICS)
        assert (p.count, p.line) == (count, line)
    assert len([p for p in run.problems() if p.path.endswith("metrics.jsonl")]) == len(expected)
    return run


# Line-level damage --------------------------------------------------------------------------------
def test_truncated_lines_in_the_middle(tmp_path):
    rows = good_rows()
    items = rows[:4] + [b'{"step": 1, "time": 104.0, "perf/mf'] + rows[4:9] + [b'{"step": 3, "ti'] + rows[9:]
    check_lines(tmp_path, items, [("truncated JSON line", 2, 5)])


def test_truncated_line_glued_to_the_next_row(tmp_path):
    """A writer crashed mid-line and the next attempt appended right after it."""
    rows = good_rows()
    glued = b'{"step": 2, "time": 1' + json.dumps(rows[7]).encode()
    items = rows[:7] + [glued] + rows[8:]
    check_lines(tmp_path, items, [("truncated JSON line", 1, 8)])


def test_garbage_lines(tmp_path):
    rows = good_rows()
    items = [b"Traceback (most recent call last):"] + rows[:5] + [b"}{", b"  \x1b[31mERROR\x1b[0m"] + rows[5:]
    check_lines(tmp_path, items, [("not JSON", 3, 1)])


def test_nan_and_infinity_tokens(tmp_path):
    rows = good_rows()
    items = rows[:3] + [b'{"step": 1, "time": 103.5, "perf/mfu": NaN, "optim/grad_norm": Infinity, "producer": "trainer"}'] \
        + rows[3:6] + [b'{"step": 2, "time": 106.5, "loss/mean": -Infinity, "producer": "trainer"}'] + rows[6:]
    run = check_lines(tmp_path, items, [("NaN/Infinity", 2, 4)])
    frame = run.metrics()
    s1 = frame[(frame.producer == "trainer") & (frame.step == 1)].set_index("metric")["value"]
    assert s1["perf/mfu"] == 2.0  # NaN is a gap: the earlier value stays
    assert s1["optim/grad_norm"] == float("inf")
    s2 = frame[(frame.producer == "trainer") & (frame.step == 2)].set_index("metric")["value"]
    assert s2["loss/mean"] == float("-inf")


def test_bad_utf8(tmp_path):
    rows = good_rows()
    items = rows[:5] + [b'{"step": 1, "time": 104.5, "perf/caf\xe9": 3.0, "producer": "trainer"}'] + rows[5:]
    run = check_lines(tmp_path, items, [("invalid UTF-8", 1, 6)])
    metrics = set(map(str, run.metrics()["metric"]))
    assert "perf/caf\ufffd" in metrics


def test_bad_utf8_in_producer(tmp_path):
    rows = good_rows()
    items = rows[:2] + [b'{"step": 0, "time": 100.5, "perf/x": 3.0, "producer": "tr\xffiner"}'] + rows[2:]
    check_lines(tmp_path, items, [("invalid UTF-8", 1, 3)])


def test_nul_bytes(tmp_path):
    rows = good_rows()
    # a crash left a run of NUL bytes (preallocated blocks); the next writer appended after them
    items = rows[:6] + [b"\x00" * 300 + json.dumps(rows[6]).encode(), b"\x00" * 50] + rows[7:]
    check_lines(tmp_path, items, [("NUL bytes", 2, 7)])


def test_non_object_json_lines(tmp_path):
    rows = good_rows()
    items = rows[:2] + [b"[1, 2, 3]", b"42"] + rows[2:8] + [b"null", b'"a string"'] + rows[8:]
    check_lines(tmp_path, items, [("not a JSON object", 4, 3)])


def test_string_value_for_a_metric_key(tmp_path):
    rows = good_rows()
    bad = dict(rows[3], **{"perf/mfu": "n/a"})
    items = rows[:3] + [bad] + rows[4:]
    run = check_lines(tmp_path, items, [("'perf/mfu'", 1, 4)])
    frame = run.metrics()
    # the bad row's other keys are kept; its step keeps the value from other rows only
    assert frame[(frame.producer == "trainer") & (frame.step == 1)].set_index("metric").at["optim/lr", "value"] == 1e-6


def test_string_only_metric_key(tmp_path):
    rows = good_rows()
    rows[0]["note"] = "warmup"
    data = lines_bytes(rows)
    run_dir = run_with_metrics(tmp_path, data)
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    assert_tidy_matches(run.metrics(), reference_metrics(data))
    assert "note" in one_problem(run, "'note'").what


def test_many_problems_in_the_sample(tmp_path):
    run_dir = copy_run(NEW_RUN, tmp_path / "out")
    path = run_dir / NEW_METRICS
    lines = path.read_bytes().splitlines()
    lines[50] = lines[50][:40]
    lines.insert(100, b"\x00\x00\x00")
    lines.insert(120, b"not json at all")
    lines.insert(150, lines[149][:-30])
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(data)
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    assert_tidy_matches(run.metrics(), reference_metrics(data))
    p = one_problem(run, "truncated JSON line")
    assert (p.count, p.line) == (2, 51)
    assert one_problem(run, "not JSON").line == 121


# File-level damage --------------------------------------------------------------------------------
def test_empty_metrics_file(tmp_path):
    run_dir = run_with_metrics(tmp_path, b"")
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    frame = run.metrics()
    assert len(frame) == 0
    assert list(frame.columns) == ["step", "time", "metric", "value", "producer"]
    assert frame["step"].dtype == "Int64" and frame["value"].dtype == "float64"
    p = one_problem(run, "empty")
    assert p.path == str(run_dir / NEW_METRICS)
    assert run.overview().step is None
    assert len(run.metrics_wide()) == 0


def test_missing_metrics_file(tmp_path):
    run_dir = run_with_metrics(tmp_path, None)
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    assert len(run.metrics()) == 0
    p = one_problem(run, "missing")
    assert p.path == str(run_dir / NEW_METRICS)
    ov = run.overview()
    assert ov.step is None and ov.max_steps == 10 and ov.model == "Qwen/Qwen3-0.6B"


def _metrics_is_a_directory(folder):
    (folder / "metrics.jsonl").mkdir()


def _metrics_symlink_loop(folder):
    os.symlink("other.jsonl", folder / "metrics.jsonl")
    os.symlink("metrics.jsonl", folder / "other.jsonl")


def _metrics_broken_symlink(folder):
    os.symlink("/nonexistent/metrics.jsonl", folder / "metrics.jsonl")


@pytest.mark.parametrize("make,what", [(_metrics_is_a_directory, "not a regular file"),
                                       (_metrics_symlink_loop, "loop"),
                                       (_metrics_broken_symlink, "broken symlink")])
def test_unreadable_metrics_path_is_a_problem_not_a_crash(tmp_path, make, what):
    run_dir = run_with_metrics(tmp_path, None)
    folder = run_dir / "monitors" / "file"
    folder.mkdir(parents=True)
    make(folder)
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    assert len(run.metrics()) == 0
    p = one_problem(run, what)
    assert p.path == str(run_dir / NEW_METRICS)


def test_metrics_symlink_to_good_file_is_read(tmp_path):
    run_dir = run_with_metrics(tmp_path, None)
    data = lines_bytes(good_rows())
    (tmp_path / "elsewhere.jsonl").write_bytes(data)
    (run_dir / "monitors" / "file").mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere.jsonl", run_dir / NEW_METRICS)
    assert_tidy_matches(rd.open_run(run_dir).metrics(), reference_metrics(data))
    assert rd.open_run(run_dir).problems() == []


def test_invalid_json_config(tmp_path):
    data = lines_bytes(good_rows())
    run_dir = run_with_metrics(tmp_path, data)
    bad = run_dir / "configs" / "attempt_1" / "resolved" / "orchestrator.json"
    bad.write_text('{"model": {"name": "Qwen/Qwen3-0.6B"}, "max_steps": 10,')
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    assert_tidy_matches(run.metrics(), reference_metrics(data))
    p = one_problem(run, "invalid JSON")
    assert p.path == str(bad)
    assert run.configs()["resolved/orchestrator.json"] == bad.read_text()  # shown as text
    ov = run.overview()
    assert ov.max_steps == 10 and ov.model == "Qwen/Qwen3-0.6B"  # from trainer.json
    assert ov.train_envs == ["bad-env"]  # from the run name


def test_invalid_toml_and_unreadable_config_entries(tmp_path):
    run_dir = run_with_metrics(tmp_path, lines_bytes(good_rows()))
    attempt = run_dir / "configs" / "attempt_1"
    (attempt / "rl.toml").write_text("[model\nname = 1\n")
    os.symlink("nowhere.json", attempt / "resolved" / "broken.json")
    still_lists(run_dir)
    run = rd.open_run(run_dir)
    assert one_problem(run, "invalid TOML").path == str(attempt / "rl.toml")
    assert one_problem(run, "broken symlink").path == str(attempt / "resolved" / "broken.json")
    assert run.overview().model == "Qwen/Qwen3-0.6B"


def test_samples_have_no_problems():
    assert rd.open_run(NEW_RUN).problems() == []
    assert rd.open_run(OLD_RUN).problems() == []


# Read-only ----------------------------------------------------------------------------------------
def _exercise(run_dir):
    rd.discover([run_dir.parent])
    run = rd.open_run(run_dir)
    run.metrics()
    run.metrics_wide()
    run.overview()
    run.problems()
    run.configs()
    run.config()
    run.attempts()
    run.latest_attempt()


@pytest.mark.parametrize("case", ["new", "old", "damaged", "empty", "dir", "loop"])
def test_rundash_never_writes_inside_the_run_dir(tmp_path, case):
    if case == "new":
        run_dir = copy_run(NEW_RUN, tmp_path / "out")
    elif case == "old":
        run_dir = copy_run(OLD_RUN, tmp_path / "out")
    elif case == "damaged":
        run_dir = run_with_metrics(tmp_path, lines_bytes(good_rows()[:4] + [b"\x00{bad", b"null"] + good_rows()[4:]))
        (run_dir / "configs" / "attempt_1" / "resolved" / "trainer.json").write_text("{")
    elif case == "empty":
        run_dir = run_with_metrics(tmp_path, b"")
    elif case == "dir":
        run_dir = run_with_metrics(tmp_path, None)
        (run_dir / NEW_METRICS).mkdir(parents=True)
    else:
        run_dir = run_with_metrics(tmp_path, None)
        (run_dir / "monitors" / "file").mkdir(parents=True)
        os.symlink("metrics.jsonl", run_dir / NEW_METRICS)
    before = snapshot(tmp_path)
    _exercise(run_dir)
    assert snapshot(tmp_path) == before
    # and once more after the files grew, so the incremental path runs too
    if (run_dir / NEW_METRICS).is_file():
        with open(run_dir / NEW_METRICS, "ab") as fh:
            fh.write(b'{"step": 50, "time": 1.0, "perf/mfu": 1.0, "producer": "trainer"}\n')
        before = snapshot(tmp_path)
        _exercise(run_dir)
    assert snapshot(tmp_path) == before


def test_problems_accumulate_as_bad_lines_are_appended(tmp_path):
    rows = good_rows(8)
    data = lines_bytes(rows[:6])
    run_dir = run_with_metrics(tmp_path, data)
    run = rd.open_run(run_dir)
    run.metrics()
    assert run.problems() == []
    path = run_dir / NEW_METRICS
    with open(path, "ab") as fh:
        fh.write(lines_bytes([b"{oops", rows[6], b"{again", rows[7]]))
    assert_tidy_matches(run.metrics(), reference_metrics(path.read_bytes()))
    p = one_problem(run, "truncated JSON line")
    assert (p.count, p.line) == (2, 7)
