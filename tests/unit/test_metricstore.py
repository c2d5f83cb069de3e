"""MetricStore: merge rule, time-keyed rows, legacy producers, incremental refresh."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np

import rundash_core as rd
from rundash_core.metrics.store import MetricStore

from helpers import NEW_METRICS, NEW_RUN, assert_tidy_matches, reference_file, reference_metrics, write_lines


def store_for(path) -> MetricStore:
    s = MetricStore(str(path))
    s.refresh()
    return s


def test_merge_rule_last_value_wins_per_producer_step(tmp_path):
    p = tmp_path / "m.jsonl"
    rows = [
        {"step": 1, "time": 10.0, "a": 1.0, "b": 2.0, "producer": "trainer"},
        {"step": 1, "time": 11.0, "a": 5.0, "producer": "orch"},
        {"step": 1, "time": 12.0, "a": 3.0, "c": 7, "producer": "trainer"},
        {"step": 2, "time": 13.0, "a": 4.0, "producer": "trainer"},
        {"step": 1, "time": 9.0, "b": 8.0, "producer": "trainer"},  # earlier time, later in the file
        {"step": None, "time": 14.0, "inference/x": 1.0, "producer": "orch"},
        {"step": None, "time": 15.0, "inference/x": 2.0, "producer": "orch"},
    ]
    data = write_lines(p, rows)
    store = store_for(p)
    tidy = store.tidy()
    assert_tidy_matches(tidy, reference_metrics(data))
    t1 = store.wide("trainer").set_index("step")
    assert (t1.at[1, "a"], t1.at[1, "b"], t1.at[1, "c"]) == (3.0, 8.0, 7.0)
    assert (t1.at[1, "time"], t1.at[1, "time_first"]) == (12.0, 9.0)
    assert store.wide("orch").set_index("step").at[1, "a"] == 5.0
    timed = tidy[tidy.step.isna()]
    assert list(timed["time"]) == [14.0, 15.0] and list(timed["value"]) == [1.0, 2.0]
    assert store.max_step() == 2
    assert (store.first_time, store.last_time) == (10.0, 15.0)


def test_restart_points_recorded(tmp_path):
    p = tmp_path / "m.jsonl"
    steps = [0, 1, 2, 3, 2, 3, 4, 5]
    write_lines(p, [{"step": s, "time": float(i), "x": float(i), "producer": "trainer"} for i, s in enumerate(steps)])
    store = store_for(p)
    assert store.restarts == [("trainer", 2)]
    assert store.wide("trainer").set_index("step").at[3, "x"] == 5.0


def test_legacy_producer_rules(tmp_path):
    p = tmp_path / "m.jsonl"
    rows = [
        {"step": 0, "time": 1.0, "perf/mfu": 1.0},                          # rule 2
        {"step": 0, "time": 2.0, "train/agg/all/agent/reward/mean": 0.5},   # rule 3
        {"step": 0, "time": 3.0, "progress/tokens": 100},                   # rule 4
        {"step": 0, "time": 4.0, "time/step": 9.0},                         # rule 5
        {"step": 0, "time": 5.0, "loss/mean": 0.1, "progress/tokens": 7},   # rule 2 before 4
        {"step": 0, "time": 6.0, "eval/gsm8k/avg@1": 0.3, "batch/x": 1.0},  # rule 3
        {"step": 0, "time": 7.0, "max_vio/mean": 0.2},                      # rule 2
        {"step": None, "time": 8.0, "inference/agg/x": 1.0},                # time-keyed
        {"step": 1, "time": 9.0, "time/step": 3.0, "off_policy/mean": 0.0},  # rule 3 (time/step goes with it)
    ]
    data = write_lines(p, rows)
    store = store_for(p)
    assert_tidy_matches(store.tidy(), reference_metrics(data))
    tr = store.wide("trainer").set_index("step")
    orch = store.wide("orch").set_index("step")
    assert tr.at[0, "progress/tokens"] == 7 and orch.at[0, "progress/tokens"] == 100
    assert tr.at[0, "time/step"] == 9.0 and orch.at[1, "time/step"] == 3.0
    assert {"perf/mfu", "max_vio/mean", "loss/mean"} <= set(tr.columns)
    assert {"train/agg/all/agent/reward/mean", "eval/gsm8k/avg@1", "batch/x"} <= set(orch.columns)


def test_timestamp_instead_of_time_and_float_step(tmp_path):
    p = tmp_path / "m.jsonl"
    data = write_lines(p, [{"step": 3, "_timestamp": 50.0, "perf/mfu": 2.0, "producer": "trainer"},
                           {"step": 4.0, "_timestamp": 51.0, "perf/mfu": 3.0, "producer": "trainer"}])
    store = store_for(p)
    assert_tidy_matches(store.tidy(), reference_metrics(data))
    assert store.first_time == 50.0 and store.max_step() == 4


def test_non_numeric_column_ignored(tmp_path):
    p = tmp_path / "m.jsonl"
    data = write_lines(p, [{"step": 0, "time": 1.0, "a": 1.0, "note": "hi", "producer": "trainer"},
                           {"step": 1, "time": 2.0, "a": 2.0, "note": "ho", "producer": "trainer"}])
    store = store_for(p)
    assert_tidy_matches(store.tidy(), reference_metrics(data))
    assert "note" in store.ignored_columns


def test_refresh_nothing_new_keeps_version_and_frame(tmp_path):
    p = tmp_path / "m.jsonl"
    write_lines(p, [{"step": 0, "time": 1.0, "a": 1.0, "producer": "trainer"}])
    store = store_for(p)
    v = store.version
    first = store.tidy()
    assert store.refresh() is False
    assert store.version == v
    assert first.equals(store.tidy())


# Incremental refresh ------------------------------------------------------------------------------
def test_refresh_parses_only_appended_bytes_and_matches_whole_file(new_run, parsed):
    path = new_run / NEW_METRICS
    run = rd.open_run(new_run)
    assert_tidy_matches(run.metrics(), reference_file(path))
    size0 = path.stat().st_size
    assert parsed and sum(len(b) for b in parsed) == size0
    n0 = len(parsed)
    added = write_lines(path, [
        {"step": 9, "time": 1_790_238_300.0, "time/step": 30.0, "train/agg/effective/agent/reward/mean": 0.5,
         "producer": "orch"},
        {"step": None, "time": 1_790_238_301.0, "inference/agg/num_requests_running/mean": 3.0, "producer": "orch"},
        {"step": 9, "time": 1_790_238_302.0, "time/step": 12.0, "optim/lr": 1e-6, "producer": "trainer"},
    ], mode="a")
    frame = rd.open_run(new_run).metrics()  # a new Run object shares the cached store
    assert parsed[n0:] == [added]
    store = rd.open_run(new_run).store()
    assert store.tail.offset == size0 + len(added)
    assert_tidy_matches(frame, reference_file(path))
    assert rd.open_run(new_run).overview().last_step == 9


def test_refresh_after_appending_to_existing_step_merges(new_run, parsed):
    path = new_run / NEW_METRICS
    run = rd.open_run(new_run)
    before = run.metrics()
    old = before[(before.producer == "trainer") & (before.step == 8)]
    assert len(old) > 3
    key = str(old["metric"].iloc[0])
    added = write_lines(path, [{"step": 8, "time": 1_790_238_999.0, key: -1.5, "new/key": 2.5,
                                "producer": "trainer"}], mode="a")
    after = run.metrics()
    assert parsed[-1] == added
    got = after[(after.producer == "trainer") & (after.step == 8)]
    assert len(got) == len(old) + 1
    vals = dict(zip(got["metric"].astype(str), got["value"]))
    assert vals[key] == -1.5 and vals["new/key"] == 2.5
    times = dict(zip(got["metric"].astype(str), got["time"]))
    assert times[key] == times["new/key"] == 1_790_238_999.0  # a value's time is when it was written
    old_times = dict(zip(old["metric"].astype(str), old["time"]))
    assert all(times[m] == t for m, t in old_times.items() if m != key)
    wide = run.metrics_wide(producer="trainer").set_index("step")
    assert wide.at[8, "time"] == 1_790_238_999.0  # the step's time is the last write
    assert_tidy_matches(after, reference_file(path))
    # the other producer's step 8 is untouched
    assert after[(after.producer == "orch") & (after.step == 8)]["value"].tolist() == \
        before[(before.producer == "orch") & (before.step == 8)]["value"].tolist()


def test_partial_line_held_back_in_run(new_run):
    path = new_run / NEW_METRICS
    run = rd.open_run(new_run)
    n = len(run.metrics())
    line = json.dumps({"step": 9, "time": 1_790_238_400.0, "optim/lr": 3e-6, "producer": "trainer"}) + "\n"
    with open(path, "a") as fh:
        fh.write(line[:25])
    assert len(run.metrics()) == n
    assert run.problems() == []  # a line being written is not a problem
    with open(path, "a") as fh:
        fh.write(line[25:])
    frame = run.metrics()
    assert len(frame) == n + 1
    assert_tidy_matches(frame, reference_file(path))


def test_replaced_metrics_file_is_reread(new_run, tmp_path):
    path = new_run / NEW_METRICS
    run = rd.open_run(new_run)
    run.metrics()
    smaller = tmp_path / "smaller.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)[:40]
    smaller.write_bytes(b"".join(lines))
    os.replace(smaller, path)
    frame = run.metrics()
    assert_tidy_matches(frame, reference_file(path))
    assert run.overview().last_step == reference_file(path).max_step()


def test_rewritten_in_place_by_a_new_writer_longer_than_before(new_run):
    """Same inode, truncated and rewritten with other rows past the old size: not an append."""
    path = new_run / NEW_METRICS
    run = rd.open_run(new_run)
    run.metrics()
    data = path.read_bytes()
    ino = path.stat().st_ino
    rows = [{"step": i // 3, "time": 100.0 + i, f"perf/k{i % 3}": i * 0.25, "producer": "trainex"}
            for i in range(len(data) // 40)]
    other = write_lines(path, rows)  # open(..., "wb"): O_TRUNC, same inode
    assert path.stat().st_ino == ino and len(other) > len(data)
    frame = run.metrics()
    assert set(map(str, frame["producer"].unique())) == {"trainex"}
    assert_tidy_matches(frame, reference_metrics(other))


def test_metrics_file_deleted_and_recreated(new_run):
    path = new_run / NEW_METRICS
    run = rd.open_run(new_run)
    run.metrics()
    path.unlink()
    data = write_lines(path, [{"step": 0, "time": 5.0, "optim/lr": 1.0, "producer": "trainer"}])
    frame = run.metrics()
    assert_tidy_matches(frame, reference_metrics(data))


def test_sample_metrics_read_line_by_line_equal_cold_read(new_run, parsed):
    """Feeding the sample in arbitrary chunks (as a live writer would) gives the cold result."""
    src = (NEW_RUN / NEW_METRICS).read_bytes()
    path = new_run / NEW_METRICS
    path.write_bytes(b"")
    run = rd.open_run(new_run)
    run.metrics()
    rng = np.random.default_rng(1)
    pos = 0
    while pos < len(src):
        step = int(rng.integers(1, 20_000))
        with open(path, "ab") as fh:
            fh.write(src[pos:pos + step])
        pos += step
        run.metrics()
    assert sum(len(b) for b in parsed) == len(src)
    assert_tidy_matches(run.metrics(), reference_metrics(src))
    assert rd.open_run(new_run).store().restarts  # the resume was seen while tailing


def test_copy_of_sample_has_same_metrics_as_original(tmp_path):
    dest = tmp_path / "copy"
    shutil.copytree(NEW_RUN, dest)
    a = rd.open_run(NEW_RUN).metrics()
    b = rd.open_run(dest).metrics()
    assert a.equals(b)
