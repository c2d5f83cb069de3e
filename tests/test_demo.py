"""The synthetic demo runs (`rundash_core.demo`): written fast, once, in the prime-rl layout the
core reads, and kept growing by the live writer. Every test writes into tmp_path, never home."""
from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import rundash_core as rd
from rundash_core import demo
from rundash_core.demo.folder import MARKER
from rundash_core.demo.runs import RESUME_CRASH_STEP, RESUME_FROM, RUN_NAMES, SFT_STEPS

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
LOGURU = re.compile(r"^(?P<time>\d{2}:\d{2}:\d{2}) +(?P<level>TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) (?P<msg>.*)$")
NAMES = RUN_NAMES


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One demo folder shared by the read-only tests, and how long writing it took."""
    root = tmp_path_factory.mktemp("cache") / "demo"
    t0 = time.perf_counter()
    folder = demo.ensure_demo(root)
    return folder, time.perf_counter() - t0


@pytest.fixture(scope="module")
def folder(written):
    return written[0]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _all_mtimes(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = os.lstat(p).st_mtime_ns
    return out


# Writing ---------------------------------------------------------------------------------------

def test_writes_fast_small_and_returns_the_output_dir(written):
    folder, seconds = written
    assert seconds < 5.0, f"demo write took {seconds:.2f}s"
    runs = sorted(p.name for p in folder.iterdir() if p.is_dir())
    assert runs == sorted(NAMES.values())
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)
    assert size < 10 << 20, f"demo is {size / 1e6:.1f} MB"
    marker = json.loads((folder / MARKER).read_text())
    assert marker["version"] == demo.DEMO_VERSION
    # written through a temp sibling that was renamed: nothing left next to it
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


def test_second_call_is_idempotent_and_cheap(tmp_path):
    root = tmp_path / "demo"
    assert demo.ensure_demo(root) == root
    before = _all_mtimes(root)
    inode = os.stat(root / NAMES["live"] / "monitors/file/metrics.jsonl").st_ino
    t0 = time.perf_counter()
    assert demo.ensure_demo(root) == root
    assert time.perf_counter() - t0 < 0.1
    assert _all_mtimes(root) == before
    assert os.stat(root / NAMES["live"] / "monitors/file/metrics.jsonl").st_ino == inode


def test_stale_version_is_rewritten(tmp_path):
    root = tmp_path / "demo"
    demo.ensure_demo(root)
    marker = root / MARKER
    marker.write_text(json.dumps({"version": demo.DEMO_VERSION - 1, "written": time.time()}))
    (root / "leftover-from-old-version").mkdir()
    demo.ensure_demo(root)
    assert json.loads(marker.read_text())["version"] == demo.DEMO_VERSION
    assert not (root / "leftover-from-old-version").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # the old copy was removed


def test_refuses_to_replace_a_folder_that_is_not_a_demo(tmp_path):
    root = tmp_path / "mine"
    root.mkdir()
    (root / "precious.txt").write_text("keep me")
    with pytest.raises(RuntimeError, match="not a rundash demo"):
        demo.ensure_demo(root)
    assert (root / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_content_is_deterministic_for_a_given_now(tmp_path):
    now = 1_790_000_000.0
    a = demo.ensure_demo(tmp_path / "a", now=now)
    b = demo.ensure_demo(tmp_path / "b", now=now)
    files_a = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file() and p.name != MARKER)
    files_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file() and p.name != MARKER)
    assert files_a == files_b and len(files_a) > 40
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
        assert os.stat(a / rel).st_mtime == os.stat(b / rel).st_mtime, rel
    live_rows = _rows(a / NAMES["live"] / "monitors/file/metrics.jsonl")
    assert max(r["time"] for r in live_rows) == pytest.approx(now, abs=1.0)


def test_demo_root_honours_the_cache_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(tmp_path / "cache"))
    assert demo.demo_root() == tmp_path / "cache" / "demo"
    assert not (tmp_path / "cache").exists()  # asking where it goes creates nothing


def test_demo_root_falls_back_when_the_cache_dir_is_unwritable(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")  # nothing can be created below a regular file, even by root
    monkeypatch.setenv("RUNDASH_CACHE_DIR", str(blocker / "cache"))
    root = demo.demo_root()
    assert not str(root).startswith(str(blocker)) and root.name == "demo"
    assert blocker.read_text() == "not a directory"


# What the core reads back -----------------------------------------------------------------------

def test_discover_lists_the_four_runs_with_their_status(folder):
    runs = rd.discover([folder]).set_index("name")
    assert sorted(runs.index) == sorted(NAMES.values())
    assert set(runs["kind"]) == {"prime-rl"}
    assert runs["error"].isna().all()

    live = runs.loc[NAMES["live"]]
    assert (live.status, live.model, live.max_steps, live.attempts, live.flavor) == \
        ("running", "Qwen/Qwen3-4B", 2000, 1, "rl")
    assert 140 <= live.step <= 160
    assert live.train_envs == ["math-python", "wiki-search"] and live.eval_envs == ["gsm8k"]

    done = runs.loc[NAMES["completed"]]
    assert (done.status, done.model, done.step, done.max_steps, done.attempts) == \
        ("completed", "Qwen/Qwen3-0.6B", 300, 300, 1)
    assert pd.Timestamp.now(tz="UTC") - done.updated > pd.Timedelta(hours=20)

    resumed = runs.loc[NAMES["resumed"]]
    assert (resumed.status, resumed.model, resumed.max_steps, resumed.attempts) == \
        ("stopped", "Qwen/Qwen3-1.7B", 200, 2)
    assert resumed.step < resumed.max_steps
    assert pd.Timedelta(hours=2) < pd.Timestamp.now(tz="UTC") - resumed.updated < pd.Timedelta(hours=4)

    sft = runs.loc[NAMES["sft"]]
    assert (sft.flavor, sft.status, sft.model) == ("sft", "completed", "Qwen/Qwen3-0.6B")
    assert sft.step == sft.max_steps == SFT_STEPS
    assert sft.train_envs == ["willcb/R1-reverse-wikipedia-paragraphs-v1-1000"]

    assert list(runs.index)[0] == NAMES["live"]  # newest first


def test_live_metrics_have_both_producers_and_time_keyed_inference_rows(folder):
    run = rd.open_run(folder / NAMES["live"])
    m = run.metrics()
    assert set(m["producer"].unique()) == {"trainer", "orch"}
    timed = m[m["step"].isna()]
    assert len(timed)
    timed_keys = set(timed["metric"].astype(str))
    for key in ("kv_cache_usage_perc/mean", "kv_cache_usage_perc/min", "kv_cache_usage_perc/max",
                "num_preemptions_total:rate/sum", "num_requests_running/mean", "num_requests_waiting/max",
                "prefix_cache_hit_rate/pooled", "prefix_cache_hit_rate/min", "generation_tokens_total:rate/sum",
                "prompt_tokens_total:rate/sum"):
        assert f"inference/agg/{key}" in timed_keys, key
    for key in ("dispatcher/inflight/train", "dispatcher/inflight/eval", "concurrency/max_inflight"):
        assert key in timed_keys
    assert set(timed["producer"].unique()) == {"orch"}
    # ~every 5 s of simulated time
    inf_times = timed[timed["metric"] == "inference/agg/kv_cache_usage_perc/mean"]["time"].sort_values()
    assert inf_times.diff().dropna().median() == pytest.approx(5.0, abs=0.5)

    step_time = m[(m["metric"] == "time/step") & m["step"].notna()]
    assert set(step_time["producer"].unique()) == {"trainer", "orch"}
    assert not step_time.duplicated(["step", "producer"]).any()
    wide = run.metrics_wide()
    assert {"trainer:time/step", "orch:time/step"} <= set(wide.columns)
    assert "train/agg/effective/agent/reward/mean" in wide.columns
    assert "train/math-python/all/agent/reward/mean" in wide.columns
    assert any(c.startswith("eval/gsm8k/all/agent/avg@") for c in wide.columns)
    assert any(c.startswith("eval/gsm8k/effective/agent/pass@") for c in wide.columns)


def test_curves_look_like_training(folder):
    wide = rd.open_run(folder / NAMES["completed"]).metrics_wide().set_index("step")
    reward = wide["train/reverse-text/all/agent/reward/mean"].dropna()
    assert reward.iloc[-50:].mean() > reward.iloc[:20].mean() + 0.3
    assert reward.diff().abs().dropna().mean() > 0.005  # noisy, not a straight line
    entropy = wide["entropy/all/mean"].dropna()
    assert entropy.iloc[-30:].mean() < entropy.iloc[:10].mean()
    lr = wide["optim/lr"].dropna()
    assert lr.iloc[0] < lr.max() and lr.iloc[-1] < lr.max()  # warmup, then decay
    gn = wide["optim/grad_norm"].dropna()
    assert gn.max() > 3 * gn.median()  # occasional spikes
    tokens = wide["progress/total_tokens"].dropna()
    assert tokens.is_monotonic_increasing


def test_metric_rows_follow_the_writer_rules(folder):
    for name in NAMES.values():
        rows_path = folder / name / "monitors/file/metrics.jsonl"
        text = rows_path.read_text()
        assert text.endswith("\n")
        times = []
        for line in text.splitlines():
            keys = list(json.loads(line))
            assert keys[:2] == ["step", "time"] and keys[-1] == "producer", (name, keys[:3])
            times.append(json.loads(line)["time"])
        assert times == sorted(times), name
    trainer_rows = [r for r in _rows(folder / NAMES["live"] / "monitors/file/metrics.jsonl")
                    if r["producer"] == "trainer" and r["step"] == 100]
    assert len(trainer_rows) == 5
    assert [next(k for k in r if k not in ("step", "time")).split("/")[0] for r in trainer_rows] == \
        ["perf", "optim", "loss", "time", "system"]


def test_resumed_run_repeats_steps_and_the_reader_merges_them(folder):
    path = folder / NAMES["resumed"]
    raw = Counter(r["step"] for r in _rows(path / "monitors/file/metrics.jsonl")
                  if r["producer"] == "trainer" and "time/step" in r)
    assert all(raw[s] == 2 for s in range(RESUME_FROM + 1, RESUME_CRASH_STEP + 1))
    assert raw[RESUME_FROM] == 1 and raw[RESUME_CRASH_STEP + 1] == 1

    m = rd.open_run(path).metrics()
    stepped = m[m["step"].notna()]
    assert not stepped.duplicated(["step", "producer", "metric"]).any()
    # last write wins: step 70's value is attempt 2's
    last = [r for r in _rows(path / "monitors/file/metrics.jsonl")
            if r["step"] == 70 and r["producer"] == "trainer" and "optim/grad_norm" in r][-1]
    got = stepped[(stepped["step"] == 70) & (stepped["metric"] == "optim/grad_norm")]["value"]
    assert got.tolist() == [last["optim/grad_norm"]]


def test_resumed_run_attempts_configs_and_logs(folder):
    run = folder / NAMES["resumed"]
    assert os.readlink(run / "configs/latest") == "attempt_2"
    assert os.readlink(run / "logs/latest") == "attempt_2"
    assert "--resume" not in (run / "configs/attempt_1/command.txt").read_text()
    cmd2 = (run / "configs/attempt_2/command.txt").read_text()
    assert cmd2.startswith("uv run rl ") and "--resume" in cmd2 and cmd2.endswith("\n")
    orch = json.loads((run / "configs/attempt_2/resolved/orchestrator.json").read_text())
    assert orch["max_steps"] == 200 and orch["model"]["name"] == "Qwen/Qwen3-1.7B"
    assert [s["name"] for s in orch["train"]["source"]] == ["acereason-math"]
    assert [s["name"] for s in orch["eval"]["source"]] == ["math500"]
    lines = (run / "logs/attempt_1/trainer.log").read_text().splitlines()
    err_at = [i for i, line in enumerate(lines) if "\x1b[31m\x1b[1m  ERROR" in line]
    assert err_at and LOGURU.match(ANSI.sub("", lines[err_at[-1]])).group("level") == "ERROR"
    tail = lines[err_at[-1] + 1:]  # the traceback: continuation lines that belong to the ERROR record
    assert tail and all(LOGURU.match(ANSI.sub("", line)) is None for line in tail)
    assert "Traceback (most recent call last):" in tail[0] and "torch.OutOfMemoryError: CUDA out of memory" in tail[-1]
    assert "CUDA out of memory" not in (run / "logs/attempt_2/trainer.log").read_text()
    assert rd.open_run(run).attempts() == [1, 2]


def test_layout_configs_and_logs_match_the_spec(folder):
    for name in NAMES.values():
        run = folder / name
        for kind in ("configs", "logs"):
            link = run / kind / "latest"
            assert link.is_symlink() and not os.path.isabs(os.readlink(link)), link
            assert re.fullmatch(r"attempt_\d+", os.readlink(link))
            assert link.resolve().is_dir()
        latest = run / "configs/latest"
        assert (latest / "command.txt").read_text().startswith("uv run ")
        assert (run / "trainer_step").read_text().strip().isdigit()
        for log in (run / "logs/latest").glob("*.log"):
            if log.name == "inference.log":
                continue
            lines = log.read_text().splitlines()
            assert lines and all("\x1b[" in line for line in lines if LOGURU.match(ANSI.sub("", line)))
            parsed = [LOGURU.match(ANSI.sub("", line)) for line in lines]
            assert sum(p is not None for p in parsed) >= 0.9 * len(lines), log
    live = folder / NAMES["live"]
    assert (live / "configs/latest/rl.toml").is_file()
    for comp in ("trainer", "orchestrator", "inference"):
        assert (live / f"configs/latest/resolved/{comp}.json").is_file()
    for rel in ("envs/train/math-python.log", "envs/train/wiki-search.log", "envs/eval/gsm8k.log",
                "inference.log", "trainer.log", "orchestrator.log"):
        assert (live / "logs/latest" / rel).stat().st_size > 0, rel
    plan = json.loads((live / "monitors/file/plan.json").read_text())
    assert "0" in plan["gsm8k"] and "25" in plan["gsm8k"]
    sft = folder / NAMES["sft"]
    assert (sft / "configs/latest/sft.toml").is_file()
    cfg = json.loads((sft / "configs/latest/resolved/sft.json").read_text())
    assert cfg["max_steps"] == SFT_STEPS and cfg["model"]["name"] == "Qwen/Qwen3-0.6B" and cfg["data"]["name"]
    sft_keys = set(rd.open_run(sft).metrics()["metric"].astype(str))
    assert {"loss/mean", "loss/perplexity", "val/loss", "val/perplexity", "progress/epoch", "optim/lr",
            "optim/grad_norm", "perf/mfu", "perf/throughput", "perf/peak_memory", "time/step",
            "time/forward_backward", "time/save_ckpt"} <= sft_keys
    assert not any(k.startswith("inference/") for k in sft_keys)


def test_old_runs_have_old_mtimes(folder):
    now = time.time()
    for key, age in (("completed", 86400), ("sft", 2 * 86400), ("resumed", 3 * 3600)):
        run = folder / NAMES[key]
        newest = max(os.lstat(os.path.join(d, f)).st_mtime for d, _, fs in os.walk(run) for f in fs)
        assert now - newest == pytest.approx(age, abs=600), key


# Traces ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["live", "resumed"])
def test_trace_index_offsets_point_at_their_records(folder, key):
    traces = folder / NAMES[key] / "monitors/file/traces"
    chunk = traces / "stream/00000.jsonl"
    index = _rows(traces / "stream.index.jsonl")
    assert 20 <= len(index) <= 100
    assert [r["line"] for r in index] == list(range(1, len(index) + 1))
    with open(chunk, "rb") as fh:
        for row in index:
            assert row["chunk"] == 0
            fh.seek(row["offset"])
            rec = json.loads(fh.readline())
            assert rec["id"] == row["id"]
            assert [t["id"] for t in rec["traces"]] == row["trace_ids"]
            assert row["env"] == rec["env"]["name"]
    assert {r["kind"] for r in index} == {"train", "eval"}
    assert any(not r["ok"] for r in index)  # a failed episode with no trace
    records = [json.loads(line) for line in chunk.read_bytes().splitlines()]
    good = next(r for r in records if r["traces"])
    node = good["traces"][0]["nodes"][-1]
    assert len(node["token_ids"]) == len(node["mask"]) and len(node["logprobs"]) == sum(node["mask"])
    assert "parent" not in good["traces"][0]["nodes"][0]
    assert set(good["traces"][0]["info"]) >= {"kind", "dispatch", "arrival"}
    ann_index = _rows(traces / "annotations/orch.index.jsonl")
    with open(traces / "annotations/orch/00000.jsonl", "rb") as fh:
        for row in ann_index:
            fh.seek(row["offset"])
            assert json.loads(fh.readline())["trace_id"] == row["trace_id"]


# Live writer ------------------------------------------------------------------------------------

def _max_step(run: Path) -> int:
    return int(rd.open_run(run).metrics()["step"].max())


def test_live_writer_appends_whole_steps_and_stops(tmp_path):
    root = tmp_path / "demo"
    folder = demo.ensure_demo(root)
    live = folder / NAMES["live"]
    start = _max_step(live)
    index_before = len(_rows(live / "monitors/file/traces/stream.index.jsonl"))
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    writer = demo.start_live_writer(root, interval_s=0.1)
    try:
        assert writer.daemon and writer.is_alive()
        assert demo.start_live_writer(root, interval_s=0.1) is writer  # one per root
        deadline = time.monotonic() + 10
        while _max_step(live) < start + 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _max_step(live) >= start + 3, writer.error
    finally:
        assert demo.stop_live_writer(root)
    assert not writer.is_alive()
    assert demo.stop_live_writer(root) is False

    data = (live / "monitors/file/metrics.jsonl").read_bytes()
    assert data.endswith(b"\n")
    rows = [json.loads(line) for line in data.splitlines()]  # no torn line anywhere
    end = max(r["step"] for r in rows if r["step"] is not None)
    new = [r for r in rows if r["step"] is not None and r["step"] > start]
    for step in range(start + 1, end + 1):
        mine = [r for r in new if r["step"] == step]
        assert sum(r["producer"] == "trainer" for r in mine) == 5, step
        assert sum(r["producer"] == "orch" and "progress/total_tokens" in r for r in mine) == 1, step
    assert rows[-1]["time"] == pytest.approx(time.time(), abs=30)
    assert any(r["step"] is None and r["time"] > time.time() - 30 for r in rows)
    assert (live / "trainer_step").read_text() == str(end)
    assert f"Step {end} |" in (live / "logs/attempt_1/trainer.log").read_text()
    assert f"Step {end} |" in (live / "logs/attempt_1/orchestrator.log").read_text()
    index = _rows(live / "monitors/file/traces/stream.index.jsonl")
    assert len(index) == index_before + (end - start)
    with open(live / "monitors/file/traces/stream/00000.jsonl", "rb") as fh:
        for row in index[index_before:]:
            fh.seek(row["offset"])
            assert json.loads(fh.readline())["id"] == row["id"]
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before
    assert rd.discover([folder]).set_index("name").loc[NAMES["live"], "status"] == "running"


def test_live_writer_continues_from_the_last_step_after_a_restart(tmp_path):
    root = tmp_path / "demo"
    live = demo.ensure_demo(root) / NAMES["live"]
    for _ in range(2):
        before = _max_step(live)
        demo.start_live_writer(root, interval_s=0.05)
        deadline = time.monotonic() + 10
        while _max_step(live) <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        demo.stop_live_writer(root)
        assert _max_step(live) > before
    trainer_steps = [r["step"] for r in _rows(live / "monitors/file/metrics.jsonl")
                     if r["producer"] == "trainer" and "time/step" in r]
    assert trainer_steps == sorted(trainer_steps) and len(trainer_steps) == len(set(trainer_steps))


def test_live_writer_never_writes_outside_the_demo_folder(tmp_path):
    root = tmp_path / "demo"
    live = demo.ensure_demo(root) / NAMES["live"]
    outside = tmp_path / "outside.log"
    outside.write_text("untouched\n")
    log = live / "logs/attempt_1/trainer.log"
    log.unlink()
    log.symlink_to(outside)
    writer = demo.start_live_writer(root, interval_s=0.05)
    try:
        deadline = time.monotonic() + 10
        while writer.error is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        demo.stop_live_writer(root)
    assert writer.error and "outside the demo folder" in writer.error
    assert outside.read_text() == "untouched\n"
