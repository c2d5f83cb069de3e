"""prime-rl runs: metrics against the independent reading, overview, attempts, layouts, configs."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rundash_core as rd

from helpers import (
    NEW_METRICS,
    NEW_RUN,
    OLD_METRICS,
    OLD_RUN,
    assert_tidy_matches,
    copy_run,
    make_rl_run,
    reference_file,
    set_all_mtimes,
    write_lines,
)


# Metrics on the samples ---------------------------------------------------------------------------
@pytest.mark.parametrize("run_dir, rel", [(NEW_RUN, NEW_METRICS), (OLD_RUN, OLD_METRICS)], ids=["new", "old"])
def test_sample_metrics_equal_independent_parse(run_dir, rel):
    frame = rd.open_run(run_dir).metrics()
    ref = reference_file(run_dir / rel)
    assert ref.stepped and ref.timed  # the samples have both kinds of rows
    assert_tidy_matches(frame, ref)


@pytest.mark.parametrize("run_dir", [NEW_RUN, OLD_RUN], ids=["new", "old"])
def test_metrics_dtypes(run_dir):
    frame = rd.open_run(run_dir).metrics()
    assert list(frame.columns) == ["step", "time", "metric", "value", "producer"]
    assert frame["step"].dtype == "Int64"
    assert frame["time"].dtype == np.float64
    assert frame["value"].dtype == np.float64
    assert all(isinstance(m, str) for m in frame["metric"].unique())
    assert set(map(str, frame["producer"].unique())) == {"trainer", "orch"}


def test_metrics_one_row_per_producer_step_metric():
    frame = rd.open_run(NEW_RUN).metrics()
    stepped = frame[frame["step"].notna()]
    assert not stepped.duplicated(["producer", "step", "metric"]).any()


def test_trainer_and_orch_time_step_are_separate_series():
    frame = rd.open_run(NEW_RUN).metrics()
    ref = reference_file(NEW_RUN / NEW_METRICS)
    ts = frame[frame["metric"] == "time/step"]
    for producer in ("trainer", "orch"):
        got = ts[ts["producer"] == producer]
        want = {s: v["time/step"] for (p, s), v in ref.stepped.items() if p == producer and "time/step" in v}
        assert len(want) >= 5
        assert dict(zip(got["step"].astype(int), got["value"])) == want
    # and the two producers really disagree somewhere (they are different quantities)
    tr = dict(zip(ts[ts.producer == "trainer"]["step"], ts[ts.producer == "trainer"]["value"]))
    orch = dict(zip(ts[ts.producer == "orch"]["step"], ts[ts.producer == "orch"]["value"]))
    assert any(tr[s] != orch[s] for s in set(tr) & set(orch))


def test_step_null_rows_keep_their_time():
    frame = rd.open_run(NEW_RUN).metrics()
    timed = frame[frame["step"].isna()]
    ref = reference_file(NEW_RUN / NEW_METRICS)
    assert len(ref.timed) > 100
    assert sorted(timed["time"].unique()) == sorted({t for _p, t, vals in ref.timed if vals})
    assert timed["time"].notna().all()
    assert set(map(str, timed["producer"].unique())) == {"orch"}
    assert timed["metric"].astype(str).str.match(r"^(inference|dispatcher|concurrency|watcher|event_loop_lag)/").all()


def test_resumed_steps_merged_last_value_wins():
    path = NEW_RUN / NEW_METRICS
    rows = [json.loads(line) for line in path.read_bytes().splitlines()]
    trainer5 = [r for r in rows if r["step"] == 5 and r["producer"] == "trainer"]
    assert len(trainer5) == 10  # written by attempt 1 and again by attempt 2
    frame = rd.open_run(NEW_RUN).metrics()
    got = frame[(frame.producer == "trainer") & (frame.step == 5)]
    keys = {k for r in trainer5 for k in r} - {"step", "time", "producer"}
    assert set(got["metric"].astype(str)) == keys
    for k, v in zip(got["metric"].astype(str), got["value"]):
        last = [r[k] for r in trainer5 if k in r][-1]
        assert v == last
    # at least one key changed between the attempts, so "last wins" is really tested
    firsts = {k: [r[k] for r in trainer5 if k in r][0] for k in keys}
    assert any(firsts[k] != v for k, v in zip(got["metric"].astype(str), got["value"]))
    for k, t in zip(got["metric"].astype(str), got["time"]):  # each value's time: its last write
        assert t == [r["time"] for r in trainer5 if k in r][-1]
    assert got["time"].max() == max(r["time"] for r in trainer5)


def test_old_layout_producers_inferred():
    """Legacy rows have no producer: rule 4.6 splits them into trainer and orch."""
    frame = rd.open_run(OLD_RUN).metrics()
    by = frame[frame.step.notna()].groupby(frame["producer"].astype(str))["metric"].agg(lambda s: set(map(str, s)))
    assert "train/agg/all/agent/reward/mean" in by["orch"]
    assert "perf/throughput" in by["trainer"] and "optim/lr" in by["trainer"]
    # a row holding only time/* keys falls through to rule 5 (trainer); the orch row also has time/step
    assert "time/forward_backward" in by["trainer"]
    assert "time/step" in by["trainer"] and "time/step" in by["orch"]


# metrics_wide -------------------------------------------------------------------------------------
@pytest.mark.parametrize("run_dir, rel", [(NEW_RUN, NEW_METRICS), (OLD_RUN, OLD_METRICS)], ids=["new", "old"])
def test_metrics_wide_one_row_per_step(run_dir, rel):
    wide = rd.open_run(run_dir).metrics_wide()
    ref = reference_file(run_dir / rel)
    steps = sorted({s for _p, s in ref.stepped})
    assert wide["step"].dtype == "Int64"
    assert list(wide["step"]) == steps
    keys = ref.producer_keys()
    shared = keys["trainer"] & keys["orch"]
    assert "time/step" in shared
    assert "trainer:time/step" in wide.columns and "orch:time/step" in wide.columns
    assert "time/step" not in wide.columns
    expected_cols = {f"{p}:{k}" if k in shared else k for p, ks in keys.items() for k in ks}
    assert set(wide.columns) - {"step", "time"} == expected_cols
    w = wide.set_index("step")
    for (p, s), vals in ref.stepped.items():
        for k, v in vals.items():
            col = f"{p}:{k}" if k in shared else k
            assert w.at[s, col] == v, (p, s, k)
    for s in steps:
        assert w.at[s, "time"] == max(t for (p, st), t in ref.step_time.items() if st == s)


def test_metrics_wide_filters():
    run = rd.open_run(NEW_RUN)
    ref = reference_file(NEW_RUN / NEW_METRICS)
    trainer = run.metrics_wide(producer="trainer")
    assert list(trainer["step"]) == sorted(s for p, s in ref.stepped if p == "trainer")
    assert "optim/lr" in trainer.columns
    # column names do not depend on the filter: time/step is logged by two producers
    assert "trainer:time/step" in trainer.columns and "time/step" not in trainer.columns
    assert not any("train/agg" in c for c in trainer.columns)

    orch_ts = run.metrics_wide(metrics=["orch:time/step"])
    assert "orch:time/step" in orch_ts.columns
    got = orch_ts.dropna(subset=["orch:time/step"]).set_index("step")["orch:time/step"].to_dict()
    assert got == {s: v["time/step"] for (p, s), v in ref.stepped.items() if p == "orch" and "time/step" in v}

    both = run.metrics_wide(metrics=["trainer:time/step", "orch:time/step", "optim/lr"])
    assert {"trainer:time/step", "orch:time/step", "optim/lr"} <= set(both.columns)


def test_metrics_returns_independent_frames(new_run):
    """Changing a returned frame must not change what the next call returns."""
    run = rd.open_run(new_run)
    first = run.metrics()
    n = len(first)
    v0 = first["value"].iloc[0]
    first["extra"] = 1
    first.loc[first.index[0], "value"] = v0 + 12345.0
    again = rd.open_run(new_run).metrics()
    assert len(again) == n and "extra" not in again.columns
    assert again["value"].iloc[0] == v0


# Overview -----------------------------------------------------------------------------------------
def _last_time(path) -> float:
    return max(r["time"] for r in map(json.loads, Path(path).read_text().splitlines()) if isinstance(r.get("time"), float))


def test_overview_new_sample_fields(new_run):
    ref = reference_file(new_run / NEW_METRICS)
    set_all_mtimes(new_run, 1_800_000_000.0)
    ov = rd.open_run(new_run).overview(now=1_800_000_000.0 + 1000)
    assert isinstance(ov, rd.Overview)
    assert ov.status == "stopped"  # 9 of 10 steps done (0..8) and quiet for 1000 s
    assert ov.last_step == ref.max_step() == 8 and ov.step == 9
    assert ov.max_steps == 10
    assert ov.model == "Qwen/Qwen3-4B"
    assert ov.attempts == 2
    assert ov.train_envs == ["math-python", "wiki-search"]
    assert ov.eval_envs == ["gsm8k"]
    assert ov.flavor == "rl"
    # times from the data, not the files (set to 2027 above): a copy reads the same
    assert ov.started == ov.created == pd.Timestamp(ref.first_row_time, unit="s", tz="UTC")
    assert ov.updated == pd.Timestamp(_last_time(new_run / NEW_METRICS), unit="s", tz="UTC")
    assert ov.touched == pd.Timestamp(1_800_000_000.0, unit="s", tz="UTC")
    assert ov.duration_s == pytest.approx(_last_time(new_run / NEW_METRICS) - ref.first_row_time)
    for ts in (ov.started, ov.updated, ov.created):
        assert str(ts.tz) == "UTC"


def test_overview_old_sample_fields(old_run):
    ref = reference_file(old_run / OLD_METRICS)
    ov = rd.open_run(old_run).overview(now=os.stat(old_run / OLD_METRICS).st_mtime + 10_000)
    assert ov.last_step == ref.max_step() == 2 and ov.step == 3  # steps 0..2 of 3: "3 of 3"
    assert ov.max_steps == 3 and ov.status == "completed"
    assert ov.model == "Qwen/Qwen3-0.6B"
    assert ov.attempts == 1
    assert ov.train_envs == ["reverse-text"] and ov.eval_envs == ["reverse-text"]
    assert ov.started == pd.Timestamp(ref.first_row_time, unit="s", tz="UTC")


@pytest.mark.parametrize("age, expected", [(0, "running"), (179, "running"), (181, "stopped"), (86400, "stopped")])
def test_status_rule_running_window(new_run, age, expected):
    t = _last_time(new_run / NEW_METRICS) + 30  # files written just after the last row
    set_all_mtimes(new_run, t)
    assert rd.open_run(new_run).overview(now=t + age).status == expected


def test_status_running_follows_latest_file(new_run):
    t = _last_time(new_run / NEW_METRICS) + 30
    set_all_mtimes(new_run, t)
    # only the latest attempt's logs count towards `updated`
    os.utime(new_run / "logs" / "attempt_1" / "trainer.log", (t + 5000, t + 5000))
    run = rd.open_run(new_run)
    assert run.overview(now=t + 5010).status == "stopped"
    os.utime(new_run / "logs" / "attempt_2" / "orchestrator.log", (t + 5000, t + 5000))
    ov = run.overview(now=t + 5010)
    assert ov.status == "running"
    assert ov.touched == pd.Timestamp(t + 5000, unit="s", tz="UTC")
    assert ov.duration_s == pytest.approx(t + 5010 - reference_file(new_run / NEW_METRICS).first_row_time)  # ticks


def test_a_copy_with_fresh_file_times_reads_the_same(tmp_path, new_run):
    """Duration, created and updated come from the data: a copy made today (fresh mtimes) gives the
    same numbers, and is not 'running' just because its files are new."""
    set_all_mtimes(new_run, _last_time(new_run / NEW_METRICS) + 30)  # as the writer left it
    ref = rd.open_run(new_run).overview()
    copy = copy_run(new_run, tmp_path / "copied")
    set_all_mtimes(copy, time.time())
    ov = rd.open_run(copy).overview()
    assert (ov.duration_s, ov.created, ov.updated, ov.started) == (ref.duration_s, ref.created, ref.updated, ref.started)
    assert ov.status == ref.status == "stopped" and ov.duration_s < 86400


def test_status_completed_when_step_reaches_max_steps(new_run):
    path = new_run / NEW_METRICS
    write_lines(path, [{"step": 10, "time": 1_790_238_300.0, "optim/lr": 1e-6, "producer": "trainer"}], mode="a")
    t = 1_800_000_000.0
    set_all_mtimes(new_run, t)
    run = rd.open_run(new_run)
    assert run.overview(now=1_790_238_300.0 + 10).status == "running"  # fresh files win over the step count
    ov = run.overview(now=t + 1000)
    assert (ov.last_step, ov.max_steps, ov.status) == (10, 10, "completed")


@pytest.mark.parametrize("first, last, expected", [
    (0, 9, "completed"),   # steps 0..9 are the 10 steps of max_steps 10 (real prime-rl output)
    (0, 8, "stopped"),
    (1, 9, "stopped"),     # counted from 1, step 9 leaves one to go
    (1, 10, "completed"),
])
def test_completion_counts_steps_from_the_first_logged_step(tmp_path, first, last, expected):
    run_dir = tmp_path / "r--qwen3-4b--0badc0de"
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "orchestrator.json").write_text('{"max_steps": 10, "model": {"name": "m"}}')
    rows = [{"step": s, "time": 1_700_000_000.0 + s, "loss/mean": 0.1, "producer": "trainer"}
            for s in range(first, last + 1)]
    write_lines(run_dir / "metrics.jsonl", rows)
    set_all_mtimes(run_dir, 1_700_000_100.0)
    now = 1_700_100_000.0
    assert rd.open_run(run_dir).overview(now=now).status == expected
    assert rd.discover([tmp_path], now=now).loc[0, "status"] == expected


def test_status_unknown_without_anything(tmp_path):
    run_dir = tmp_path / "empty-run"
    (run_dir / "configs").mkdir(parents=True)
    ov = rd.open_run(run_dir).overview(now=os.stat(run_dir).st_mtime + 10_000)
    assert ov.status == "unknown"  # nothing to date it and no step
    assert ov.step is None and ov.max_steps is None


# Attempts and `latest` ----------------------------------------------------------------------------
def test_attempts_and_plain_file_latest():
    run = rd.open_run(NEW_RUN)
    assert (NEW_RUN / "configs" / "latest").is_file() and not (NEW_RUN / "configs" / "latest").is_symlink()
    assert run.attempts() == [1, 2]
    assert run.latest_attempt() == 2
    assert "--resume" in run.configs()["command.txt"]


def test_latest_plain_file_pointing_at_older_attempt(new_run):
    (new_run / "configs" / "latest").write_text("attempt_1\n")
    run = rd.open_run(new_run)
    assert run.latest_attempt() == 1
    assert "--resume" not in run.configs()["command.txt"]


def test_latest_real_relative_symlink(new_run):
    for sub in ("configs", "logs"):
        (new_run / sub / "latest").unlink()
        os.symlink("attempt_1", new_run / sub / "latest")
    run = rd.open_run(new_run)
    assert os.readlink(new_run / "configs" / "latest") == "attempt_1"
    assert run.latest_attempt() == 1
    assert "--resume" not in run.configs()["command.txt"]
    assert "--resume" in run.configs(attempt=2)["command.txt"]
    # the attempt selector still sees both attempts
    assert run.attempts() == [1, 2]
    # a moved run keeps working: the link is relative
    moved = new_run.parent / "moved"
    new_run.rename(moved)
    assert rd.open_run(moved).latest_attempt() == 1


def test_latest_symlink_as_prime_rl_makes_it(new_run):
    """`.attempt_2` link renamed over `latest`."""
    for sub in ("configs", "logs"):
        (new_run / sub / "latest").unlink()
        os.symlink("attempt_2", new_run / sub / ".attempt_2")
        os.rename(new_run / sub / ".attempt_2", new_run / sub / "latest")
    run = rd.open_run(new_run)
    assert run.latest_attempt() == 2
    assert run.overview().attempts == 2


def test_broken_latest_symlink_falls_back_to_highest(new_run):
    (new_run / "configs" / "latest").unlink()
    os.symlink("attempt_7", new_run / "configs" / "latest")
    (new_run / "logs" / "latest").unlink()
    os.symlink("attempt_7", new_run / "logs" / "latest")
    run = rd.open_run(new_run)
    assert run.latest_attempt() == 2
    assert "--resume" in run.configs()["command.txt"]
    probs = [p for p in run.problems() if p.path.endswith(os.path.join("configs", "latest"))]
    assert probs and "broken symlink" in probs[0].what


def test_missing_latest_uses_highest_attempt(new_run):
    (new_run / "configs" / "latest").unlink()
    (new_run / "logs" / "latest").unlink()
    shutil.copytree(new_run / "logs" / "attempt_2", new_run / "logs" / "attempt_3")  # a log-only attempt
    run = rd.open_run(new_run)
    assert run.latest_attempt() == 2  # configs decide which configs are current
    assert run.attempts() == [1, 2, 3]
    assert run.overview().attempts == 3


# Legacy layouts -----------------------------------------------------------------------------------
def test_old_layout_configs_directly_in_configs():
    run = rd.open_run(OLD_RUN)
    assert run.attempts() == [1]
    assert set(run.configs()) == {"trainer.json", "orchestrator.json", "inference.json"}
    cfg = run.config()
    assert cfg["orchestrator"]["max_steps"] == 3
    assert cfg["trainer"]["model"]["name"] == "Qwen/Qwen3-0.6B"
    want = json.loads((OLD_RUN / "configs" / "orchestrator.json").read_text())
    assert run.configs()["orchestrator.json"] == want


def test_resolved_dir_layout_aug24(new_run):
    """configs/resolved/*.json + configs/rl.toml, no attempts."""
    shutil.move(new_run / "configs" / "attempt_2" / "resolved", new_run / "configs" / "resolved")
    shutil.move(new_run / "configs" / "attempt_2" / "rl.toml", new_run / "configs" / "rl.toml")
    for n in ("attempt_1", "attempt_2"):
        shutil.rmtree(new_run / "configs" / n)
    (new_run / "configs" / "latest").unlink()
    run = rd.open_run(new_run)
    ov = run.overview()
    assert (ov.model, ov.max_steps, ov.train_envs, ov.eval_envs) == (
        "Qwen/Qwen3-4B", 10, ["math-python", "wiki-search"], ["gsm8k"])
    assert "rl.toml" in run.configs()
    assert "resolved/orchestrator.json" in run.configs()


def test_metrics_at_root_legacy_location(new_run):
    shutil.move(new_run / NEW_METRICS, new_run / "metrics.jsonl")
    frame = rd.open_run(new_run).metrics()
    assert_tidy_matches(frame, reference_file(new_run / "metrics.jsonl"))


def test_metrics_new_location_preferred(new_run):
    write_lines(new_run / "metrics.jsonl", [{"step": 99, "time": 1.0, "perf/mfu": 1.0}])
    frame = rd.open_run(new_run).metrics()
    assert 99 not in set(frame["step"].dropna())


def test_config_and_configs_new_sample():
    run = rd.open_run(NEW_RUN)
    cfgs = run.configs()
    resolved = NEW_RUN / "configs" / "attempt_2" / "resolved"
    assert cfgs["resolved/orchestrator.json"] == json.loads((resolved / "orchestrator.json").read_text())
    assert cfgs["resolved/envs/train/math-python.json"] == json.loads(
        (resolved / "envs" / "train" / "math-python.json").read_text())
    assert cfgs["rl.toml"] == (NEW_RUN / "configs" / "attempt_2" / "rl.toml").read_text()
    assert list(cfgs)[0] == "resolved/orchestrator.json"
    assert set(run.config()) == {"orchestrator", "trainer", "inference"}
    assert run.config()["trainer"]["max_steps"] == 10
    a1 = run.configs(attempt=1)
    assert a1["command.txt"] == (NEW_RUN / "configs" / "attempt_1" / "command.txt").read_text()


# SFT, names, envs ---------------------------------------------------------------------------------
def _sft_run(parent, rows):
    run = parent / "my-dataset--qwen3-0.6b--1a2b3c4d"
    resolved = run / "configs" / "attempt_1" / "resolved"
    resolved.mkdir(parents=True)
    (resolved / "sft.json").write_text(json.dumps(
        {"model": {"name": "Qwen/Qwen3-0.6B"}, "max_steps": 4, "data": {"name": "willcb/my-dataset"}}))
    (run / "logs" / "attempt_1").mkdir(parents=True)
    write_lines(run / "metrics.jsonl", rows)
    return run


def test_sft_run_detected_and_legacy_rows_are_trainer(tmp_path):
    rows = []
    for s in range(3):
        rows.append({"step": s, "time": 100.0 + s, "progress/epoch": 0, "progress/num_samples": 8 * (s + 1)})
        rows.append({"step": s, "time": 100.5 + s, "loss/mean": 1.0 / (s + 1), "optim/lr": 1e-5})
        rows.append({"step": s, "time": 100.6 + s, "time/step": 0.5})
    run_dir = _sft_run(tmp_path, rows)
    run = rd.open_run(run_dir)
    ov = run.overview()
    assert ov.flavor == "sft"
    assert ov.max_steps == 4 and ov.model == "Qwen/Qwen3-0.6B"
    assert ov.train_envs == ["willcb/my-dataset"]
    assert ov.last_step == 2 and ov.step == 3  # steps 0..2: three done
    frame = run.metrics()
    assert set(map(str, frame["producer"].unique())) == {"trainer"}  # spec 4.6 rule 1
    assert_tidy_matches(frame, reference_file(run_dir / "metrics.jsonl", sft=True))
    assert run.config()["max_steps"] == 4


def test_envs_and_model_from_run_name_when_configs_lack_them(new_run):
    for n in ("attempt_1", "attempt_2"):
        p = new_run / "configs" / n / "resolved" / "orchestrator.json"
        cfg = json.loads(p.read_text())
        del cfg["train"]
        del cfg["model"]
        p.write_text(json.dumps(cfg))
        (new_run / "configs" / n / "resolved" / "trainer.json").unlink()
    ov = rd.open_run(new_run).overview()
    assert ov.train_envs == ["math-python", "wiki-search"]
    assert ov.model == "qwen3-4b"
    assert ov.eval_envs == ["gsm8k"]


def test_run_without_configs_uses_name(tmp_path):
    run_dir = tmp_path / "gsm8k+math500--qwen3-8b--0badc0de"
    write_lines(run_dir / NEW_METRICS, [{"step": 0, "time": 1.0, "perf/mfu": 3.0, "producer": "trainer"}])
    ov = rd.open_run(run_dir).overview()
    assert ov.train_envs == ["gsm8k", "math500"]
    assert ov.model == "qwen3-8b"
    assert ov.max_steps is None
    assert ov.last_step == 0 and ov.step == 1
    assert ov.progress == "1/∞"


def test_non_pattern_name_left_empty(tmp_path):
    run_dir = make_rl_run(tmp_path, "my custom run", rows=[], train=())
    ov = rd.open_run(run_dir).overview()
    assert ov.train_envs == [] and ov.name == "my custom run"


def test_open_run_errors(tmp_path):
    with pytest.raises(rd.RunError, match="nope: no such file or directory"):
        rd.open_run(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(rd.RunError, match="not a run file of a supported kind"):
        rd.open_run(tmp_path / "file")
    (tmp_path / "plain").mkdir()
    with pytest.raises(rd.RunError, match="not a run directory of a supported kind .*prime-rl runs hold"):
        rd.open_run(tmp_path / "plain")


# Eval runs, trace stream, derived times -----------------------------------------------------------
def _eval_run(parent):
    run = parent / "gsm8k--qwen3-8b--0badc0de"
    resolved = run / "configs" / "attempt_1" / "resolved"
    resolved.mkdir(parents=True)
    (resolved / "eval.json").write_text(json.dumps({"model": {"name": "Qwen/Qwen3-8B"},
                                                     "env": [{"id": "gsm8k"}]}))
    stream = run / "monitors" / "file" / "traces" / "stream"
    stream.mkdir(parents=True)
    (stream / "00000.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    write_lines(run / NEW_METRICS, [{"step": 0, "time": 1_800_000_000.0, "eval/gsm8k/all/agent/avg@1": 0.5,
                                     "producer": "eval"}])
    return run


def test_eval_run_finished_when_every_chunk_is_sealed(tmp_path):
    run_dir = _eval_run(tmp_path)
    t = 1_800_000_000.0
    set_all_mtimes(run_dir, t)
    run = rd.open_run(run_dir)
    ov = run.overview(now=t + 5)
    assert ov.flavor == "eval" and ov.model == "Qwen/Qwen3-8B" and ov.train_envs == ["gsm8k"]
    assert ov.status == "completed"  # sealed stream wins over freshness
    live = run_dir / "monitors" / "file" / "traces" / "stream" / "00001.jsonl"
    live.write_text("{}\n")
    os.utime(live, (t + 50, t + 50))
    ov = run.overview(now=t + 60)
    assert ov.status == "running"
    assert ov.touched == pd.Timestamp(t + 50, unit="s", tz="UTC")  # the stream counts for running
    assert run.overview(now=t + 5000).status == "stopped"


def test_verifiers_eval_dir_with_only_traces_jsonl(tmp_path):
    run_dir = tmp_path / "out" / "gsm8k--gpt-4o--default--0badc0de"
    run_dir.mkdir(parents=True)
    (run_dir / "traces.jsonl").write_text("{}\n")
    os.utime(run_dir / "traces.jsonl", (1_700_000_000, 1_700_000_000))
    df = rd.discover([tmp_path / "out"])
    assert list(df["name"]) == [run_dir.name]
    ov = rd.open_run(run_dir).overview()
    assert ov.flavor == "eval"
    assert ov.updated == pd.Timestamp(1_700_000_000, unit="s", tz="UTC")
    assert ov.model == "gpt-4o"


def test_started_falls_back_to_config_dir_mtime(tmp_path):
    run_dir = make_rl_run(tmp_path, "a--m--0000000a", rows=[])
    os.utime(run_dir / "configs" / "attempt_1" / "resolved", (1_750_000_000, 1_750_000_000))
    ov = rd.open_run(run_dir).overview()
    assert ov.started == pd.Timestamp(1_750_000_000, unit="s", tz="UTC")
    assert ov.step is None


def test_created_is_the_first_logged_time_not_a_file_time(new_run):
    os.utime(new_run / "configs", (1_760_000_000, 1_760_000_000))
    ov = rd.open_run(new_run).overview()
    assert ov.created == ov.started == pd.Timestamp(reference_file(new_run / NEW_METRICS).first_row_time, unit="s", tz="UTC")


def test_a_workdir_whose_logs_hold_other_logs_is_not_a_prime_rl_run(tmp_path):
    work = tmp_path / "workdir"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "my-exp.log").write_text("step:1 - critic/score/mean:0.5\n")
    assert rd.open_run(work / "logs" / "my-exp.log").kind != "prime-rl"
    assert "prime-rl" not in set(rd.discover([work])["kind"])
    for marker in ("latest", "attempt_1", "trainer.log"):
        run = tmp_path / f"run-{marker}"
        (run / "logs").mkdir(parents=True)
        (run / "logs" / marker).mkdir() if marker != "trainer.log" else (run / "logs" / marker).write_text("")
        assert rd.open_run(run).kind == "prime-rl"


def test_a_warm_overview_makes_at_most_20_filesystem_calls(tmp_path, monkeypatch):
    """The live run card calls `overview()` every second in every session: once the summary is
    cached, it only re-checks the files it depends on."""
    import builtins

    from helpers import NEW_RUN, copy_run

    run = rd.open_run(copy_run(NEW_RUN, tmp_path))
    first = run.overview()
    calls = []

    def counted(name, real):
        def call(*a, **k):
            calls.append((name, a[0] if a else None))
            return real(*a, **k)
        return call

    for name in ("stat", "lstat", "listdir", "scandir", "open", "readlink", "access"):
        monkeypatch.setattr(os, name, counted(name, getattr(os, name)))
    monkeypatch.setattr(builtins, "open", counted("open", builtins.open))
    again = run.overview()  # the app keeps one Run object per run (streamlit_cache.get_run)
    monkeypatch.undo()
    assert again == first
    assert len(calls) <= 20, "\n".join(f"{n} {os.path.relpath(str(p), run.path)}" for n, p in calls)
    with open(os.path.join(run.path, "monitors/file/metrics.jsonl"), "a") as fh:  # the run moves on
        fh.write('{"step": 50, "time": 1.9e9, "loss/mean": 0.1, "producer": "trainer"}\n')
    assert run.overview().last_step == 50
